// Package mock is the MockTofuRunner: a runner.Runner that plans and applies a
// config bundle without a tofu binary, a provider or credentials. It parses the
// bundle's HCL itself, evaluates the template modules against a copy of the
// sandbox provider's schema (schema.go), and writes tofu's own formats: the
// `tofu show -json` plan, state version 4 and `tofu output -json`. Everything is
// deterministic (no clock, no randomness): the same request always gives the
// same bytes. Everything it produces is SIMULATED and says so: the first line of
// every log, "gantry_simulated" in the plan JSON, "simulated" in the plan file.
package mock

import (
	"bytes"
	"context"
	"io"

	"gantry/runner"
)

// Runner is the MockTofuRunner.
type Runner struct {
	ledger *Ledger // nil: applies are not recorded
}

var _ runner.Runner = (*Runner)(nil)

// New returns a MockTofuRunner.
func New() *Runner { return &Runner{} }

// Name is "mock".
func (*Runner) Name() string { return "mock" }

// Simulated is true: nothing real is planned or applied.
func (*Runner) Simulated() bool { return true }

// Plan compares the bundle's configuration with the prior state, as `tofu plan`
// followed by `tofu show -json` would. Kind destroy plans the deletion of every
// prior resource; plan_only plans as apply does.
func (*Runner) Plan(ctx context.Context, req runner.PlanRequest) (runner.PlanResult, error) {
	if err := ctx.Err(); err != nil {
		return runner.PlanResult{}, err
	}
	cfg, err := loadConfig(req.Config, req.Variables)
	if err != nil {
		return runner.PlanResult{}, err
	}
	prior, err := parseState(req.PriorState)
	if err != nil {
		return runner.PlanResult{}, err
	}
	p, err := makePlan(cfg, prior, req.Kind)
	if err != nil {
		return runner.PlanResult{}, err
	}
	planJSON, err := p.planJSON()
	if err != nil {
		return runner.PlanResult{}, err
	}
	planFile, err := p.planFile(req.WorkspaceID, req.Config)
	if err != nil {
		return runner.PlanResult{}, err
	}
	return runner.PlanResult{PlanFile: planFile, PlanJSON: planJSON, Log: writeLines(req.Log, p.planLog()), HasChanges: p.hasChanges()}, nil
}

// Apply applies exactly the plan file: it refuses a plan made for another
// workspace or bundle, or against a state that has moved on ("saved plan is
// stale"), and plans again to check the changes are the ones planned. The new
// state's serial is the prior's plus one; its lineage is the prior's, or for a
// first state one derived from the workspace id.
func (r *Runner) Apply(ctx context.Context, req runner.ApplyRequest) (runner.ApplyResult, error) {
	if err := ctx.Err(); err != nil {
		return runner.ApplyResult{}, err
	}
	pf, err := readPlanFile(req.PlanFile)
	if err != nil {
		return runner.ApplyResult{}, err
	}
	prior, err := parseState(req.PriorState)
	if err != nil {
		return runner.ApplyResult{}, err
	}
	if err := pf.checkApplicable(req, prior); err != nil {
		return runner.ApplyResult{}, err
	}
	// The root variables' values come from the plan file, as tofu's come from the
	// saved plan: an apply is given none.
	cfg, err := loadConfig(req.Config, pf.Variables)
	if err != nil {
		return runner.ApplyResult{}, err
	}
	p, err := makePlan(cfg, prior, pf.Kind)
	if err != nil {
		return runner.ApplyResult{}, err
	}
	if err := pf.checkSameChanges(p); err != nil {
		return runner.ApplyResult{}, err
	}
	a, err := applyPlan(p, req.WorkspaceID)
	if err != nil {
		return runner.ApplyResult{}, err
	}
	state, err := encodeState(a.serial, a.lineage, a.instances, a.outputs)
	if err != nil {
		return runner.ApplyResult{}, err
	}
	outputs, err := outputsJSON(a.outputs)
	if err != nil {
		return runner.ApplyResult{}, err
	}
	// The simulated side effect happens here: on record before anything returns.
	if err := r.ledger.record(req.PlanFile, req.RunID); err != nil {
		return runner.ApplyResult{}, err
	}
	return runner.ApplyResult{State: state, Outputs: outputs, Log: writeLines(req.Log, p.applyLog(a))}, nil
}

// Verify cannot compare anything: the mock has no live cloud, so what it applied
// is by definition what exists. It reports Converged unless the state does not
// parse, and never any drift (DriftJSON is empty).
func (*Runner) Verify(ctx context.Context, req runner.VerifyRequest) (runner.VerifyResult, error) {
	if err := ctx.Err(); err != nil {
		return runner.VerifyResult{}, err
	}
	if _, err := parseState(req.State); err != nil {
		return runner.VerifyResult{Converged: false, Log: writeLines(req.Log, []byte(simulatedCheckLine+"\n\n"+err.Error()+"\n"))}, err
	}
	log := simulatedCheckLine + "\n\nNo changes. Your infrastructure still matches the configuration.\n"
	return runner.VerifyResult{Converged: true, Log: writeLines(req.Log, []byte(log))}, nil
}

// writeLines writes log to w one line at a time, as tofu's output arrives, so the live
// view of a simulated run is fed the way a real one is; it returns log.
func writeLines(w io.Writer, log []byte) []byte {
	w = runner.LogTo(w)
	for rest := log; len(rest) > 0; {
		line := rest
		if i := bytes.IndexByte(rest, '\n'); i >= 0 {
			line = rest[:i+1]
		}
		_, _ = w.Write(line) // the live view never fails the phase
		rest = rest[len(line):]
	}
	return log
}
