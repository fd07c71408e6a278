package governance

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"gantry/models/words"

	"gantry/models/audit"
	"gantry/models/environment"
	"gantry/models/risk"
	"gantry/policies"
)

// inForce is what one environment's gates are derived from besides the environment.
type inForce struct {
	matrix   risk.Version
	bundle   *policies.Bundle
	modes    map[string]policies.Enforcement
	standing environment.Standing
	applies  audit.ApplyCount
}

// changeKind is a kind of change the approval gate is reported for: the facts the plan
// classifier states of a plan making that change alone.
type changeKind struct {
	ID, Name string
	Facts    risk.Facts
}

var changeKinds = []changeKind{
	{"create-update", "create or update in place", risk.Facts{Kind: risk.KindApply, Create: 1, Update: 1}},
	{"replace", "replace", risk.Facts{Kind: risk.KindApply, Replace: 1}},
	{"destroy", "destroy (a delete, or a destroy run)", risk.Facts{Kind: risk.KindDestroy, Destroy: 1}},
	{"data-loss", "replace or destroy of a data-bearing resource", risk.Facts{Kind: risk.KindApply, Replace: 1, Irreversible: true}},
	{"org-scoped", "change to an org-scoped resource (IAM, policy)", risk.Facts{Kind: risk.KindApply, Update: 1, OrgScopedChange: true}},
	{"org-policy", "org-level policy change", risk.Facts{Kind: risk.KindApply, Update: 1, OrgScopedChange: true, OrgPolicyChange: true}},
}

// environment is one environment's gates and findings.
func (s Service) environment(env environment.Environment, f inForce) EnvironmentReport {
	ex := s.Executors.Executor(env.Executor)
	er := EnvironmentReport{ID: env.ID, Name: env.Name, Tier: string(env.Tier), Restricted: env.Restricted, DecisionWindowHours: env.DecisionWindowHours,
		Executor: ex.Name, Applies: f.applies, Integration: environment.IntegrationOf(env, f.standing)}
	er.Gates = append(er.Gates, planGate(ex), policyGate(f.bundle, f.modes))
	var approvals []assessedKind
	for _, k := range changeKinds {
		a := s.assess(env, f.matrix.Matrix, k)
		approvals = append(approvals, a)
		er.Gates = append(er.Gates, approvalGate(f.matrix.Version, a))
	}
	er.Gates = append(er.Gates, s.applyBindingGate(f.applies), s.verificationGate(f.applies), entitlementsGate(env, ex))
	var credentials Finding
	er.ApplyIdentity, credentials = s.applyIdentity(f.standing)
	er.Gates = append(er.Gates, credentialsGate(er.ApplyIdentity, credentials), driftGate(env))
	for _, g := range er.Gates {
		if finding, ok := gateFinding(g, credentials); ok && !g.Holds() {
			er.Findings = append(er.Findings, finding)
		}
	}
	er.Findings = append(er.Findings, approvalFindings(approvals, f.applies)...)
	if f.applies.Unevidenced > 0 {
		er.Findings = append(er.Findings, Finding{Gate: "apply-binding", Count: f.applies.Unevidenced, Runs: f.applies.UnevidencedRuns,
			Text: fmt.Sprintf("%s: %s started without a matching approval record (no approval before the apply, or one that bound another plan digest)",
				Unevidenced, applies(f.applies.Unevidenced)),
			Setting: Setting{Name: "none allows this: no setting lets an apply start without an approval in force; compare these runs' events in the audit history", Place: PlaceHistory}})
	}
	return er
}

// assessedKind is a change kind with what a plan of it gets in one environment, and
// whether the floors lifted the matrix's own answer.
type assessedKind struct {
	changeKind
	risk.Assessment
	Raised bool
}

// assess asks the run rules what a plan of kind k gets in env under matrix m.
func (s Service) assess(env environment.Environment, m risk.Matrix, k changeKind) assessedKind {
	f := k.Facts
	f.HasChanges, f.Tier, f.RequiresApproval = true, string(env.Tier), env.RequiresApproval
	a := s.Rules.Gate(m, f)
	own := m.Assess(f)
	raised := own.Class != a.Class || own.Decision.Approver != a.Decision.Approver || own.Decision.FourEyes != a.Decision.FourEyes ||
		own.Decision.Elevated != a.Decision.Elevated
	return assessedKind{changeKind: k, Assessment: a, Raised: raised}
}

// approvalGate is who approves a plan of one change kind: a person, not the requester
// (enforced); a person who may be the requester (a finding); or Gantry alone
// (self-service, no person's gate).
func approvalGate(version int, a assessedKind) Gate {
	d := a.Decision
	g := Gate{ID: "approval-" + a.ID, Name: "Approval: " + a.Name, Checks: "who approves the exact plan digest before it is applied"}
	matrix := fmt.Sprintf("approval matrix version %d", version)
	if version == 0 {
		matrix = "the default approval matrix (never edited)"
	}
	row := fmt.Sprintf("%s, risk %s (rule %s)", matrix, a.Level, a.Rule.ID)
	switch {
	case d.Approver == risk.ApproverSystem:
		g.Status, g.EnforcedBy = SelfService, row+": Gantry approves it by itself, bound to the same evidence as a person's approval; no person decides (risk 1 in an environment that does not require approval)"
	case !d.Approver.Person():
		g.Status, g.EnforcedBy = UnenforcedUnknown, row+": "+d.Summary()
	case !d.FourEyes:
		g.Status, g.EnforcedBy = Flagged, row+": "+d.Summary()+" decides, but four eyes is off: the requester may approve her own run"
	default:
		g.Status, g.EnforcedBy = Enforced, row+": "+d.Summary()
	}
	if a.Raised {
		g.EnforcedBy += " (the floors hold it there, whatever the matrix says)"
	}
	return g
}

// approvalFindings are the approval gates that do not hold, grouped: the change kinds
// Gantry approves alone (with the self-service applies on record), those whose requester
// may approve them, per level, and the applies their own requester approved.
func approvalFindings(kinds []assessedKind, c audit.ApplyCount) []Finding {
	var out []Finding
	var selfService []string
	var selfServiceRules []string
	byLevel := map[risk.Level][]string{}
	var levels []risk.Level
	for _, k := range kinds {
		switch d := k.Decision; {
		case d.Approver == risk.ApproverSystem:
			selfService = append(selfService, k.Name)
			if !slices.Contains(selfServiceRules, k.Rule.ID) {
				selfServiceRules = append(selfServiceRules, k.Rule.ID)
			}
		case d.Approver.Person() && !d.FourEyes:
			if len(byLevel[k.Level]) == 0 {
				levels = append(levels, k.Level)
			}
			byLevel[k.Level] = append(byLevel[k.Level], k.Name)
		}
	}
	if len(selfService) > 0 || c.SelfService > 0 {
		text := fmt.Sprintf("%s: %s so far approved by Gantry alone", SelfService, applies(c.SelfService))
		setting := "this environment's requires_approval"
		if len(selfService) > 0 {
			text = fmt.Sprintf("%s: %s %s approved by Gantry alone, without a person's decision; %s so far", SelfService, strings.Join(selfService, ", "),
				map[bool]string{true: "is", false: "are"}[len(selfService) == 1], applies(c.SelfService))
			setting += " (on: a person decides risk 1), or the risk class of rule " + strings.Join(selfServiceRules, ", ") + " in the approval matrix"
		}
		out = append(out, Finding{Gate: "approval", Text: text, Count: c.SelfService, Runs: c.SelfServiceRuns,
			Setting: Setting{Name: setting, Place: PlaceEnvironment}})
	}
	for _, l := range levels {
		out = append(out, Finding{Gate: "approval", Text: fmt.Sprintf("self-approval possible: four eyes is off for risk %s (%s): the requester may approve her own run",
			l, strings.Join(byLevel[l], ", ")), Setting: Setting{Name: fmt.Sprintf("four eyes on risk %s in the approval matrix", l), Place: PlaceMatrix}})
	}
	if c.SelfApproved > 0 {
		setting := "four eyes in the approval matrix (on for every risk decided here now: these applies were approved before)"
		if len(levels) > 0 {
			setting = "four eyes in the approval matrix (off here for risk " + joinLevels(levels) + ")"
		}
		out = append(out, Finding{Gate: "approval", Count: c.SelfApproved, Runs: c.SelfApprovedRuns,
			Text:    fmt.Sprintf("%s: %s approved by their own requester", SelfApproved, applies(c.SelfApproved)),
			Setting: Setting{Name: setting, Place: PlaceMatrix}})
	}
	return out
}

func joinLevels(ls []risk.Level) string {
	parts := make([]string, len(ls))
	for i, l := range ls {
		parts[i] = string(l)
	}
	return strings.Join(parts, ", ")
}

// applies says "1 apply" or "n applies".
func applies(n int) string { return words.Count(n, "apply", "applies") }

// planGate is the plan under the environment's executor: isolated, simulated, or not.
func planGate(ex Executor) Gate {
	g := Gate{ID: "plan", Name: "Plan", Checks: "OpenTofu plans on the environment's executor; the plan file's sha256 is the evidence the decision and the apply bind to"}
	switch {
	case !ex.Offered:
		g.Status, g.EnforcedBy = UnenforcedUnknown, fmt.Sprintf("executor %q is not one this portal runs: its runs cannot plan", ex.Name)
	case ex.Simulated:
		g.Status, g.EnforcedBy = Simulated, "executor "+ex.Name+" simulates every phase (it says so of itself): nothing real is planned or applied"
	case ex.Isolated:
		g.Status, g.EnforcedBy = Enforced, "executor "+ex.Name+" runs each phase isolated, in a container or a Kubernetes Job of its own (it says so of itself)"
	default:
		g.Status, g.EnforcedBy = Flagged, "executor "+ex.Name+" runs OpenTofu as a plain process of the portal's host, sharing its user and network: not isolated (it says so of itself)"
	}
	return g
}

// policyGate is the policy gate under an environment's modes: blocking when any rule
// is hard- or soft-mandatory there, annotating when all are advisory.
func policyGate(b *policies.Bundle, modes map[string]policies.Enforcement) Gate {
	g := Gate{ID: "policy", Name: "Policy", Checks: fmt.Sprintf("%d rules (bundle %s) over the plan, at plan time and again before the apply", len(b.Rules()), short(b.Digest()))}
	var blocking, advisory []string
	for _, r := range b.Rules() {
		mode := r.Enforcement
		if m, ok := modes[r.ID]; ok {
			mode = m
		}
		if mode == policies.HardMandatory || mode == policies.SoftMandatory {
			blocking = append(blocking, r.ID+" ("+string(mode)+")")
		} else {
			advisory = append(advisory, r.ID)
		}
	}
	switch {
	case len(b.Rules()) == 0:
		g.Status, g.EnforcedBy = UnenforcedUnknown, "no policy rule is loaded"
	case len(blocking) == 0:
		g.Status, g.EnforcedBy = Annotating, "every rule is advisory in this environment: a failure is noted, nothing is blocked"
	default:
		g.Status, g.EnforcedBy = Enforced, "blocking: "+strings.Join(blocking, ", ")
		if len(advisory) > 0 {
			g.EnforcedBy += "; advisory: " + strings.Join(advisory, ", ")
		}
	}
	return g
}

// applyBindingGate is the apply's binding to the approval: from the state table, and
// checked against every apply in the chain.
func (s Service) applyBindingGate(c audit.ApplyCount) Gate {
	g := Gate{ID: "apply-binding", Name: "Apply binding", Checks: "an apply starts only from an approval, and runs only the approved plan digest against the state it was planned on"}
	switch {
	case !s.Rules.AppliesOnlyApproved():
		g.Status, g.EnforcedBy = UnenforcedUnknown, "the state table lets a run start applying without an approval"
	case c.Unevidenced > 0:
		g.Status, g.EnforcedBy = Flagged, fmt.Sprintf("the state table starts an apply only from an approval, yet the audit chain holds %s without a matching approval record (below)", applies(c.Unevidenced))
	default:
		g.Status, g.EnforcedBy = Enforced, fmt.Sprintf("the state table starts an apply only from an approval, and the apply re-checks the approved digest and the predecessor state; checked in the audit chain: %s, each after an approval of the same plan digest", applies(c.Applied))
	}
	return g
}

// verificationGate is the verification after the apply: from the state table, with
// what the chain records of it.
func (s Service) verificationGate(c audit.ApplyCount) Gate {
	g := Gate{ID: "verification", Name: "Verification", Checks: "a refresh-only plan after the apply must show no changes before the run succeeds"}
	if !s.Rules.VerifiesBeforeSuccess() {
		g.Status, g.EnforcedBy = UnenforcedUnknown, "the state table lets a run succeed without its verification"
		return g
	}
	g.Status, g.EnforcedBy = Enforced, fmt.Sprintf("the state table lets a run succeed only through its verification; in the audit chain: %s verified, %d failed their verification",
		words.Count(c.Verified, "run", "runs"), c.VerificationFailed)
	return g
}

// entitlementsGate is who may request and decide here: roles, the grant a restricted
// environment asks, and cloud.live where the executor acts on a live cloud.
func entitlementsGate(env environment.Environment, ex Executor) Gate {
	g := Gate{ID: "entitlements", Name: "Entitlements", Status: Enforced,
		Checks: "who may request and decide (operators, admins and owners), a grant where the environment is restricted, the live-cloud entitlement where the executor is live"}
	parts := []string{"roles: operators, admins and owners request and decide; viewers and auditors only read"}
	if env.Restricted {
		parts = append(parts, "restricted: members below admin see and use it only with a grant")
	} else {
		parts = append(parts, "not restricted: every member sees it")
	}
	switch {
	case !ex.Offered:
		parts = append(parts, "executor "+ex.Name+" is not one this portal runs: nothing can be requested here")
	case ex.Simulated:
		parts = append(parts, "the live-cloud entitlement is not asked: the executor changes nothing real")
	default:
		parts = append(parts, "live executor "+ex.Name+": requesting, planning again and approving need the live-cloud entitlement")
	}
	g.EnforcedBy = strings.Join(parts, "; ")
	return g
}

// GateCredentials is the id of the gate saying what the jobs authenticate to the cloud
// with: it does not hold while an environment holds standing static credentials.
const GateCredentials = "credentials"

// credentialsGate is what the jobs authenticate to the cloud with.
func credentialsGate(identity string, standing Finding) Gate {
	g := Gate{ID: GateCredentials, Name: "Cloud credentials", Checks: "what each phase's job authenticates to the cloud with", Status: Enforced, EnforcedBy: identity}
	if standing.Text != "" {
		g.Status = Flagged
	}
	return g
}

// driftGate is whether a change made by hand outside a break-glass window is looked for.
func driftGate(env environment.Environment) Gate {
	g := Gate{ID: "drift", Name: "Manual changes", Checks: "a change made by hand outside a break-glass window is found: a drift check flags it as unowned drift"}
	if env.DriftIntervalMinutes > 0 {
		g.Status, g.EnforcedBy = Enforced, fmt.Sprintf("a drift check of each workspace every %d minutes (a refresh-only plan, run once across replicas)", env.DriftIntervalMinutes)
		return g
	}
	g.Status, g.EnforcedBy = UnenforcedUnknown, "no scheduled drift check: a change made by hand outside a window goes unnoticed until the workspace's next run"
	return g
}

// gateFinding is the finding of a gate that does not hold, false for the gates whose
// findings are written with their counts (the approvals, the apply binding's
// unevidenced applies).
func gateFinding(g Gate, credentials Finding) (Finding, bool) {
	switch {
	case strings.HasPrefix(g.ID, "approval-"), g.ID == "apply-binding" && g.Status == Flagged:
		return Finding{}, false
	case g.ID == GateCredentials:
		return credentials, true
	case g.ID == "plan":
		return Finding{Gate: g.ID, Text: "plan: " + g.EnforcedBy, Setting: Setting{Name: "this environment's executor (an isolated one: runc containers or Kubernetes Jobs)", Place: PlaceEnvironment}}, true
	case g.ID == "policy" && g.Status == Annotating:
		return Finding{Gate: g.ID, Text: "policy annotates only: " + g.EnforcedBy, Setting: Setting{Name: "this environment's policy modes (hard or soft mandatory)", Place: PlacePolicyModes}}, true
	case g.ID == "policy":
		return Finding{Gate: g.ID, Text: "policy: " + g.EnforcedBy, Setting: Setting{Name: "the organization's policies (the built-in rules, or an uploaded bundle)", Place: PlacePolicies}}, true
	case g.ID == "drift":
		return Finding{Gate: g.ID, Text: "manual changes: " + g.EnforcedBy, Setting: Setting{Name: "this environment's drift check interval", Place: PlaceEnvironment}}, true
	}
	return Finding{Gate: g.ID, Text: strings.ToLower(g.Name) + ": " + g.EnforcedBy, Setting: Setting{Name: "none: the run lifecycle itself (models/run/state.go)"}}, true
}

// applyIdentity says what an environment's jobs authenticate to the cloud with, per
// phase (the rule of runner.jobCredentials.cloudToken: applies get the static write
// credential, plans and verifications the static read credential, never the write one;
// a workload identity token otherwise), and the standing-credential finding when it
// holds a static credential: one finding naming each key and since when.
func (s Service) applyIdentity(st environment.Standing) (identity string, finding Finding) {
	workload := "workload identity (a short-lived token per run phase from " + s.IssuerURL + ", scoped to the organization, environment, workspace, run and phase)"
	if !st.Any() {
		return "workload identity: a short-lived token per run phase from " + s.IssuerURL + ", scoped to the organization, environment, workspace, run and phase", Finding{}
	}
	applies, reads := workload, "read-scoped "+workload
	var held []string
	if st.WriteSetAt != nil {
		applies = "a static write credential (standing access), set " + st.WriteSetAt.UTC().Format("2006-01-02")
		held = append(held, "a static write credential (used by applies) has been set on this environment since "+st.WriteSetAt.UTC().Format(time.RFC3339))
	}
	if st.ReadSetAt != nil {
		reads = "a static read credential (standing access), set " + st.ReadSetAt.UTC().Format("2006-01-02")
		held = append(held, "a static read credential (used by plans and verifications) has been set on this environment since "+st.ReadSetAt.UTC().Format(time.RFC3339))
	}
	identity = "applies: " + applies + "; plans and verifications: " + reads + " (never the write credential)"
	return identity, Finding{Gate: "credentials", Text: "standing credential: " + strings.Join(held, "; ") + "; workload identity should replace " + map[bool]string{true: "them", false: "it"}[len(held) > 1],
		Setting: Setting{Name: "this environment's static credentials (clear them)", Place: PlaceCredentials}}
}
