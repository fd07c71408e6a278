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
		{"planned, waits", Run{}, move{from: Planning, to: PendingApproval}, []notify.Event{notify.DecisionWaiting}},
		{"approval voided, waits again", Run{}, move{from: Approved, to: PendingApproval}, []notify.Event{notify.DecisionWaiting}},
		{"override released", Run{}, move{from: PolicyBlocked, to: PendingApproval}, []notify.Event{notify.RunDecided, notify.DecisionWaiting}},
		{"soft block waits for an override", Run{PolicyOutcome: "soft_failed"}, move{from: Planning, to: PolicyBlocked}, []notify.Event{notify.DecisionWaiting}},
		{"hard block", hard, move{from: Planning, to: PolicyBlocked}, []notify.Event{notify.RunFailed}},
		{"approved by a person", person, move{from: PendingApproval, to: Approved}, []notify.Event{notify.RunDecided}},
		{"self-service approval tells nobody", self, move{from: Planning, to: Approved}, nil},
		{"rejected", Run{}, move{from: PendingApproval, to: Rejected}, []notify.Event{notify.RunDecided}},
		{"expired", Run{}, move{from: PendingApproval, to: Expired}, []notify.Event{notify.RunExpired}},
		{"stale", Run{}, move{from: Approved, to: Stale}, []notify.Event{notify.RunStale}},
		{"plan failed", Run{}, move{from: Planning, to: Failed}, []notify.Event{notify.RunFailed}},
		{"apply interrupted", Run{}, move{from: Running, to: ApplyInterrupted}, []notify.Event{notify.RunFailed}},
		{"interrupted, then failed: told once", Run{}, move{from: ApplyInterrupted, to: Failed}, nil},
		{"cancelled by the requester", Run{}, move{from: PendingApproval, to: Cancelled}, nil},
		{"applying", Run{}, move{from: Approved, to: Running}, nil},
		{"succeeded", Run{}, move{from: Verifying, to: Succeeded}, nil},
	}
	for _, c := range cases {
		c.r.State = c.m.to
		require.Equal(t, c.want, noticesOf(c.r, c.m), c.name)
	}
}

func TestNoticesSkipTheActor(t *testing.T) {
	t.Parallel()
	actor := &authz.Subject{UserID: "u-admin"}
	require.Equal(t, []string{"u-req", "u-owner"}, without([]string{"u-req", "", "u-admin", "u-owner", "u-req"}, actor))
	require.Equal(t, []string{"u-req", "u-admin"}, without([]string{"u-req", "u-admin"}, &authz.Subject{System: true, UserID: "u-admin"}))
}
