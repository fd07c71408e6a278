package pages

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"gantry/models/errs"
	"gantry/models/run"
	"gantry/models/workspace"
)

// originRuns are the runs the reader may see, by id (the others are not found).
type originRuns struct {
	RunReads
	runs map[string]run.Run
}

func (f originRuns) Get(_ context.Context, id string) (run.Run, error) {
	if r, ok := f.runs[id]; ok {
		return r, nil
	}
	return run.Run{}, fmt.Errorf("run %s: %w", id, errs.ErrNotFound)
}

type originWorkspaces map[string]workspace.View

func (f originWorkspaces) Get(_ context.Context, id string) (workspace.View, error) {
	if w, ok := f[id]; ok {
		return w, nil
	}
	return workspace.View{}, fmt.Errorf("workspace %s: %w", id, errs.ErrNotFound)
}

// TestRunOrigin: a rollback names the run that wrote the state version it goes back to,
// a promotion the applied run of the other environment; a run of its own has no origin;
// a source the reader may not see is kept unnamed, not an error.
func TestRunOrigin(t *testing.T) {
	t.Parallel()
	applied := time.Date(2026, 12, 5, 9, 0, 0, 0, time.UTC)
	ptr := func(s string) *string { return &s }
	s := Runs{
		Runs: originRuns{runs: map[string]run.Run{
			"run-src":     {ID: "run-src", Number: 1, WorkspaceID: "ws-db", FinishedAt: &applied},
			"run-staging": {ID: "run-staging", Number: 3, WorkspaceID: "ws-staging", FinishedAt: &applied},
		}},
		Workspaces: originWorkspaces{
			"ws-db":      {Workspace: workspace.Workspace{ID: "ws-db", Name: "orders-db"}, EnvironmentName: "development"},
			"ws-staging": {Workspace: workspace.Workspace{ID: "ws-staging", Name: "orders-db"}, EnvironmentName: "staging"},
		},
	}
	for _, c := range []struct {
		name string
		r    run.Run
		want *RunOrigin
	}{
		{"a request of its own", run.Run{ID: "run-x"}, nil},
		{"a correction planned again from a run is no rollback", run.Run{ID: "run-x", SourceRunID: ptr("run-src")}, nil},
		{"a rollback", run.Run{ID: "run-x", SourceRunID: ptr("run-src"), RollbackVersionID: ptr("sv-1"), RollbackSerial: 1},
			&RunOrigin{Kind: OriginRollback, RunID: "run-src", Visible: true, Label: "#1", Workspace: "orders-db", Environment: "development",
				AppliedAt: &applied, Serial: 1}},
		{"a promotion", run.Run{ID: "run-x", PromotedFromRunID: ptr("run-staging")},
			&RunOrigin{Kind: OriginPromotion, RunID: "run-staging", Visible: true, Label: "#3", Workspace: "orders-db", Environment: "staging",
				AppliedAt: &applied}},
		{"a promotion from a run hidden from the reader", run.Run{ID: "run-x", PromotedFromRunID: ptr("run-hidden")},
			&RunOrigin{Kind: OriginPromotion, RunID: "run-hidden"}},
	} {
		got, err := s.originOf(t.Context(), c.r)
		require.NoError(t, err, c.name)
		require.Equal(t, c.want, got, c.name)
	}
}
