package run

import (
	"context"
	"fmt"
	"slices"
	"time"

	"gantry/models/classify"
	"gantry/models/environment"
	"gantry/models/review"
	"gantry/models/risk"
	"gantry/policies"
)

// The plan gates between a finished plan and PENDING_APPROVAL (DESIGN §2): the risk
// class from the org's approval matrix, the policy decision and the cost estimate.
// They are computed before the run is locked (a 10,000-change plan takes a moment)
// and recorded with the plan in FinishPlan's transaction.

// PolicyTimeout bounds one evaluation of every policy on one plan.
const PolicyTimeout = time.Minute

// Assessment is what the plan gates found about one plan.
type Assessment struct {
	Classification classify.Result
	Risk           risk.Assessment
	MatrixVersion  int
	Policy         policies.Evaluation
	Cost           review.Cost
}

// assess runs the plan gates on run r's plan.
func (s *Jobs) assess(ctx context.Context, r Run, planJSON []byte) (Assessment, error) {
	return s.k.gates(ctx, r, planJSON, s.k.observer.PolicyEvaluated)
}

// gates runs the plan gates on run r's plan: the plan's and the request form's preview
// (of a run not yet stored) judge alike. observe, when not nil, is told how long the
// policies took and whether they failed to evaluate.
func (k *core) gates(ctx context.Context, r Run, planJSON []byte, observe func(time.Duration, bool)) (Assessment, error) {
	facts, err := k.catalog.Facts(r.TemplateName)
	if err != nil {
		return Assessment{}, fmt.Errorf("reading template %s: %w", r.TemplateName, err)
	}
	res, err := classify.Classify(planJSON, facts.ClassifyOptions())
	if err != nil {
		return Assessment{}, fmt.Errorf("reading plan JSON: %w", err)
	}
	env, err := k.environments.Lookup(ctx, r.OrganizationID, r.EnvironmentID)
	if err != nil {
		return Assessment{}, err
	}
	matrix, err := k.matrix.Current(ctx, r.OrganizationID)
	if err != nil {
		return Assessment{}, err
	}
	a := Assessment{Classification: res, MatrixVersion: matrix.Version, Cost: review.EstimateCost(res, facts.Prices)}
	a.Risk = assessRisk(matrix.Matrix, factsOf(r, env, res, facts))

	bundle, err := k.policies.Bundle(ctx, r.OrganizationID)
	if err != nil {
		return Assessment{}, err
	}
	modes, err := k.policies.Modes(ctx, r.EnvironmentID)
	if err != nil {
		return Assessment{}, err
	}
	requester, err := k.members.Member(ctx, r.OrganizationID, r.RequestedBy)
	if err != nil {
		return Assessment{}, fmt.Errorf("reading the requester's membership: %w", err)
	}
	role := string(requester.Role)
	input := policies.RunContext{ID: r.ID, Kind: string(r.Kind), Organization: r.OrganizationID,
		Actor:       policies.Actor{ID: r.RequestedBy, Name: r.RequestedByName, Role: role},
		Environment: policies.Environment{ID: r.EnvironmentID, Name: env.Name, Tier: string(env.Tier), RequiresApproval: env.RequiresApproval, Restricted: env.Restricted},
		Template: policies.Template{Name: r.TemplateName, Version: r.TemplateVersion, Source: facts.Source, ModuleDigest: r.ModuleDigest,
			Irreversible: facts.Irreversible, OrgScoped: facts.OrgScoped},
		Risk:           policies.Risk{Class: int(a.Risk.Class), Rule: a.Risk.Rule.ID, Approver: string(a.Risk.Decision.Approver)},
		Classification: policyClassification(res),
	}
	// A policy that runs away on a large plan fails the gate instead of holding it.
	evalCtx, cancel := context.WithTimeout(ctx, PolicyTimeout)
	defer cancel()
	started := time.Now()
	a.Policy, err = bundle.Evaluate(evalCtx, planJSON, input, modes)
	if observe != nil {
		observe(time.Since(started), err != nil)
	}
	if err != nil {
		return Assessment{}, fmt.Errorf("evaluating policies: %w", err)
	}
	return a, nil
}

// factsOf is what the risk rules look at.
func factsOf(r Run, env environment.Environment, res classify.Result, facts TemplateFacts) risk.Facts {
	c := res.Counts
	f := risk.Facts{Kind: string(r.Kind), Create: c.Create, Update: c.Update, Replace: c.Replace, Destroy: c.Destroy,
		Irreversible: res.HasIrreversible, OrgScopedChange: res.TouchesOrgScoped, Tier: string(env.Tier), RequiresApproval: env.RequiresApproval}
	f.HasChanges = c.Create+c.Update+c.Replace+c.Destroy > 0
	for _, ch := range res.Changes {
		// An org policy type (the manifest says which): changing it changes what the
		// whole organization may do (DESIGN §3 risk 3, "org-level policy change").
		if ch.Class != classify.ClassNoOp && ch.Class != classify.ClassRead && slices.Contains(facts.OrgPolicy, ch.Type) {
			f.OrgPolicyChange = true
			break
		}
	}
	return f
}

// policyClassification is the classification as policies see it: counts and the
// changes that do something.
func policyClassification(res classify.Result) policies.Classification {
	c := res.Counts
	out := policies.Classification{Counts: map[string]int{"create": c.Create, "update": c.Update, "replace": c.Replace,
		"destroy": c.Destroy, "read": c.Read, "no_op": c.NoOp}}
	for _, ch := range res.Changes {
		if ch.Class == classify.ClassNoOp || ch.Class == classify.ClassRead {
			continue
		}
		out.Changes = append(out.Changes, policies.ClassifiedChange{Address: ch.Address, Type: ch.Type, Class: string(ch.Class),
			Irreversible: ch.Irreversible, OrgScoped: ch.OrgScoped, ActionReason: ch.ActionReason,
			Dependents: capped(ch.Dependents)})
	}
	return out
}

// maxPolicyDependents bounds each change's dependents in the policy input: instances of
// one resource share their dependents, and copying 5,000 of them into each of 5,000
// changes would build millions of terms (docs/policy-input.md says so).
const maxPolicyDependents = 100

func capped(deps []string) []string {
	if len(deps) > maxPolicyDependents {
		return deps[:maxPolicyDependents]
	}
	return deps
}

// record stores the assessment on the locked run: the evaluation row and the fields
// the decision binds to.
func (s *Plans) record(ctx context.Context, r *Run, a Assessment) error {
	ev, err := s.k.policies.Record(ctx, r.OrganizationID, r.ID, r.PlanRevision, r.PlanDigest, a.Policy)
	if err != nil {
		return err
	}
	r.assessedAs(a.Risk)
	r.MatrixVersion = a.MatrixVersion
	r.PolicyEvaluationID, r.PolicyOutcome, r.PolicyBundleDigest, r.PolicyResultDigest = &ev.ID, ev.Outcome, ev.BundleDigest, ev.ResultDigest
	cost := a.Cost
	r.Cost = &cost
	return nil
}

// assessedAs records risk assessment a on the run: its class, the rule that set it and
// the decision it needs (route and RequirementOf read them).
func (r *Run) assessedAs(a risk.Assessment) {
	class, d := int(a.Class), a.Decision
	r.RiskClass, r.RiskLevel, r.RiskRule, r.RiskReason = &class, string(a.Level), a.Rule.ID, a.Reason
	r.RequiredApprover, r.FourEyes, r.Elevated = string(d.Approver), d.FourEyes, d.Elevated
	r.Escalation, r.EscalateAfterMinutes = string(d.Escalation), d.EscalateAfterHours*60
}

// failedRules names the rules of an evaluation that failed at enforcement e.
func failedRules(ev policies.Evaluation, e policies.Enforcement) []string {
	var out []string
	for _, res := range ev.Results {
		if !res.Passed && res.Enforcement == e {
			out = append(out, res.RuleID)
		}
	}
	return out
}
