package breakglass

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"gantry/models/authz"
	"gantry/models/notify"
)

// TestDecisionWindowIsMinutes: a break-glass request is decided in minutes: the default
// is DefaultDecisionWindow, and the operator's setting is whole minutes within the bounds.
func TestDecisionWindowIsMinutes(t *testing.T) {
	t.Parallel()
	require.Equal(t, 30*time.Minute, DefaultDecisionWindow)
	require.NoError(t, CheckDecisionWindow(DefaultDecisionWindow))
	for _, ok := range []time.Duration{MinDecisionWindow, 45 * time.Minute, 2 * time.Hour, MaxDecisionWindow} {
		require.NoError(t, CheckDecisionWindow(ok), ok)
	}
	for _, bad := range []time.Duration{0, time.Minute, MinDecisionWindow - time.Minute, 90*time.Second + 5*time.Minute, MaxDecisionWindow + time.Minute, 168 * time.Hour} {
		require.Error(t, CheckDecisionWindow(bad), bad)
	}
}

// TestWhoIsAskedToDecide: the inbox and the notice of a request ask MayDecide: an
// admin or owner who is not the requester, cloud.live or not (they may reject), within
// the deadline; nobody else, and nobody once the deadline passed.
func TestWhoIsAskedToDecide(t *testing.T) {
	t.Parallel()
	w := requested()
	for _, c := range []struct {
		who    string
		role   authz.Role
		live   bool
		decide bool
	}{
		{"usr-admin", authz.RoleAdmin, true, true},
		{"usr-owner", authz.RoleOwner, false, true},
		{"usr-op", authz.RoleAdmin, true, false}, // the requester
		{"usr-op2", authz.RoleOperator, true, false},
		{"usr-aud", authz.RoleAuditor, false, false},
		{"usr-view", authz.RoleViewer, false, false},
	} {
		a := actor(c.who, c.role, c.live)
		require.Equal(t, c.decide, PermissionsOf(w, a, env, t0).MayDecide(), c.who)
		require.Equal(t, c.role.AtLeast(authz.RoleAdmin), MayDecideSome(a.Subject), c.who)
		require.False(t, PermissionsOf(w, a, env, w.DecisionDeadline).MayDecide(), "%s after the deadline", c.who)
	}
	require.False(t, MayDecideSome(authz.System("org-1")))
	decided := w
	decided.State = Approved
	require.False(t, PermissionsOf(decided, actor("usr-admin", authz.RoleAdmin, true), env, t0).MayDecide())
}

// TestNoticesOfWindowMoves pins which move of a window tells people what.
func TestNoticesOfWindowMoves(t *testing.T) {
	t.Parallel()
	for to, want := range map[State]notify.Event{
		Approved: notify.BreakglassOpened, Open: notify.BreakglassOpened,
		Rejected: notify.BreakglassEnded, Cancelled: notify.BreakglassEnded, Expired: notify.BreakglassEnded,
		AwaitingCodification: notify.BreakglassEnded, Codified: "", Closed: "",
	} {
		require.Equal(t, want, eventOf(to), to)
	}
	for _, e := range []notify.Event{notify.BreakglassRequested, notify.BreakglassOpened, notify.BreakglassEnded, notify.RunApplied} {
		require.True(t, e.Valid(), e)
	}
}
