package runner_test

import (
	"context"
	"errors"
	"testing"

	"github.com/stretchr/testify/require"

	"gantry/models/attest"
	"gantry/models/audit/exportfile"
	"gantry/models/run"
	"gantry/runner"
	"gantry/runner/mock"
)

// writesThenFails applies with the mock, writes the state it produced through the
// state store (as tofu writes through the backend mid-apply), and then fails: an
// apply that changed the world and still ended FAILED.
type writesThenFails struct {
	runner.Runner
	h *harness
}

func (w *writesThenFails) Apply(ctx context.Context, req runner.ApplyRequest) (runner.ApplyResult, error) {
	res, err := w.Runner.Apply(ctx, req)
	if err != nil {
		return res, err
	}
	if _, err := w.h.sys.StateStore.RecordApplied(ctx, w.h.orgID, req.WorkspaceID, req.RunID, res.State, w.h.sys.Runs.Staleness); err != nil {
		return res, err
	}
	return runner.ApplyResult{Log: []byte("the cloud answered 500 after the first resource")}, errors.New("apply failed after writing state")
}

// TestAFailedApplyThatWroteStateIsAttested: the apply fails, the run ends FAILED, and
// the state version it wrote is attested all the same, with the failure as outcome.
func TestAFailedApplyThatWroteStateIsAttested(t *testing.T) {
	t.Parallel()
	failing := &writesThenFails{Runner: mock.New()}
	h := newHarness(t, harnessOpts{runner: failing})
	failing.h = h
	h.start()
	r := h.requestBucket("development", "half-applied", "half-applied", run.KindApply)
	r = h.waitFor(r.ID, run.Failed)
	require.Contains(t, r.StateReason, "apply failed after writing state")

	bundles, err := h.sys.Attestations.OfRun(context.Background(), h.orgID, r.ID)
	require.NoError(t, err)
	require.Len(t, bundles, 1)
	set, err := h.sys.AuditKeys.Published(h.as("auditor"))
	require.NoError(t, err)
	checked := attest.Verify(bundles[0], exportfile.Trust{Keys: &set})
	require.True(t, checked.OK, checked.Verdict)
	var sv struct{ ID, SHA256 string }
	require.NoError(t, h.db.Raw("SELECT id, sha256 FROM state_versions WHERE run_id = ?", r.ID).Scan(&sv).Error)
	require.Equal(t, "state-version/"+sv.ID, checked.Statement.GetSubject()[0].GetName())
	outcome := checked.Statement.GetPredicate().GetFields()["outcome"].GetStringValue()
	require.Contains(t, outcome, "failed: apply failed after writing state")
}
