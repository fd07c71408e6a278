package runner_test

import (
	"context"
	"database/sql"
	"io"
	"log/slog"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"gantry/bench"
	"gantry/models/db/dbtest"
	"gantry/models/run"
	"gantry/runner"
	"gantry/runner/mock"
)

// TestSweepHandsBackJobsADeadPortalNeverBegan: a plan job River marked running for a
// portal that died before the phase took its lease has no lease to expire; the sweep
// hands it back to the queue once it has run longer than a lease, and the run plans.
// A job holding a lease is left alone.
func TestSweepHandsBackJobsADeadPortalNeverBegan(t *testing.T) {
	t.Parallel()
	h := newHarness(t, harnessOpts{})
	r := h.requestBucket("development", "orphan-job", "orphan-job", run.KindPlanOnly)
	// The dead portal: it fetched the job 20 s ago and began nothing.
	require.NoError(t, h.db.Exec("UPDATE river_job SET state = 'running', attempt = 1, attempted_at = now() - interval '20 seconds' WHERE kind = 'run.plan' AND args->>'run_id' = ?", r.ID).Error)
	sqlDB, err := h.db.DB()
	require.NoError(t, err)
	sweep := func() {
		w := &runner.LeaseSweeper{Runs: h.sys.Runs.Jobs, DB: sqlDB, Leases: runner.LeaseConfig{Holder: "test", TTL: 15 * time.Second},
			Logger: slog.New(slog.NewTextHandler(io.Discard, nil))}
		require.NoError(t, w.Pass(context.Background()))
	}
	// A job holding a lease (a live worker) is not handed back.
	var jobID int64
	require.NoError(t, h.db.Raw("SELECT id FROM river_job WHERE kind = 'run.plan' AND args->>'run_id' = ?", r.ID).Scan(&jobID).Error)
	require.NoError(t, h.db.Exec(`INSERT INTO run_leases (run_id, organization_id, phase, token, job_id, holder, expires_at)
		VALUES (?, ?, 'plan', nextval('run_lease_tokens'), ?, 'alive', now() + interval '1 minute')`, r.ID, r.OrganizationID, jobID).Error)
	sweep()
	require.Equal(t, "running", jobState(t, sqlDB, jobID), "a leased job is its worker's")
	require.NoError(t, h.db.Exec("DELETE FROM run_leases WHERE run_id = ?", r.ID).Error)

	sweep()
	require.Equal(t, "available", jobState(t, sqlDB, jobID), "an unleased job older than a lease is handed back")
	h.start()
	h.waitFor(r.ID, run.Planned)
}

// TestCancellingAPlanningRunStopsItsWorker: the cancel ends the plan's lease in its
// transaction; the worker's next heartbeat finds it gone and stops the phase, which
// records nothing.
func TestCancellingAPlanningRunStopsItsWorker(t *testing.T) {
	t.Parallel()
	h := newHarness(t, harnessOpts{runner: runner.Delayed(mock.New(), time.Minute), leases: runner.LeaseConfig{Heartbeat: 100 * time.Millisecond}})
	h.start()
	r := h.requestBucket("development", "cancelled", "cancelled", run.KindPlanOnly)
	// The plan's lease is granted in the transaction that made the run PLANNING.
	h.waitFor(r.ID, run.Planning)
	var leases int64
	require.NoError(t, h.db.Raw("SELECT count(*) FROM run_leases WHERE run_id = ?", r.ID).Scan(&leases).Error)
	require.EqualValues(t, 1, leases)
	_, err := h.sys.Runs.Decisions.Cancel(h.as("operator"), r.ID, run.Cancellation{Reason: "changed my mind"})
	require.NoError(t, err)
	var jobID int64
	require.NoError(t, h.db.Raw("SELECT id FROM river_job WHERE kind = 'run.plan' AND args->>'run_id' = ?", r.ID).Scan(&jobID).Error)
	sqlDB, err := h.db.DB()
	require.NoError(t, err)
	// The worker would sleep a minute; the lost lease stops it at the next heartbeat.
	bench.Eventually(t, "the plan job to complete", 10*time.Second, func() (bool, any) {
		state := jobState(t, sqlDB, jobID)
		return state == "completed", state
	})
	require.Equal(t, run.Cancelled, h.waitFor(r.ID, run.Cancelled).State)
	var artifacts int64
	require.NoError(t, h.db.Raw("SELECT count(*) FROM artifacts WHERE workspace_id = ? AND kind = 'plan_file'", r.WorkspaceID).Scan(&artifacts).Error)
	require.Zero(t, artifacts, "the stopped phase recorded nothing")
}

// TestSweepClosesJobsWhoseRunMovedOn: River records a job's completion after the run
// moved on, and under load that lags; a portal that dies in between leaves the job
// running with nothing to do. A plan job still marked running for a run that is already
// PLANNED finished its phase: the sweep neither hands it back to the queue (it would plan
// again) nor leaves it running for River's rescue window (hours); it closes it as
// completed, once it has run longer than a lease.
func TestSweepClosesJobsWhoseRunMovedOn(t *testing.T) {
	t.Parallel()
	h := newHarness(t, harnessOpts{})
	h.start()
	r := h.requestBucket("development", "moved-on", "moved-on", run.KindPlanOnly)
	h.waitFor(r.ID, run.Planned)
	h.stop()
	var jobID int64
	require.NoError(t, h.db.Raw("SELECT id FROM river_job WHERE kind = 'run.plan' AND args->>'run_id' = ?", r.ID).Scan(&jobID).Error)
	sqlDB, err := h.db.DB()
	require.NoError(t, err)
	w := &runner.LeaseSweeper{Runs: h.sys.Runs.Jobs, DB: sqlDB, Leases: runner.LeaseConfig{Holder: "test", TTL: 15 * time.Second},
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil))}
	// River has not yet recorded the completion: the job still looks running, with no lease.
	require.NoError(t, h.db.Exec("UPDATE river_job SET state = 'running', finalized_at = NULL, attempted_at = now() - interval '10 seconds' WHERE id = ?", jobID).Error)
	require.NoError(t, w.Pass(context.Background()))
	require.Equal(t, "running", jobState(t, sqlDB, jobID), "younger than a lease: its portal may be recording it")
	require.NoError(t, h.db.Exec("UPDATE river_job SET attempted_at = now() - interval '20 seconds' WHERE id = ?", jobID).Error)
	require.NoError(t, w.Pass(context.Background()))
	require.Equal(t, "completed", jobState(t, sqlDB, jobID), "the job of a run past its phase is done, not stuck")
	var revision int
	require.NoError(t, h.db.Raw("SELECT plan_revision FROM runs WHERE id = ?", r.ID).Scan(&revision).Error)
	require.Equal(t, 1, revision, "never planned again")
}

// interruptedApply is the mock runner with an apply that lasts until it is told it
// was interrupted from outside (a pod deleted), counting the applies begun.
type interruptedApply struct {
	runner.Runner
	interrupt chan struct{}
	applies   *atomic.Int32
}

func (s interruptedApply) Apply(ctx context.Context, req runner.ApplyRequest) (runner.ApplyResult, error) {
	s.applies.Add(1)
	select {
	case <-s.interrupt:
		return runner.ApplyResult{}, runner.ErrInterrupted
	case <-ctx.Done():
		return runner.ApplyResult{}, ctx.Err()
	}
}

// attempt is what an apply job's attempt after the first was told by BeginApply.
type attempt struct {
	n     int
	state run.State
	err   error
}

// lateAttempts records (ApplyHooks.Begun) every attempt of an apply job after the first.
func lateAttempts() (runner.ApplyHooks, <-chan attempt) {
	ch := make(chan attempt, 8)
	return runner.ApplyHooks{Begun: func(_ string, n int, state run.State, err error) {
		if n > 1 {
			ch <- attempt{n, state, err}
		}
	}}, ch
}

// waitJobsFinal waits until every apply job of the run is finalized: no attempt of it can
// come any more (River rescues running jobs only), so "never applied again" holds for good,
// not for a window.
func (h *harness) waitJobsFinal(runID string) {
	h.t.Helper()
	bench.Eventually(h.t, "every apply job of run "+runID+" to be finalized", 20*time.Second, func() (bool, any) {
		var open []string
		require.NoError(h.t, h.db.Raw("SELECT state FROM river_job WHERE kind = 'run.apply' AND args->>'run_id' = ? AND finalized_at IS NULL", runID).Scan(&open).Error)
		return len(open) == 0, open
	}, bench.Poll(50*time.Millisecond))
}

// applyLease waits for the run's apply lease (granted with RUNNING) and returns it.
func (h *harness) applyLease(runID string) (jobID, token int64) {
	h.t.Helper()
	h.waitFor(runID, run.Running)
	var lease struct {
		JobID int64
		Token int64
	}
	require.NoError(h.t, h.db.Raw("SELECT job_id, token FROM run_leases WHERE run_id = ? AND phase = 'apply'", runID).Scan(&lease).Error)
	require.NotZero(h.t, lease.JobID, "the apply lease is granted with RUNNING")
	return lease.JobID, lease.Token
}

// TestALateAttemptNeverInterruptsALiveApply: River may start a second attempt of an
// apply job whose first attempt still runs (its rescue of a job running long); both
// carry the same job id. While the first attempt's lease is live the second skips and
// the apply goes on. When the apply is interrupted from outside, its worker releases
// the lease as it returns, and River's next attempt marks the run APPLY_INTERRUPTED at
// once (the lease would run a minute): it is never applied again. The sweeper is paused
// throughout, so the next attempt is the only one that can act.
func TestALateAttemptNeverInterruptsALiveApply(t *testing.T) {
	t.Parallel()
	slow := interruptedApply{Runner: mock.New(), interrupt: make(chan struct{}), applies: new(atomic.Int32)}
	hooks, attempts := lateAttempts()
	h := newHarness(t, harnessOpts{runner: slow, applyHooks: hooks, leases: runner.LeaseConfig{Heartbeat: 100 * time.Millisecond, TTL: time.Minute}})
	dbtest.HoldAdvisoryLock(t, h.db, runner.SweepLockKey)
	h.start()
	r := h.requestBucket("development", "late-attempt", "late-attempt", run.KindApply)
	jobID, token := h.applyLease(r.ID)

	late := run.Claim{JobID: jobID, Holder: "late-attempt", TTL: time.Minute}
	_, err := h.sys.Runs.Applies.BeginApply(context.Background(), r.ID, late)
	require.ErrorIs(t, err, run.ErrSkip, "a live lease of the same job is a live worker")
	require.Equal(t, run.Running, h.waitFor(r.ID, run.Running).State)
	var now int64
	require.NoError(t, h.db.Raw("SELECT token FROM run_leases WHERE run_id = ?", r.ID).Scan(&now).Error)
	require.Equal(t, token, now, "the live worker keeps its lease")

	close(slow.interrupt)
	next := bench.Receive(t, "the apply job's next attempt", 20*time.Second, attempts)
	require.ErrorIs(t, next.err, run.ErrSkip, "attempt %d", next.n)
	require.Equal(t, run.ApplyInterrupted, next.state, "the next attempt found the lease its job left and interrupted the run")
	interrupted := h.waitFor(r.ID, run.ApplyInterrupted)
	require.Contains(t, interrupted.StateReason, "stopped mid-apply")
	h.waitJobsFinal(r.ID)
	require.Equal(t, int32(1), slow.applies.Load(), "an interrupted apply is never applied again")
}

// TestASweptApplyIsNeverAppliedAgain: the other order. The apply is interrupted from
// outside, and the sweeper takes the released lease over before River's next attempt of
// the job asks (the attempt is held until then): the run is APPLY_INTERRUPTED by the
// sweeper, and the late attempt finds it so and applies nothing.
func TestASweptApplyIsNeverAppliedAgain(t *testing.T) {
	t.Parallel()
	slow := interruptedApply{Runner: mock.New(), interrupt: make(chan struct{}), applies: new(atomic.Int32)}
	hooks, attempts := lateAttempts()
	held, release := make(chan int, 1), make(chan struct{})
	hooks.Begin = func(ctx context.Context, _ string, n int) {
		if n > 1 {
			held <- n
			select {
			case <-release:
			case <-ctx.Done():
			}
		}
	}
	h := newHarness(t, harnessOpts{runner: slow, applyHooks: hooks, leases: runner.LeaseConfig{Heartbeat: 100 * time.Millisecond, TTL: time.Minute}})
	resume := dbtest.HoldAdvisoryLock(t, h.db, runner.SweepLockKey)
	h.start()
	r := h.requestBucket("development", "swept-apply", "swept-apply", run.KindApply)
	h.applyLease(r.ID)

	close(slow.interrupt)
	bench.Receive(t, "the apply job's next attempt to begin", 20*time.Second, held)
	resume() // the sweeper may act now; the attempt waits
	interrupted := h.waitFor(r.ID, run.ApplyInterrupted)
	require.Contains(t, interrupted.StateReason, "stopped renewing its lease")
	close(release)
	next := bench.Receive(t, "the held attempt's answer", 20*time.Second, attempts)
	require.ErrorIs(t, next.err, run.ErrSkip, "the late attempt begins nothing")
	h.waitJobsFinal(r.ID)
	require.Equal(t, interrupted.StateReason, h.waitFor(r.ID, run.ApplyInterrupted).StateReason)
	require.Equal(t, int32(1), slow.applies.Load(), "an interrupted apply is never applied again")
}

// TestABeginningThatFailsLeavesNothing: a phase whose inputs cannot be read as it begins
// (here the configuration's ciphertext damaged; in production the database going away
// at that moment) begins nothing: the run stays APPROVED with no lease, so the job's
// retry applies it once the read works, instead of finding it RUNNING and marking it
// APPLY_INTERRUPTED though nothing ran.
func TestABeginningThatFailsLeavesNothing(t *testing.T) {
	t.Parallel()
	h := newHarness(t, harnessOpts{})
	r := h.planByHand(h.requestBucket("development", "unreadable", "unreadable", run.KindApply))
	require.Equal(t, run.Approved, r.State, r.StateReason)
	var sealed struct{ Ciphertext []byte }
	require.NoError(t, h.db.Raw("SELECT ciphertext FROM artifacts WHERE id = ?", r.ConfigArtifactID).Scan(&sealed).Error)
	require.NotEmpty(t, sealed.Ciphertext)
	require.NoError(t, h.db.Exec("UPDATE artifacts SET ciphertext = ? WHERE id = ?", []byte("damaged"), r.ConfigArtifactID).Error)

	_, err := h.sys.Runs.Applies.BeginApply(context.Background(), r.ID, byHand)
	require.Error(t, err)
	require.NotErrorIs(t, err, run.ErrSkip)
	require.Equal(t, run.Approved, h.waitFor(r.ID, run.Approved).State)
	var leases int64
	require.NoError(t, h.db.Raw("SELECT count(*) FROM run_leases WHERE run_id = ?", r.ID).Scan(&leases).Error)
	require.Zero(t, leases, "a phase that never began holds no lease")

	require.NoError(t, h.db.Exec("UPDATE artifacts SET ciphertext = ? WHERE id = ?", sealed.Ciphertext, r.ConfigArtifactID).Error)
	work, err := h.sys.Runs.Applies.BeginApply(context.Background(), r.ID, byHand)
	require.NoError(t, err)
	require.Equal(t, run.Running, work.Run.State)
	require.NotEmpty(t, work.Config)
}

func jobState(t *testing.T, sqlDB *sql.DB, id int64) string {
	t.Helper()
	var s string
	require.NoError(t, sqlDB.QueryRow("SELECT state FROM river_job WHERE id = $1", id).Scan(&s))
	return s
}
