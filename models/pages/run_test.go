package pages

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"gantry/models/run"
	"gantry/models/runport"
)

// TestUnchangedRunIsNotSentAgain: a run page is sent the run again only when its
// version moved, or the progress of its executor's preparation did; a page that shows
// nothing yet is always sent it.
func TestUnchangedRunIsNotSentAgain(t *testing.T) {
	t.Parallel()
	at := time.Date(2026, 12, 2, 4, 0, 0, 123000, time.UTC)
	percent := func(n int) *ExecutorWait {
		return &ExecutorWait{Preparation: runport.Preparation{What: "the OpenTofu build", Done: n, Total: 100}, Phase: "plan"}
	}
	shown := RunVersion{UpdatedAt: at}
	waiting := RunVersion{UpdatedAt: at, Wait: percent(40)}

	require.True(t, shown.same(RunVersion{UpdatedAt: at}))
	require.True(t, waiting.same(RunVersion{UpdatedAt: at, Wait: percent(40)}))
	require.False(t, shown.same(RunVersion{UpdatedAt: at.Add(time.Microsecond)}), "a new version")
	require.False(t, waiting.same(RunVersion{UpdatedAt: at, Wait: percent(41)}), "the preparation moved on")
	require.False(t, waiting.same(shown), "the preparation ended")
	require.False(t, RunVersion{}.same(shown), "nothing shown yet")
	// Done moving within the same percent and step is no change a page could show.
	same := percent(40)
	same.Done, same.Total = 401, 1000
	require.True(t, waiting.same(RunVersion{UpdatedAt: at, Wait: same}))

	// A run waiting to apply is sent again when its place or its holder moved, though
	// the run itself did not change.
	behind := func(p int, phase run.HolderPhase) *run.Queue {
		return &run.Queue{Position: p, Waiting: 2, Holder: run.QueueHolder{RunID: "run-a", Number: 1, Phase: phase}}
	}
	queued := RunVersion{UpdatedAt: at, Queue: behind(2, run.HolderPlanning)}
	require.True(t, queued.same(RunVersion{UpdatedAt: at, Queue: behind(2, run.HolderPlanning)}))
	require.False(t, queued.same(RunVersion{UpdatedAt: at, Queue: behind(1, run.HolderPlanning)}), "its place moved")
	require.False(t, queued.same(RunVersion{UpdatedAt: at, Queue: behind(2, run.HolderApplying)}), "the holder moved on")
	require.False(t, queued.same(shown), "it no longer waits")
	require.False(t, shown.same(queued), "it waits now")
}
