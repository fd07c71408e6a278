package runner_test

import (
	"context"
	"encoding/json"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"gantry/bench"
	"gantry/models/notify"
	"gantry/models/run"
	"gantry/runner"
	"gantry/runner/mock"
)

// heldPhases is the mock, except that a phase the test holds (a run's plan or apply)
// waits, once begun, until the test lets it go: the run stays PLANNING or RUNNING for as
// long as the test needs, whatever the machine's pace.
type heldPhases struct {
	runner.Runner
	mu    sync.Mutex
	holds map[string]*phaseHold // by run id and phase
}

// phaseHold is one held phase (or apply attempt): entered is closed once it waits, and
// release lets it go on.
type phaseHold struct {
	entered chan struct{}
	open    chan struct{}
	release func()
}

func newHold(t *testing.T) *phaseHold {
	h := &phaseHold{entered: make(chan struct{}), open: make(chan struct{})}
	h.release = sync.OnceFunc(func() { close(h.open) })
	t.Cleanup(h.release)
	return h
}

// wait holds the caller until the hold is released (or ctx ends).
func (h *phaseHold) wait(ctx context.Context) error {
	close(h.entered)
	select {
	case <-h.open:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func newHeldPhases() *heldPhases {
	return &heldPhases{Runner: mock.New(), holds: map[string]*phaseHold{}}
}

// hold makes run runID's next phase (plan or apply) wait until the returned hold is
// released.
func (g *heldPhases) hold(t *testing.T, runID, phase string) *phaseHold {
	h := newHold(t)
	g.mu.Lock()
	g.holds[runID+"/"+phase] = h
	g.mu.Unlock()
	return h
}

func (g *heldPhases) take(ctx context.Context, runID, phase string) error {
	g.mu.Lock()
	h := g.holds[runID+"/"+phase]
	delete(g.holds, runID+"/"+phase)
	g.mu.Unlock()
	if h == nil {
		return nil
	}
	return h.wait(ctx)
}

func (g *heldPhases) Plan(ctx context.Context, req runner.PlanRequest) (runner.PlanResult, error) {
	if err := g.take(ctx, req.RunID, "plan"); err != nil {
		return runner.PlanResult{}, err
	}
	return g.Runner.Plan(ctx, req)
}

func (g *heldPhases) Apply(ctx context.Context, req runner.ApplyRequest) (runner.ApplyResult, error) {
	if err := g.take(ctx, req.RunID, "apply"); err != nil {
		return runner.ApplyResult{}, err
	}
	return g.Runner.Apply(ctx, req)
}

// applyAttempts hears each apply job's attempts (runner.ApplyHooks): busy is signalled
// when an attempt of a run found its workspace busy, and an armed gate holds the run's
// next attempt before it asks to begin (so no attempt runs while the test moves the
// clock).
type applyAttempts struct {
	mu    sync.Mutex
	busy  map[string]chan struct{}
	gates map[string]*phaseHold
}

func newApplyAttempts() *applyAttempts {
	return &applyAttempts{busy: map[string]chan struct{}{}, gates: map[string]*phaseHold{}}
}

func (a *applyAttempts) hooks() runner.ApplyHooks {
	return runner.ApplyHooks{
		Begin: func(ctx context.Context, runID string, _ int) {
			a.mu.Lock()
			g := a.gates[runID]
			delete(a.gates, runID)
			a.mu.Unlock()
			if g != nil {
				_ = g.wait(ctx)
			}
		},
		Begun: func(runID string, _ int, _ run.State, err error) {
			if !errors.Is(err, run.ErrWorkspaceBusy) {
				return
			}
			select {
			case a.busyOf(runID) <- struct{}{}:
			default:
			}
		},
	}
}

// busyOf is the channel that hears run runID's busy answers.
func (a *applyAttempts) busyOf(runID string) chan struct{} {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.busy[runID] == nil {
		a.busy[runID] = make(chan struct{}, 1)
	}
	return a.busy[runID]
}

// gate holds run runID's next apply attempt before it begins.
func (a *applyAttempts) gate(t *testing.T, runID string) *phaseHold {
	g := newHold(t)
	a.mu.Lock()
	a.gates[runID] = g
	a.mu.Unlock()
	return g
}

// approved approves waiting run r as the admin.
func (h *harness) approved(r run.Run) run.Run {
	h.t.Helper()
	out, err := h.sys.Runs.Decisions.Approve(h.as("admin"), r.ID, run.Approval{Evidence: run.EvidenceOf(r)})
	require.NoError(h.t, err)
	return out
}

// queueOf reads run id's place in the apply queue through the service, as its page does.
func (h *harness) queueOf(id string) *run.Queue {
	h.t.Helper()
	r, err := h.sys.Runs.Reads.Get(h.as("viewer"), id)
	require.NoError(h.t, err)
	q, err := h.sys.Runs.Reads.Queue(h.as("viewer"), r)
	require.NoError(h.t, err)
	return q
}

// endingNotice is the notice queued (in the transaction that ended run id) of event e.
func (h *harness) endingNotice(id string, e notify.Event) notify.Notice {
	h.t.Helper()
	var raw []string
	require.NoError(h.t, h.db.Raw(`SELECT args->>'notice' FROM river_job WHERE kind = 'notify.fanout'
		AND args->'notice'->>'run_id' = ? AND args->'notice'->>'event' = ?`, id, string(e)).Scan(&raw).Error)
	require.Len(h.t, raw, 1, "one %s notice of run %s", e, id)
	var n notify.Notice
	require.NoError(h.t, json.Unmarshal([]byte(raw[0]), &n))
	return n
}

// causeOf is what the audit event of run id's move to action says caused it.
func (h *harness) causeOf(id, action string) (cause, reason string) {
	h.t.Helper()
	var row struct{ Cause, Reason string }
	require.NoError(h.t, h.db.Raw(`SELECT coalesce(data->>'cause_run_id', '') AS cause, data->>'reason' AS reason FROM audit_events
		WHERE target_id = ? AND action = ?`, id, action).Scan(&row).Error)
	return row.Cause, row.Reason
}

// TestQueuedBehindASlowPlan: run B, approved while an earlier run A of its workspace is
// still planning, waits behind it and says so (position 1, behind A planning); once A's
// plan waits for a person, B applies.
func TestQueuedBehindASlowPlan(t *testing.T) {
	t.Parallel()
	held, attempts := newHeldPhases(), newApplyAttempts()
	h := newHarness(t, harnessOpts{runner: held, applyHooks: attempts.hooks()})
	a := h.requestBucket("staging", "queue-plan", "queue-plan", run.KindApply)
	b := h.requestBucket("staging", "queue-plan", "queue-plan", run.KindApply)
	plan := held.hold(t, a.ID, "plan")
	h.start()
	bench.Receive(t, "A's plan to begin and hold", 20*time.Second, plan.entered)
	h.approved(h.waitFor(b.ID, run.PendingApproval))
	bench.Receive(t, "B's apply to find the workspace busy", 20*time.Second, attempts.busyOf(b.ID))

	require.Equal(t, run.Planning, h.waitFor(a.ID, run.Planning).State)
	require.Equal(t, &run.Queue{Position: 1, Waiting: 1, Holder: run.QueueHolder{RunID: a.ID, Number: a.Number, Phase: run.HolderPlanning}},
		h.queueOf(b.ID), "B waits behind A's plan")
	require.Nil(t, h.queueOf(a.ID), "a planning run is not waiting to apply")

	plan.release()
	require.Equal(t, run.PendingApproval, h.waitFor(a.ID, run.PendingApproval, run.Stale).State, "A's plan waits for a person")
	require.Equal(t, run.Succeeded, h.waitFor(b.ID, run.Succeeded, run.Failed, run.Stale, run.Expired).State)
	// B's state then moved under A's plan: A went stale, naming B.
	stale := h.waitFor(a.ID, run.Stale)
	require.Contains(t, stale.StateReason, "written by run "+b.Label())
}

// TestQueuedBehindAnApplyGoesStale: run B waits behind run A's apply (shown as such);
// the state A writes makes B STALE in the same transaction, its reason naming A, the
// audit event and the notice to B's requester and approver carrying A's id.
func TestQueuedBehindAnApplyGoesStale(t *testing.T) {
	t.Parallel()
	held, attempts := newHeldPhases(), newApplyAttempts()
	h := newHarness(t, harnessOpts{runner: held, applyHooks: attempts.hooks()})
	h.start()
	a := h.waitFor(h.requestBucket("staging", "queue-apply", "queue-apply", run.KindApply).ID, run.PendingApproval)
	b := h.waitFor(h.requestBucket("staging", "queue-apply", "queue-apply", run.KindApply).ID, run.PendingApproval)
	apply := held.hold(t, a.ID, "apply")
	h.approved(a)
	bench.Receive(t, "A's apply to begin and hold", 20*time.Second, apply.entered)
	h.approved(b)
	bench.Receive(t, "B's apply to find the workspace busy", 20*time.Second, attempts.busyOf(b.ID))
	require.Equal(t, &run.Queue{Position: 1, Waiting: 1, Holder: run.QueueHolder{RunID: a.ID, Number: a.Number, Phase: run.HolderApplying}},
		h.queueOf(b.ID), "B waits behind A's apply")

	apply.release()
	h.waitFor(a.ID, run.Verifying, run.Succeeded)
	// The write and B's end are one transaction: B is STALE as soon as A moved on.
	var now run.Run
	require.NoError(t, h.db.Where("id = ?", b.ID).Take(&now).Error)
	require.Equal(t, run.Stale, now.State, now.StateReason)
	require.Equal(t, run.EndStateMoved, now.Ending)
	require.Contains(t, now.StateReason, "written by run "+a.Label())
	require.Contains(t, now.StateReason, "the workspace state moved to serial 1")

	cause, reason := h.causeOf(b.ID, "run.stale")
	require.Equal(t, a.ID, cause, "the audit event names the writer")
	require.Equal(t, now.StateReason, reason)
	n := h.endingNotice(b.ID, notify.RunStale)
	require.Equal(t, now.StateReason, n.Reason)
	require.Equal(t, a.ID, n.CauseRunID)
	require.ElementsMatch(t, []string{h.users["operator"].UserID, h.users["admin"].UserID}, n.Recipients, "the requester and the approver")
}

// TestExpiredWhileQueued: an approval whose validity runs out while its run waits
// behind another ends EXPIRED saying what it waited behind, by the clock's job and by
// the apply's own check alike; the requester and the approver are told, with the
// holder's id.
func TestExpiredWhileQueued(t *testing.T) {
	t.Parallel()
	held, attempts := newHeldPhases(), newApplyAttempts()
	h := newHarness(t, harnessOpts{runner: held, applyHooks: attempts.hooks()})
	h.start()
	for _, path := range []string{"expiry job", "apply's check"} {
		ws := "queue-expiry-" + map[string]string{"expiry job": "job", "apply's check": "apply"}[path]
		a := h.waitFor(h.requestBucket("staging", ws, ws, run.KindApply).ID, run.PendingApproval)
		b := h.waitFor(h.requestBucket("staging", ws, ws, run.KindApply).ID, run.PendingApproval)
		apply := held.hold(t, a.ID, "apply")
		h.approved(a)
		bench.Receive(t, path+": A's apply to begin and hold", 20*time.Second, apply.entered)
		h.approved(b)
		bench.Receive(t, path+": B's apply to find the workspace busy", 20*time.Second, attempts.busyOf(b.ID))
		// B's next attempt waits before it begins: nothing else looks at B's clock now.
		gate := attempts.gate(t, b.ID)
		bench.Receive(t, path+": B's next attempt to wait", 20*time.Second, gate.entered)
		require.NoError(t, h.db.Exec("UPDATE runs SET approval_expires_at = now() - interval '1 second' WHERE id = ?", b.ID).Error)

		var expired run.Run
		if path == "expiry job" {
			var err error
			expired, err = h.sys.Runs.Decisions.ExpireIfDue(context.Background(), b.ID, run.Approved)
			require.NoError(t, err)
			gate.release()
		} else {
			gate.release()
			expired = h.waitFor(b.ID, run.Expired, run.Running, run.Stale)
		}
		require.Equal(t, run.Expired, expired.State, path)
		require.Equal(t, run.EndApprovalValidityEnded, expired.Ending, path)
		require.Contains(t, expired.StateReason, "waited behind run "+a.Label()+" (applying)", path)
		cause, _ := h.causeOf(b.ID, "run.expired")
		require.Equal(t, a.ID, cause, path)
		n := h.endingNotice(b.ID, notify.RunExpired)
		require.Equal(t, expired.StateReason, n.Reason, path)
		require.Equal(t, a.ID, n.CauseRunID, path)
		require.ElementsMatch(t, []string{h.users["operator"].UserID, h.users["admin"].UserID}, n.Recipients, path)

		apply.release()
		require.Equal(t, run.Succeeded, h.waitFor(a.ID, run.Succeeded, run.Failed).State, path)
		require.Zero(t, countApplies(t, h, b.ID), "%s: B applied nothing", path)
	}
}

// countApplies counts the state versions run id wrote.
func countApplies(t *testing.T, h *harness, id string) int64 {
	var n int64
	require.NoError(t, h.db.Table("state_versions").Where("run_id = ?", id).Count(&n).Error)
	return n
}
