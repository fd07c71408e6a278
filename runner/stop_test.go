package runner_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"gantry/bench"
	"gantry/models/errs"
	"gantry/models/run"
	"gantry/runner"
	"gantry/runner/mock"
)

// stoppableApply is the mock runner with an apply that writes part of its resources,
// then runs until it is interrupted (its context ends), as tofu does at SIGINT: it
// returns the state it wrote so far and its log.
type stoppableApply struct {
	runner.Runner
	started chan string
}

func (s stoppableApply) Apply(ctx context.Context, req runner.ApplyRequest) (runner.ApplyResult, error) {
	res, err := s.Runner.Apply(ctx, req) // the first resources: the state they make
	if err != nil {
		return res, err
	}
	s.started <- req.RunID
	<-ctx.Done()
	res.Log = append(res.Log, "\nInterrupt received.\nStopping operation...\n"...)
	res.Outputs = nil
	return res, errors.New("the apply was interrupted")
}

// TestCancelStopsTheApply: a run cancelled while it applies ends APPLY_INTERRUPTED at
// once (code APPLY_CANCELLED, who and why); its worker hears it at the next heartbeat,
// interrupts the apply and records the state and log it wrote; the lease ends, and the
// workspace's apply slot stays the run's until an admin recovers it. A cancel without
// its confirmation, or with too short a reason, is refused at its field and changes
// nothing; a viewer's is forbidden.
func TestCancelStopsTheApply(t *testing.T) {
	t.Parallel()
	slow := stoppableApply{Runner: mock.New(), started: make(chan string, 1)}
	h := newHarness(t, harnessOpts{runner: slow, leases: runner.LeaseConfig{Heartbeat: 100 * time.Millisecond, TTL: time.Minute}})
	h.start()
	r := h.requestBucket("development", "stopped", "stopped", run.KindApply)
	bench.Receive(t, "the apply to begin", 20*time.Second, slow.started)

	_, err := h.sys.Runs.Decisions.Cancel(h.as("viewer"), r.ID, run.Cancellation{Reason: "the wrong bucket is being made", Confirmed: true})
	require.ErrorIs(t, err, errs.ErrForbidden)
	for _, c := range []run.Cancellation{{Reason: "the wrong bucket is being made"}, {Reason: "oops", Confirmed: true}} {
		_, err := h.sys.Runs.Decisions.Cancel(h.as("operator"), r.ID, c)
		v, ok := errs.AsValidation(err)
		require.True(t, ok, "%v", err)
		require.Len(t, v.Fields, 1, v.Fields)
	}
	require.Equal(t, run.Running, h.waitFor(r.ID, run.Running).State, "a refused cancel changes nothing")

	stopped, err := h.sys.Runs.Decisions.Cancel(h.as("operator"), r.ID, run.Cancellation{Reason: "the wrong bucket is being made", Confirmed: true})
	require.NoError(t, err)
	require.Equal(t, run.ApplyInterrupted, stopped.State)
	require.Equal(t, run.EndApplyCancelled, stopped.Ending)
	require.Contains(t, stopped.StateReason, "the wrong bucket is being made")
	require.Equal(t, h.users["operator"].UserID, *stopped.CancelledBy)

	// The worker stops the apply and records what it wrote.
	h.waitStopped(r.ID)
	final := h.waitFor(r.ID, run.ApplyInterrupted)
	require.NotNil(t, final.NewStateVersionID, "the state the apply wrote is the workspace's")
	require.EqualValues(t, 1, h.stateVersions(r.WorkspaceID))
	require.NotNil(t, final.ApplyLogArtifactID, "the apply's log is kept")
	log, err := h.sys.Runs.Reads.Artifact(h.as("viewer"), final, final.ApplyLogArtifactID)
	require.NoError(t, err)
	require.Contains(t, string(log), "Interrupt received.")
	var leases int64
	require.NoError(t, h.db.Raw("SELECT count(*) FROM run_leases WHERE run_id = ?", r.ID).Scan(&leases).Error)
	require.Zero(t, leases, "the lease ended with the record")
	var slot string
	require.NoError(t, h.db.Raw("SELECT coalesce(active_run_id, '') FROM workspaces WHERE id = ?", r.WorkspaceID).Scan(&slot).Error)
	require.Equal(t, r.ID, slot, "no later run applies until an admin recovers this one")
	var transitions []string
	require.NoError(t, h.db.Raw("SELECT action FROM audit_events WHERE target_id = ? AND action LIKE 'run.%' ORDER BY id", r.ID).Scan(&transitions).Error)
	require.NotContains(t, transitions, "run.verifying", "a stopped apply is never verified")

	recovered, err := h.sys.Runs.Decisions.Recover(h.as("admin"), r.ID, "checked the bucket by hand")
	require.NoError(t, err)
	require.Equal(t, run.Failed, recovered.State)
	require.Equal(t, run.EndRecovered, recovered.Ending)
}

// TestCancelRacesTheApplysFinish: a cancel and the apply's own finish race under the run
// lock, and the first to commit wins, never both. The hook holds the worker just
// before it records a finished apply: a cancel made meanwhile commits first, and the run
// ends APPLY_INTERRUPTED with the state the apply wrote recorded as the stopped apply's
// (never VERIFYING). Without the hold the finish commits first, and a cancel after it is
// a 409 conflict: the run goes on to SUCCEEDED.
func TestCancelRacesTheApplysFinish(t *testing.T) {
	t.Parallel()
	for _, cancelFirst := range []bool{true, false} {
		name := map[bool]string{true: "cancel first", false: "finish first"}[cancelFirst]
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			reached, release := make(chan string, 1), make(chan struct{})
			hooks := runner.ApplyHooks{Finish: func(ctx context.Context, runID string) {
				if !cancelFirst {
					return
				}
				select {
				case reached <- runID:
				default: // a retry of the record: already held once
				}
				<-release
			}}
			h := newHarness(t, harnessOpts{applyHooks: hooks, leases: runner.LeaseConfig{Heartbeat: 100 * time.Millisecond, TTL: time.Minute}})
			h.start()
			r := h.requestBucket("development", "race-"+map[bool]string{true: "a", false: "b"}[cancelFirst], "race", run.KindApply)
			stop := run.Cancellation{Reason: "stop it before it finishes", Confirmed: true}
			if !cancelFirst {
				h.waitFor(r.ID, run.Verifying, run.Succeeded)
				_, err := h.sys.Runs.Decisions.Cancel(h.as("operator"), r.ID, stop)
				require.ErrorIs(t, err, errs.ErrConflict, "the finish won: the cancel is refused")
				done := h.waitFor(r.ID, run.Succeeded)
				require.Equal(t, run.EndVerified, done.Ending)
				require.Nil(t, done.CancelledBy)
				return
			}
			bench.Receive(t, "the worker to hold before recording the finish", 20*time.Second, reached)
			stopped, err := h.sys.Runs.Decisions.Cancel(h.as("operator"), r.ID, stop)
			require.NoError(t, err)
			require.Equal(t, run.ApplyInterrupted, stopped.State)
			close(release)
			h.waitStopped(r.ID)
			final := h.waitFor(r.ID, run.ApplyInterrupted)
			require.Equal(t, run.EndApplyCancelled, final.Ending)
			require.NotNil(t, final.NewStateVersionID, "what the apply wrote is recorded")
			require.EqualValues(t, 1, h.stateVersions(r.WorkspaceID))
			var verifying int64
			require.NoError(t, h.db.Raw("SELECT count(*) FROM audit_events WHERE target_id = ? AND action IN ('run.verifying', 'run.succeeded')", r.ID).Scan(&verifying).Error)
			require.Zero(t, verifying, "never both: the cancelled run was not verified")
		})
	}
}

// waitStopped waits until the worker of cancelled run id recorded what its apply wrote
// (the run.apply_stopped audit event).
func (h *harness) waitStopped(id string) {
	h.t.Helper()
	bench.Eventually(h.t, "the stopped apply of run "+id+" to be recorded", 20*time.Second, func() (bool, any) {
		var n int64
		require.NoError(h.t, h.db.Raw("SELECT count(*) FROM audit_events WHERE target_id = ? AND action = 'run.apply_stopped'", id).Scan(&n).Error)
		return n == 1, n
	}, bench.Wake(h.changes))
}
