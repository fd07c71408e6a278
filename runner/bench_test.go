package runner_test

import (
	"fmt"
	"sort"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"gantry/bench"
	"gantry/models/run"
)

// BenchmarkApprovalToApplyStart measures, over 200 runs, the time from the commit of
// APPROVED (Approve returning) to the apply worker starting (its checks passed, the
// apply about to run): transactional enqueue, LISTEN/NOTIFY wake-up, fetch, re-checks.
// Run it with -benchtime=1x; it reports p50 and p99 in milliseconds, and how many applies
// did not start within a deadline scaled to the machine (counted, not failed: a slow
// machine gives slower figures, not a failure).
func BenchmarkApprovalToApplyStart(b *testing.B) {
	const runs = 200
	var mu sync.Mutex
	started := map[string]chan time.Time{}
	h := newHarness(b, harnessOpts{onApplyStart: func(id string) {
		now := time.Now()
		mu.Lock()
		ch := started[id]
		mu.Unlock()
		if ch != nil {
			ch <- now
		}
	}})
	h.start()
	pending := make([]run.Run, 0, runs)
	for i := range runs {
		r := h.requestBucket("staging", fmt.Sprintf("bench-%03d", i), fmt.Sprintf("bench-%03d", i), run.KindApply)
		pending = append(pending, r)
	}
	for i, r := range pending {
		pending[i] = h.waitFor(r.ID, run.PendingApproval)
	}
	latencies := make([]time.Duration, 0, runs)
	deadline := bench.Deadline(2 * time.Second)
	timeouts := 0
	b.ResetTimer()
	for _, r := range pending {
		ch := make(chan time.Time, 1)
		mu.Lock()
		started[r.ID] = ch
		mu.Unlock()
		_, err := h.sys.Runs.Approve(h.as("admin"), r.ID, run.Approval{Evidence: run.EvidenceOf(r)})
		committed := time.Now()
		require.NoError(b, err)
		select {
		case at := <-ch:
			latencies = append(latencies, at.Sub(committed))
		case <-time.After(deadline):
			// A lower bound: the figure is the deadline, and the summary says so.
			latencies = append(latencies, deadline)
			timeouts++
		}
	}
	b.StopTimer()
	bench.ReportTimeouts(b, timeouts)
	sort.Slice(latencies, func(i, j int) bool { return latencies[i] < latencies[j] })
	pct := func(p float64) time.Duration { return latencies[int(p*float64(len(latencies)-1))] }
	b.ReportMetric(float64(pct(0.50).Microseconds())/1000, "p50_ms")
	b.ReportMetric(float64(pct(0.99).Microseconds())/1000, "p99_ms")
	b.ReportMetric(float64(latencies[len(latencies)-1].Microseconds())/1000, "max_ms")
}
