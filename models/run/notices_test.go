package run

import (
	"testing"

	"github.com/stretchr/testify/require"

	"gantry/models/authz"
	"gantry/models/notify"
)

// TestNoticesOfTransitions pins which transition tells people what.
func TestNoticesOfTransitions(t *testing.T) {
	t.Parallel()
	person := Run{ApprovalKind: "person"}
	self := Run{ApprovalKind: "self-service"}
	hard := Run{PolicyOutcome: "hard_failed"}
	cases := []struct {
		name string
		r    Run
		m    move
		want []notify.Event
	}{
		{"planned, waits", Run{}, move{From: Planning, To: PendingApproval}, []notify.Event{notify.DecisionWaiting}},
		{"approval voided, waits again", Run{}, move{From: Approved, To: PendingApproval}, []notify.Event{notify.DecisionWaiting}},
		{"override released", Run{}, move{From: PolicyBlocked, To: PendingApproval}, []notify.Event{notify.RunDecided, notify.DecisionWaiting}},
		{"soft block waits for an override", Run{PolicyOutcome: "soft_failed"}, move{From: Planning, To: PolicyBlocked}, []notify.Event{notify.DecisionWaiting}},
		{"hard block", hard, move{From: Planning, To: PolicyBlocked}, []notify.Event{notify.RunFailed}},
		{"approved by a person", person, move{From: PendingApproval, To: Approved}, []notify.Event{notify.RunDecided}},
		{"self-service approval tells nobody", self, move{From: Planning, To: Approved}, nil},
		{"rejected", Run{}, move{From: PendingApproval, To: Rejected}, []notify.Event{notify.RunDecided}},
		{"expired", Run{}, move{From: PendingApproval, To: Expired}, []notify.Event{notify.RunExpired}},
		{"stale", Run{}, move{From: Approved, To: Stale}, []notify.Event{notify.RunStale}},
		{"plan failed", Run{}, move{From: Planning, To: Failed}, []notify.Event{notify.RunFailed}},
		{"apply interrupted", Run{}, move{From: Running, To: ApplyInterrupted}, []notify.Event{notify.RunFailed}},
		{"interrupted, then failed: told once", Run{}, move{From: ApplyInterrupted, To: Failed}, nil},
		{"cancelled by the requester", Run{}, move{From: PendingApproval, To: Cancelled}, nil},
		{"applying", Run{}, move{From: Approved, To: Running}, nil},
		{"applied", Run{}, move{From: Running, To: Verifying}, []notify.Event{notify.RunApplied}},
		{"succeeded", Run{}, move{From: Verifying, To: Succeeded}, nil},
	}
	for _, c := range cases {
		c.r.State = c.m.To
		require.Equal(t, c.want, noticesOf(c.r, c.m), c.name)
	}
}

func TestNoticesSkipTheActor(t *testing.T) {
	t.Parallel()
	actor := &authz.Subject{UserID: "u-admin"}
	require.Equal(t, []string{"u-req", "u-owner"}, without([]string{"u-req", "", "u-admin", "u-owner", "u-req"}, actor))
	require.Equal(t, []string{"u-req", "u-admin"}, without([]string{"u-req", "u-admin"}, &authz.Subject{System: true, UserID: "u-admin"}))
}
