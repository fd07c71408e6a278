package run

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"gantry/models/authz"
	"gantry/models/classify"
	"gantry/models/errs"
	"gantry/models/review"
	"gantry/models/risk"
	"gantry/models/workspace"
)

// What a request form shows before it is submitted: who must decide, as far as that
// is known before any plan (the floor: the environment's gate, the kind of run, the
// organization's matrix raised to Floors; a plan can only raise it), and the monthly
// cost of what the inputs describe, from the template's price table and a simulated
// plan of the generated configuration against the workspace's current state. Nothing
// is written: no workspace, run, artifact or audit event.

// Simulator plans a configuration in memory, without credentials or a cloud (the
// MockTofuRunner), for the preview's cost: kind is a Kind, priorState nil for none,
// variables the values of the configuration's sensitive root variables (Variables).
type Simulator interface {
	SimulatePlan(ctx context.Context, config, priorState []byte, kind string, variables map[string]string) (planJSON []byte, err error)
}

// Previewer answers the request form's preview.
type Previewer struct {
	requests *Requests
	sim      Simulator
}

// NewPreviewer returns the request preview over the request rules and their stores.
func NewPreviewer(requests *Requests, sim Simulator) *Previewer {
	return &Previewer{requests: requests, sim: sim}
}

// Preview is what is known of a request before it is planned. Floor is nil when the
// environment or the kind is not chosen yet; Cost nil while the inputs are incomplete
// or wrong (CostMissing says which); Impact nil while the plan cannot be simulated
// (Unknown says why: the plan will tell).
type Preview struct {
	Floor *risk.Assessment
	// Impact is what a simulated plan of the inputs predicts: what it replaces, the
	// risk and decision the plan gates give it, the policy rules it fails.
	Impact *Impact
	// Unknown says why there is no prediction ("" when there is one).
	Unknown string
	// DryRun: a dry run is never gated, whatever its plan holds.
	DryRun bool
	Cost   *review.Cost
	// CostMissing says why there is no cost yet: "" when there is one.
	CostMissing string
	// Existing: the workspace exists, so the cost is the change from its current state.
	Existing bool
}

// Preview previews req for the subject (who may request runs).
func (p *Previewer) Preview(ctx context.Context, req Request) (Preview, error) {
	subject, err := authz.Require(ctx, authz.PermProvisioningPlan)
	if err != nil {
		return Preview{}, err
	}
	s := p.requests
	validated, ws, err := s.Validate(ctx, req)
	var fields *errs.Validation
	if err != nil && !errors.As(err, &fields) {
		return Preview{}, err
	}
	bad := func(prefix string) bool {
		if fields == nil {
			return false
		}
		for f := range fields.Fields {
			if strings.HasPrefix(f, prefix) {
				return true
			}
		}
		return false
	}
	var out Preview
	if !bad("environment") && !bad("kind") {
		env, err := s.k.environments.Lookup(ctx, subject.OrganizationID, req.EnvironmentID)
		if err != nil {
			return Preview{}, err
		}
		if req.Kind == KindPlanOnly {
			out.DryRun = true
		} else {
			m, err := s.k.matrix.Current(ctx, subject.OrganizationID)
			if err != nil {
				return Preview{}, err
			}
			// The least a plan can be: it changes something (a destroy destroys), and
			// nothing it touches is replaced, irreversible or org-scoped.
			f := risk.Facts{Kind: string(req.Kind), HasChanges: true, Create: 1, Tier: string(env.Tier), RequiresApproval: env.RequiresApproval}
			if req.Kind == KindDestroy {
				f.Create, f.Destroy = 0, 1
			}
			a := assessRisk(m.Matrix, f)
			out.Floor = &a
		}
	}
	switch {
	case bad("template"):
		// No template, or one that cannot be used now (a module it calls refused): the
		// template field says why; asking for inputs would send the person the wrong way.
		out.CostMissing = "Choose a template that can be used (the template field says why not) to see what it costs."
		out.Unknown = "Until the template can be used, the plan will tell whether anything is replaced."
	case bad("inputs."):
		out.CostMissing = "Fill in the template's inputs to see what it costs."
		out.Unknown = "Until the inputs are complete and valid, the plan will tell whether anything is replaced."
	case bad("environment"):
		out.CostMissing = "Choose an environment to see what it costs."
		out.Unknown = "Until an environment is chosen, the plan will tell whether anything is replaced."
	default:
		// Without a usable workspace (no name yet, or one holding another template: the
		// request itself is refused, and its field says why) the cost is a new one's.
		if ws != nil && ws.TemplateName != validated.Template {
			ws = nil
		}
		out.Existing = ws != nil
		a, ok, err := p.simulate(ctx, subject, req, validated, ws)
		if err != nil {
			return Preview{}, err
		}
		if !ok {
			out.CostMissing = "The plan could not be simulated: the run's plan gives the estimate."
			out.Unknown = "The plan could not be simulated from these inputs: the plan will tell whether anything is replaced."
			break
		}
		cost, impact := a.Cost, impactOf(a)
		out.Cost, out.Impact = &cost, &impact
	}
	return out, nil
}

// simulate runs the plan gates on a simulated plan of the configuration req would
// generate, against the workspace's current state: a run of req's kind (a dry run's as
// if it were applied, to say what the same change would carry), not stored. ok is false
// when the plan could not be simulated or read (the plan will tell).
func (p *Previewer) simulate(ctx context.Context, subject authz.Subject, req Request, v Validated, ws *workspace.Workspace) (Assessment, bool, error) {
	s := p.requests
	workspaceID := "ws-preview"
	var prior []byte
	if ws != nil {
		workspaceID = ws.ID
		pred, err := s.k.states.Predecessor(ctx, ws.OrganizationID, ws.ID)
		if err != nil {
			return Assessment{}, false, err
		}
		if !pred.None() {
			if prior, err = s.k.states.Content(ctx, ws.OrganizationID, pred.VersionID); err != nil {
				return Assessment{}, false, err
			}
		}
	}
	cfg, err := s.k.catalog.Generate(v, workspaceID, s.k.stateAddress(v.Runner.Name, workspaceID))
	if err != nil {
		return Assessment{}, false, fmt.Errorf("generating configuration: %w", err)
	}
	tarball, _, err := cfg.Tar()
	if err != nil {
		return Assessment{}, false, err
	}
	vars, err := variablesOf(v.Sensitive)
	if err != nil {
		return Assessment{}, false, err
	}
	kind := req.Kind
	if kind != KindDestroy {
		kind = KindApply
	}
	planJSON, err := p.sim.SimulatePlan(ctx, tarball, prior, string(kind), vars)
	if err != nil {
		if ctx.Err() != nil {
			return Assessment{}, false, ctx.Err()
		}
		return Assessment{}, false, nil
	}
	if _, err := classify.Classify(planJSON, classify.Options{}); err != nil {
		return Assessment{}, false, nil
	}
	r := Run{ID: "run-preview", Kind: kind, OrganizationID: subject.OrganizationID, EnvironmentID: req.EnvironmentID,
		TemplateName: v.Template, TemplateVersion: v.Version, ModuleDigest: v.ModuleDigest,
		RequestedBy: subject.UserID, RequestedByName: subject.Name}
	a, err := s.k.gates(ctx, r, planJSON, nil)
	if err != nil {
		return Assessment{}, false, err
	}
	return a, true, nil
}
