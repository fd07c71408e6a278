package pages

import (
	"fmt"
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

// TestWaitCountAgreesWithItsPercent: the count a waiting run's page shows and its
// percentage come from the same numbers: every build counted (the page once read
// "73 %" beside "1398 of 1399 packages", one build's count beside the share of all).
func TestWaitCountAgreesWithItsPercent(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		done, total int
		count       string
		percent     int
	}{
		{0, 0, "", 0},                             // not counted yet
		{0, 1920, "0 of 1920 packages", 0},        // counted, nothing compiled
		{1398, 1920, "1398 of 1920 packages", 72}, // OpenTofu nearly done, gantry-fwd to come
		{1398, 1399, "1398 of 1399 packages", 99}, // one build, nearly done
		{1399, 1399, "1399 of 1399 packages", 99}, // linking comes after the last package
		{163, 1630, "163 of 1630 packages", 10},   // the preparing browser test's numbers
		{1700, 1630, "1630 of 1630 packages", 99}, // never more than all
	} {
		w := ExecutorWait{Preparation: runport.Preparation{What: "the OpenTofu build", Step: "compiling OpenTofu", Done: tc.done, Total: tc.total}}
		require.Equal(t, tc.count, w.Count(), "%d of %d", tc.done, tc.total)
		require.Equal(t, tc.percent, w.Percent(), "%d of %d", tc.done, tc.total)
		if tc.count == "" {
			continue
		}
		var done, total int
		_, err := fmt.Sscanf(w.Count(), "%d of %d packages", &done, &total)
		require.NoError(t, err)
		require.Equal(t, min(99, done*100/total), w.Percent(), "the percentage is the share of the count shown: %s", w.Count())
	}
}
