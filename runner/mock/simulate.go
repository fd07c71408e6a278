package mock

import (
	"context"

	"gantry/runner"
)

// SimulatePlan plans config against priorState (nil: none) for a run of kind, with the
// values of its sensitive root variables, and returns the plan JSON only: the request
// form's cost preview (run.Simulator), which stores nothing and needs no credentials.
func (r *Runner) SimulatePlan(ctx context.Context, config, priorState []byte, kind string, variables map[string]string) ([]byte, error) {
	res, err := r.Plan(ctx, runner.PlanRequest{RunID: "preview", WorkspaceID: "preview", Kind: runner.Kind(kind), Config: config, PriorState: priorState,
		Variables: variables})
	if err != nil {
		return nil, err
	}
	return res.PlanJSON, nil
}
