package run

import (
	"testing"

	"github.com/stretchr/testify/require"

	"gantry/models/authz"
	"gantry/models/errs"
)

// TestCancelWhileApplying: a run that is applying may be cancelled (stopped) by who
// could approve it (four eyes aside: stopping is never approving) or an admin or owner;
// a viewer, an auditor, an operator below the run's approver and one without cloud.live
// on a live run may not. Nothing else is possible while it applies.
func TestCancelWhileApplying(t *testing.T) {
	t.Parallel()
	scenarios := decisionScenarios(t)
	applying := func(name string) scenario {
		s := scenarios[name]
		s.run.State = Running
		return s
	}
	// While it applies nothing is decided: a conflict, or a refusal of the person first
	// (only admins and owners override).
	busy := func(override, cancel errs.Code) verdicts { return verdicts{conflict, conflict, override, cancel} }
	for _, c := range []struct {
		row decisionRow
		s   scenario
	}{
		{decisionRow{name: "apply r1p viewer", who: actor{role: authz.RoleViewer}, want: all(forbidden)}, applying("r1-protected")},
		{decisionRow{name: "apply r1p auditor", who: actor{role: authz.RoleAuditor}, want: all(forbidden)}, applying("r1-protected")},
		{decisionRow{name: "apply r1p operator", who: actor{role: authz.RoleOperator}, want: busy(forbidden, okCode)}, applying("r1-protected")},
		{decisionRow{name: "apply r1p operator requester", who: actor{role: authz.RoleOperator, requester: true}, want: verdicts{forbidden, forbidden, forbidden, okCode}}, applying("r1-protected")},
		{decisionRow{name: "apply r3 operator", who: actor{role: authz.RoleOperator}, want: verdicts{forbidden, forbidden, forbidden, forbidden}}, applying("r3-destroy")},
		{decisionRow{name: "apply r3 admin", who: actor{role: authz.RoleAdmin}, want: verdicts{forbidden, forbidden, forbidden, okCode}}, applying("r3-destroy")},
		{decisionRow{name: "apply r3 owner", who: actor{role: authz.RoleOwner}, want: busy(conflict, okCode)}, applying("r3-destroy")},
		{decisionRow{name: "apply live operator", who: actor{role: authz.RoleOperator}, want: verdicts{forbidden, conflict, forbidden, forbidden}}, applying("live")},
		{decisionRow{name: "apply live operator cloud.live", who: actor{role: authz.RoleOperator, cloudLive: true}, want: busy(forbidden, okCode)}, applying("live")},
	} {
		t.Run(c.row.name, func(t *testing.T) { decideRow(t, c.row, c.s) })
	}
}

// TestCancelWhileApplyingEndsInterrupted: Run.Cancel of a run that is applying ends it
// APPLY_INTERRUPTED with APPLY_CANCELLED, who and why, never CANCELLED; the cancellation
// needs its confirmation and a reason of MinReasonLength characters.
func TestCancelWhileApplyingEndsInterrupted(t *testing.T) {
	t.Parallel()
	r := decisionScenarios(t)["r1-protected"].run
	r.State = Running
	require.Error(t, Cancellation{Reason: "too short", Confirmed: true}.check(r))
	v, ok := errs.AsValidation(Cancellation{Reason: "the wrong database is being replaced"}.check(r))
	require.True(t, ok)
	require.Contains(t, v.Fields, "confirm")
	require.NoError(t, Cancellation{Reason: "the wrong database is being replaced", Confirmed: true}.check(r))

	d := Decider{UserID: "usr-ops", Name: "Olivia Ops"}
	require.NoError(t, r.Cancel(d, "the wrong database is being replaced", t0))
	require.Equal(t, ApplyInterrupted, r.State)
	require.Equal(t, EndApplyCancelled, r.Ending)
	require.Contains(t, r.StateReason, "cancelled while it applied by Olivia Ops: the wrong database is being replaced")
	require.Equal(t, "usr-ops", *r.CancelledBy)
	require.Equal(t, []Action{ActionRecover}, r.Actions(), "only an admin's recovery moves it on")

	// Before an apply, a cancel needs neither and ends CANCELLED.
	waiting := decisionScenarios(t)["r1-protected"].run
	require.NoError(t, Cancellation{}.check(waiting))
	require.NoError(t, waiting.Cancel(d, "", t0))
	require.Equal(t, Cancelled, waiting.State)
	require.Equal(t, EndCancelled, waiting.Ending)
}
