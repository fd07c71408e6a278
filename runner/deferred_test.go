package runner_test

import (
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/riverqueue/river"
	"github.com/stretchr/testify/require"

	"gantry/bench"
	"gantry/models/run"
	"gantry/runner"
	"gantry/runner/mock"
)

// liveNamed stands in for a live runner prepared in the background: the mock's
// behaviour under another name, not simulated.
type liveNamed struct {
	runner.Runner
	name string
}

func (l liveNamed) Name() string    { return l.name }
func (l liveNamed) Simulated() bool { return false }

// TestJobsWaitForTheirExecutorsPreparation: a run on an executor still being prepared
// stays QUEUED (its plan job snoozed, no attempt spent, nothing failed) and is planned
// and applied once the executor is ready; a failed preparation fails the run with why.
func TestJobsWaitForTheirExecutorsPreparation(t *testing.T) {
	t.Parallel()
	var mu sync.Mutex
	progress := runner.Preparation{What: "the OpenTofu build", Step: "compiling OpenTofu", Done: 3, Total: 10}
	d := runner.NewDeferred("tofu/test", false, func() runner.Preparation {
		mu.Lock()
		defer mu.Unlock()
		return progress
	})
	require.Equal(t, "waiting for the OpenTofu build (30 %)", progress.Waiting())
	h := newHarness(t, harnessOpts{runner: d})
	// River reports every snooze once it is stored: the event the wait below wakes on.
	events, unsubscribe := h.sys.Queue.Client.Subscribe(river.EventKindJobSnoozed)
	defer unsubscribe()
	snoozed := make(chan struct{}, 1)
	go func() {
		for range events { // ends when unsubscribe closes events
			select {
			case snoozed <- struct{}{}:
			default:
			}
		}
	}()
	h.start()

	r := h.requestBucket("development", "prep", "prep-bucket", run.KindApply)
	require.Equal(t, "tofu/test", r.Runner)
	snoozes := func() int {
		var n int
		require.NoError(t, h.db.Raw(`SELECT coalesce(max((metadata->>'snoozes')::int), 0) FROM river_job WHERE kind = 'run.plan' AND args->>'run_id' = ?`, r.ID).Scan(&n).Error)
		return n
	}
	bench.Eventually(t, "the plan job to be snoozed twice", 30*time.Second, func() (bool, any) {
		n := snoozes()
		return n >= 2, fmt.Sprintf("%d snoozes", n)
	}, bench.Wake(snoozed))
	var job struct {
		Attempt int
		Errors  *string
	}
	require.NoError(t, h.db.Raw(`SELECT attempt, errors::text AS errors FROM river_job WHERE kind = 'run.plan' AND args->>'run_id' = ?`, r.ID).Scan(&job).Error)
	require.Nil(t, job.Errors, "waiting is not an error")
	require.NoError(t, h.db.Where("id = ?", r.ID).Take(&r).Error)
	require.Equal(t, run.Queued, r.State, "the run waits where it is")
	st := h.sys.Runners.Statuses(t.Context())
	require.Len(t, st, 1)
	require.False(t, st[0].Healthy)
	require.NotNil(t, st[0].Preparing)
	require.Equal(t, 30, st[0].Preparing.Percent())

	mu.Lock()
	progress.Done = 9
	mu.Unlock()
	require.NoError(t, d.Resolve(liveNamed{Runner: mock.New(), name: "tofu/test"}))
	h.waitFor(r.ID, run.Succeeded)
	require.Error(t, d.Resolve(liveNamed{Runner: mock.New(), name: "tofu/test"}), "resolved once")

	// A preparation that fails: the waiting run fails, saying why.
	f := runner.NewDeferred("tofu/broken", true, func() runner.Preparation { return runner.Preparation{What: "the OpenTofu build"} })
	h2 := newHarness(t, harnessOpts{runner: f})
	h2.start()
	r2 := h2.requestBucket("development", "prep", "prep-bucket", run.KindApply)
	f.Fail(errors.New("go build: exit status 1"))
	r2 = h2.waitFor(r2.ID, run.Failed)
	require.Contains(t, r2.StateReason, "tofu/broken could not be prepared: go build: exit status 1")
	require.ErrorIs(t, f.Health(t.Context()), runner.ErrNotPrepared)
}
