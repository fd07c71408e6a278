package handlers

import (
	"testing"

	"github.com/stretchr/testify/require"

	"gantry/models/run"
	"gantry/views"
)

// TestEveryRunStateHasATone: every state of the run table reads as something on a page
// (a state added to run.States without a tone here would show a plain badge), and the
// answers a page asks of a state are the rules' own: waiting for approval is
// PENDING_APPROVAL, waiting for an override a soft policy block only.
func TestEveryRunStateHasATone(t *testing.T) {
	for _, s := range run.States {
		tone, ok := runTones[s]
		require.True(t, ok, "run state %s has no tone", s)
		require.NotEqual(t, views.TonePlain, tone, s)
		v := stateOf(s)
		require.Equal(t, string(s), v.Name)
		require.Equal(t, s == run.PendingApproval, v.AwaitsApproval, s)
	}
	require.Len(t, runTones, len(run.States), "a tone for a state the table does not know")

	soft := run.Run{State: run.PolicyBlocked, PolicyOutcome: "soft_failed"}
	hard := run.Run{State: run.PolicyBlocked, PolicyOutcome: "hard_failed"}
	require.True(t, runState(soft).AwaitsOverride)
	require.False(t, runState(hard).AwaitsOverride, "a hard block is final: nothing to override")
	require.False(t, runState(run.Run{State: run.PendingApproval}).AwaitsOverride)
}
