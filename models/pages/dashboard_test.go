package pages

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"gantry/models/audit"
)

// TestActivityFoldsRoutineStretches: the dashboard's feed keeps decisions and outcomes
// as items of their own and folds each stretch of routine events (credentials, phase
// starts) into one item that counts them from its newest; it stops at the limit, and a
// routine event continuing the last folded stretch does not count against it.
func TestActivityFoldsRoutineStretches(t *testing.T) {
	t.Parallel()
	t0 := time.Date(2026, 12, 5, 12, 0, 0, 0, time.UTC)
	seq := int64(100)
	ev := func(action string) audit.Event {
		seq--
		return audit.Event{Seq: seq, Action: action, OccurredAt: t0.Add(time.Duration(seq) * time.Second)}
	}
	events := []audit.Event{ // newest first, as the log reads them
		ev("run.succeeded"),
		ev("run.verifying"), ev("state.credentials_revoked"), ev("state.credentials_issued"), ev("run.running"),
		ev("run.approved"),
		ev("run.planned"), ev("state.credentials_issued"),
		ev("run.queued"),
		ev("run.planning"),
	}
	items, kept := foldActivity(events, 10)
	require.Len(t, items, 6)
	require.Equal(t, []string{"run.succeeded", "run.approved", "run.queued"}, actions(kept))
	require.False(t, items[0].Folded())
	require.Equal(t, ActivityItem{At: events[1].OccurredAt, FoldedFrom: events[1].Seq, Credentials: 2, Steps: 2}, items[1])
	require.Equal(t, ActivityItem{At: events[6].OccurredAt, FoldedFrom: events[6].Seq, Credentials: 1, Steps: 1}, items[3])
	require.Equal(t, ActivityItem{At: events[9].OccurredAt, FoldedFrom: events[9].Seq, Steps: 1}, items[5])

	// The limit: two items, the second a stretch that keeps counting past it.
	items, kept = foldActivity(events, 2)
	require.Len(t, items, 2)
	require.Equal(t, []string{"run.succeeded"}, actions(kept))
	require.Equal(t, 4, items[1].Credentials+items[1].Steps)
	items, _ = foldActivity(nil, 5)
	require.Empty(t, items)
}

func actions(events []audit.Event) []string {
	out := make([]string, len(events))
	for i, e := range events {
		out[i] = e.Action
	}
	return out
}
