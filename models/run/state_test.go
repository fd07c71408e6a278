package run

import (
	"errors"
	"testing"

	"github.com/stretchr/testify/require"
)

// legal is the DESIGN §2 table written out independently of the code's table.
var legal = map[[2]State]bool{
	{Queued, Planning}: true, {Queued, Cancelled}: true,
	{Planning, Planned}: true, {Planning, NoChanges}: true, {Planning, PolicyBlocked}: true,
	{Planning, PendingApproval}: true, {Planning, Approved}: true, {Planning, Failed}: true, {Planning, Cancelled}: true,
	{PolicyBlocked, PendingApproval}: true, {PolicyBlocked, Cancelled}: true,
	{PendingApproval, Approved}: true, {PendingApproval, Rejected}: true, {PendingApproval, Cancelled}: true,
	{PendingApproval, Expired}: true, {PendingApproval, Stale}: true,
	{Approved, Running}: true, {Approved, Expired}: true, {Approved, Cancelled}: true, {Approved, Stale}: true,
	{Running, Verifying}: true, {Running, Failed}: true, {Running, ApplyInterrupted}: true,
	{Verifying, Succeeded}: true, {Verifying, Failed}: true,
	{ApplyInterrupted, Failed}: true,
}

func TestTransitionTableEveryPair(t *testing.T) {
	t.Parallel()
	allowed := 0
	for _, from := range States {
		for _, to := range States {
			want := legal[[2]State{from, to}]
			require.Equal(t, want, CanTransition(from, to), "%s -> %s", from, to)
			r := &Run{State: from}
			err := r.transition(to, "test")
			if want {
				allowed++
				require.NoError(t, err, "%s -> %s", from, to)
				require.Equal(t, to, r.State)
			} else {
				require.ErrorIs(t, err, ErrInvalidTransition, "%s -> %s", from, to)
				require.Equal(t, from, r.State, "a refused transition changes nothing")
			}
		}
	}
	require.Equal(t, len(legal), allowed)
}

func TestTerminalStates(t *testing.T) {
	t.Parallel()
	for _, s := range []State{Planned, NoChanges, Succeeded, Failed, Rejected, Cancelled, Expired, Stale} {
		require.True(t, s.Terminal(), s)
	}
	for _, s := range []State{Queued, Planning, PolicyBlocked, PendingApproval, Approved, Running, Verifying, ApplyInterrupted} {
		require.False(t, s.Terminal(), s)
	}
}

func TestAvailableActions(t *testing.T) {
	t.Parallel()
	require.Equal(t, []Action{ActionApprove, ActionReject, ActionCancel}, AvailableActions(PendingApproval))
	require.Equal(t, []Action{ActionCancel}, AvailableActions(Planning), "approving is for waiting runs only")
	require.Equal(t, []Action{ActionCancel}, AvailableActions(Approved))
	require.Equal(t, []Action{ActionCancel}, AvailableActions(Queued))
	require.Empty(t, AvailableActions(Running))
	require.Equal(t, []Action{ActionRecover}, AvailableActions(ApplyInterrupted))
	require.Empty(t, AvailableActions(Verifying))
	require.Empty(t, AvailableActions(Succeeded))
}

func TestDecisionsBindEvidence(t *testing.T) {
	t.Parallel()
	eval := "pev-1"
	r := &Run{State: PendingApproval, PlanDigest: "sha256:aa", PolicyEvaluationID: &eval, PolicyResultDigest: "r1", PolicyBundleDigest: "b1"}
	good := Evidence{PlanDigest: "sha256:aa", PolicyEvaluationID: "pev-1", PolicyResultDigest: "r1", PolicyBundleDigest: "b1"}
	require.Equal(t, good, EvidenceOf(*r))
	stale := []Evidence{
		{PlanDigest: "sha256:bb", PolicyEvaluationID: "pev-1", PolicyResultDigest: "r1", PolicyBundleDigest: "b1"},
		{PlanDigest: "sha256:aa", PolicyEvaluationID: "pev-0", PolicyResultDigest: "r1", PolicyBundleDigest: "b1"},
		{PlanDigest: "sha256:aa", PolicyEvaluationID: "pev-1", PolicyResultDigest: "r0", PolicyBundleDigest: "b1"},
		{PlanDigest: "sha256:aa", PolicyEvaluationID: "pev-1", PolicyResultDigest: "r1", PolicyBundleDigest: "b0"},
		{PlanDigest: "sha256:aa"},
	}
	for _, ev := range stale {
		require.ErrorIs(t, r.Approve(Decider{UserID: "usr-1", Name: "Ann"}, ev), ErrStaleEvidence, "%+v", ev)
		require.Equal(t, PendingApproval, r.State)
	}

	require.NoError(t, r.Approve(Decider{UserID: "usr-1", Name: "Ann"}, good))
	require.Equal(t, Approved, r.State)
	require.Equal(t, "sha256:aa", r.ApprovedPlanDigest)
	require.Equal(t, "usr-1", *r.ApprovedBy)

	// Rejection needs a reason, binds the same evidence and stamps no approval fields.
	r2 := &Run{State: PendingApproval, PlanDigest: "sha256:aa"}
	ev2 := Evidence{PlanDigest: "sha256:aa"}
	require.ErrorIs(t, r2.Reject(Decider{UserID: "usr-2"}, ev2, "  "), ErrReasonRequired)
	require.ErrorIs(t, r2.Reject(Decider{UserID: "usr-2"}, Evidence{PlanDigest: "sha256:aa", PolicyEvaluationID: "x"}, "why not"), ErrStaleEvidence)
	require.NoError(t, r2.Reject(Decider{UserID: "usr-2", Name: "Bob"}, ev2, "wrong region"))
	require.Equal(t, Rejected, r2.State)
	require.Nil(t, r2.ApprovedBy)
	require.Empty(t, r2.ApprovedPlanDigest)
	require.Equal(t, "wrong region", r2.StateReason)

	// Deciding twice is refused by the table.
	require.True(t, errors.Is(r2.Approve(Decider{UserID: "usr-1"}, ev2), ErrInvalidTransition))
}

func TestHardPolicyBlockIsFinal(t *testing.T) {
	t.Parallel()
	hard := Run{State: PolicyBlocked, PolicyOutcome: "hard_failed"}
	require.True(t, hard.Finished())
	require.Empty(t, hard.Actions())
	// Nothing moves it: not a cancel, not a release.
	require.ErrorIs(t, hard.Cancel(Decider{Name: "Ann"}, "tidy up"), ErrInvalidTransition)
	require.ErrorIs(t, hard.ReleasePolicyBlock("x"), ErrInvalidTransition)
	require.Equal(t, PolicyBlocked, hard.State)
	soft := Run{State: PolicyBlocked, PolicyOutcome: "soft_failed"}
	require.False(t, soft.Finished())
	require.Equal(t, []Action{ActionCancel}, soft.Actions())
	require.NoError(t, soft.ReleasePolicyBlock("overridden"))
	require.Equal(t, PendingApproval, soft.State)
	// Nothing but POLICY_BLOCKED is released by an override.
	require.ErrorIs(t, (&Run{State: Planning}).ReleasePolicyBlock("x"), ErrInvalidTransition)
}
