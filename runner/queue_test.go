package runner_test

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"gantry/bench"
	"gantry/models/notify"
	"gantry/models/run"
	"gantry/runner/mock"
	"gantry/runner/runnertest"
)

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
	held, attempts := runnertest.NewPhases(mock.New()), runnertest.NewAttempts()
	h := newHarness(t, harnessOpts{runner: held, applyHooks: attempts.Hooks()})
	a := h.requestBucket("staging", "queue-plan", "queue-plan", run.KindApply)
	b := h.requestBucket("staging", "queue-plan", "queue-plan", run.KindApply)
	plan := held.Hold(t, a.ID, "plan")
	h.start()
	bench.Receive(t, "A's plan to begin and hold", 20*time.Second, plan.Entered)
	h.approved(h.waitFor(b.ID, run.PendingApproval))
	bench.Receive(t, "B's apply to find the workspace busy", 20*time.Second, attempts.Busy(b.ID))

	require.Equal(t, run.Planning, h.waitFor(a.ID, run.Planning).State)
	require.Equal(t, &run.Queue{Position: 1, Waiting: 1, Holder: run.QueueHolder{RunID: a.ID, Number: a.Number, Phase: run.HolderPlanning}},
		h.queueOf(b.ID), "B waits behind A's plan")
	require.Nil(t, h.queueOf(a.ID), "a planning run is not waiting to apply")

	plan.Release()
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
	held, attempts := runnertest.NewPhases(mock.New()), runnertest.NewAttempts()
	h := newHarness(t, harnessOpts{runner: held, applyHooks: attempts.Hooks()})
	h.start()
	a := h.waitFor(h.requestBucket("staging", "queue-apply", "queue-apply", run.KindApply).ID, run.PendingApproval)
	b := h.waitFor(h.requestBucket("staging", "queue-apply", "queue-apply", run.KindApply).ID, run.PendingApproval)
	apply := held.Hold(t, a.ID, "apply")
	h.approved(a)
	bench.Receive(t, "A's apply to begin and hold", 20*time.Second, apply.Entered)
	h.approved(b)
	bench.Receive(t, "B's apply to find the workspace busy", 20*time.Second, attempts.Busy(b.ID))
	require.Equal(t, &run.Queue{Position: 1, Waiting: 1, Holder: run.QueueHolder{RunID: a.ID, Number: a.Number, Phase: run.HolderApplying}},
		h.queueOf(b.ID), "B waits behind A's apply")

	apply.Release()
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
	held, attempts := runnertest.NewPhases(mock.New()), runnertest.NewAttempts()
	h := newHarness(t, harnessOpts{runner: held, applyHooks: attempts.Hooks()})
	h.start()
	for _, path := range []string{"expiry job", "apply's check"} {
		ws := "queue-expiry-" + map[string]string{"expiry job": "job", "apply's check": "apply"}[path]
		a := h.waitFor(h.requestBucket("staging", ws, ws, run.KindApply).ID, run.PendingApproval)
		b := h.waitFor(h.requestBucket("staging", ws, ws, run.KindApply).ID, run.PendingApproval)
		apply := held.Hold(t, a.ID, "apply")
		h.approved(a)
		bench.Receive(t, path+": A's apply to begin and hold", 20*time.Second, apply.Entered)
		h.approved(b)
		bench.Receive(t, path+": B's apply to find the workspace busy", 20*time.Second, attempts.Busy(b.ID))
		// B's next attempt waits before it begins: nothing else looks at B's clock now.
		gate := attempts.HoldNext(t, b.ID)
		bench.Receive(t, path+": B's next attempt to wait", 20*time.Second, gate.Entered)
		require.NoError(t, h.db.Exec("UPDATE runs SET approval_expires_at = now() - interval '1 second' WHERE id = ?", b.ID).Error)

		var expired run.Run
		if path == "expiry job" {
			var err error
			expired, err = h.sys.Runs.Decisions.ExpireIfDue(context.Background(), b.ID, run.Approved)
			require.NoError(t, err)
			gate.Release()
		} else {
			gate.Release()
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

		apply.Release()
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
