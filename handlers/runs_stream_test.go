package handlers

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"gantry/models/run"
	"gantry/views"
)

// TestUnchangedRunIsNotSentAgain: a run page is sent the run again only when its
// version moved, or the progress of its executor's preparation did; a page that shows
// nothing yet is always sent it.
func TestUnchangedRunIsNotSentAgain(t *testing.T) {
	at := time.Date(2026, 12, 2, 4, 0, 0, 123000, time.UTC)
	shown := run.Run{ID: "run-1", UpdatedAt: at}
	later := shown
	later.UpdatedAt = at.Add(time.Microsecond)
	wait := &views.ExecutorWait{Percent: 40}
	moved := &views.ExecutorWait{Percent: 41}

	require.True(t, unchanged(shown, shown, nil, nil))
	require.True(t, unchanged(shown, shown, wait, &views.ExecutorWait{Percent: 40}))
	require.False(t, unchanged(shown, later, nil, nil), "a new version")
	require.False(t, unchanged(shown, shown, wait, moved), "the preparation moved on")
	require.False(t, unchanged(shown, shown, wait, nil), "the preparation ended")
	require.False(t, unchanged(run.Run{}, shown, nil, nil), "nothing shown yet")
}
