package run

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestSelfApprovalIsMarked: an approval by the run's requester (or by the requester of a
// run it was planned again from) is self-approved, and its audit event says so; another
// person's approval and Gantry's self-service one are neither.
func TestSelfApprovalIsMarked(t *testing.T) {
	t.Parallel()
	now := time.Now()
	waiting := func() Run {
		return Run{ID: "run-1", State: PendingApproval, RequestedBy: "usr-olivia", PriorRequesters: []string{"usr-otto"}, PlanRevision: 1, PlanDigest: "sha256:aa"}
	}
	for _, c := range []struct {
		approver string
		self     bool
	}{{"usr-olivia", true}, {"usr-otto", true}, {"usr-adam", false}} {
		r := waiting()
		require.NoError(t, r.Approve(Decider{UserID: c.approver, Name: c.approver}, EvidenceOf(r), now))
		require.Equal(t, c.self, r.SelfApproved(), c.approver)
		marked, ok := r.moves.Last().Data["self_approved"]
		require.Equal(t, c.self, ok && marked == true, c.approver)
	}
	r := waiting()
	r.State = Planning
	require.NoError(t, r.SelfServiceApprove("self-service: risk 1", now))
	require.False(t, r.SelfApproved(), "Gantry's approval is no one's self-approval")
	require.NotContains(t, r.moves.Last().Data, "self_approved")
}
