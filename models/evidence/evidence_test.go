package evidence_test

import (
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"gantry/models/evidence"
	"gantry/models/run"
)

func ev(seq int64, action string, data map[string]any) evidence.ReportEvent {
	return evidence.ReportEvent{Seq: seq, At: time.Unix(seq, 0), Action: action, Data: data}
}

// TestJudgeMatchesTheApplyRecordToTheApprovalRecord: the verdict of every kind of run,
// from its audit events and the stored plan's digest now.
func TestJudgeMatchesTheApplyRecordToTheApprovalRecord(t *testing.T) {
	const a, b = "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa", "bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb"
	applied := []evidence.ReportEvent{
		ev(1, "run.queued", nil), ev(2, "run.pending_approval", map[string]any{"plan_digest": a}),
		ev(3, "run.approved", map[string]any{"approved_plan_digest": a, "plan_digest": a}),
		ev(4, "run.running", map[string]any{"plan_digest": a}), ev(5, "run.succeeded", nil),
	}
	succeeded := run.Run{State: run.Succeeded}

	v := evidence.Judge(succeeded, applied, a, nil)
	require.True(t, v.Applied)
	require.True(t, v.Match)
	require.Equal(t, "The applied artifact is the approved artifact: the approval, the apply record and the stored plan file all have sha256 "+a+".", v.Text)

	// The stored plan file swapped after the approval.
	v = evidence.Judge(succeeded, applied, b, nil)
	require.False(t, v.Match)
	require.Contains(t, v.Text, "is NOT the approved artifact: approved aaaaaaaaaaaaaaaaaaa…, apply record aaaaaaaaaaaaaaaaaaa…, stored plan file bbbbbbbbbbbbbbbbbbb…")
	v = evidence.Judge(succeeded, applied, "", errors.New("message authentication failed"))
	require.False(t, v.Match)
	require.Contains(t, v.Text, "the stored plan file cannot be read (message authentication failed)")

	// An apply record that names another plan than the approval bound.
	other := append([]evidence.ReportEvent{}, applied...)
	other[3] = ev(4, "run.running", map[string]any{"plan_digest": b})
	require.False(t, evidence.Judge(succeeded, other, a, nil).Match)

	// An approval given again after the first: the one in force at the apply counts.
	again := []evidence.ReportEvent{applied[0], applied[1], ev(3, "run.approved", map[string]any{"approved_plan_digest": b}),
		ev(4, "run.pending_approval", nil), ev(5, "run.approved", map[string]any{"approved_plan_digest": a}), ev(6, "run.running", map[string]any{"plan_digest": a})}
	require.True(t, evidence.Judge(succeeded, again, a, nil).Match)

	// An approval in force that its requester gave says so; an earlier one does not count.
	self := append([]evidence.ReportEvent{}, applied...)
	self[2].SelfApproval = "self-approved: the requester approved their own run"
	v = evidence.Judge(succeeded, self, a, nil)
	require.True(t, v.Match)
	require.True(t, v.SelfApproved)
	require.Equal(t, "The applied artifact is the approved artifact: the approval, the apply record and the stored plan file all have sha256 "+a+
		". The approval in force is marked self-approved: the requester approved their own run.", v.Text)
	again[2].SelfApproval = "self-approved: the requester approved their own run"
	require.False(t, evidence.Judge(succeeded, again, a, nil).SelfApproved, "only the approval in force at the apply counts")

	// No approval record before the apply: unevidenced.
	unapproved := []evidence.ReportEvent{applied[0], ev(4, "run.running", map[string]any{"plan_digest": a})}
	v = evidence.Judge(succeeded, unapproved, a, nil)
	require.False(t, v.Match)
	require.Contains(t, v.Text, "(unevidenced)")

	// Runs that never applied say why, in words.
	queued := applied[:2]
	for _, c := range []struct {
		r    run.Run
		says string
	}{
		{run.Run{State: run.Rejected, RejectedByName: "Adam", StateReason: "not this week"}, "Never applied: rejected by Adam: not this week."},
		{run.Run{State: run.Expired, StateReason: "nobody decided within 168 h"}, "Never applied: the decision window or the approval expired: nobody decided within 168 h."},
		{run.Run{State: run.Stale, StateReason: "the state moved"}, "Never applied: the plan went stale: the state moved."},
		{run.Run{State: run.PolicyBlocked, StateReason: "hard-mandatory rule failed"}, "Never applied: blocked by policy: hard-mandatory rule failed."},
		{run.Run{State: run.Cancelled, StateReason: "cancelled by Olivia"}, "Never applied: cancelled: cancelled by Olivia."},
		{run.Run{State: run.NoChanges}, "Nothing to apply: the plan had no changes."},
		{run.Run{State: run.PendingApproval}, "Not applied yet: waiting for a decision."},
	} {
		v := evidence.Judge(c.r, queued, a, nil)
		require.False(t, v.Applied, c.r.State)
		require.False(t, v.Match, c.r.State)
		require.Equal(t, c.says, v.Text)
	}
}
