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
// apply about to run), and its two parts: the queue's (transactional enqueue,
// LISTEN/NOTIFY wake-up, fetch: commit to the worker picking the job up, pickup_*) and
// the re-checks' (DESIGN §3: the approval's validity, the plan digest, entitlements,
// the policy re-evaluation, the predecessor state; checks_*). Run it with
// -benchtime=1x; it reports milliseconds, and how many applies did not start within a
// deadline scaled to the machine (counted, not failed: a slow machine gives slower
// figures, not a failure).
func BenchmarkApprovalToApplyStart(b *testing.B) {
	const runs = 200
	var mu sync.Mutex
	type start struct{ pickedUp, at time.Time }
	started := map[string]chan start{}
	h := newHarness(b, harnessOpts{onApplyStart: func(id string, pickedUp time.Time) {
		now := time.Now()
		mu.Lock()
		ch := started[id]
		mu.Unlock()
		if ch != nil {
			ch <- start{pickedUp, now}
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
	var pickups, checks []time.Duration
	deadline := bench.Deadline(2 * time.Second)
	timeouts := 0
	b.ResetTimer()
	for _, r := range pending {
		ch := make(chan start, 1)
		mu.Lock()
		started[r.ID] = ch
		mu.Unlock()
		_, err := h.sys.Runs.Decisions.Approve(h.as("admin"), r.ID, run.Approval{Evidence: run.EvidenceOf(r)})
		committed := time.Now()
		require.NoError(b, err)
		select {
		case s := <-ch:
			latencies = append(latencies, s.at.Sub(committed))
			pickups, checks = append(pickups, s.pickedUp.Sub(committed)), append(checks, s.at.Sub(s.pickedUp))
		case <-time.After(deadline):
			// A lower bound: the figure is the deadline, and the summary says so.
			latencies = append(latencies, deadline)
			timeouts++
		}
	}
	b.StopTimer()
	bench.ReportTimeouts(b, timeouts)
	ms := func(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }
	pct := func(ds []time.Duration, p float64) float64 {
		if len(ds) == 0 {
			return 0
		}
		sort.Slice(ds, func(i, j int) bool { return ds[i] < ds[j] })
		return ms(ds[int(p*float64(len(ds)-1))])
	}
	b.ReportMetric(pct(latencies, 0.50), "p50_ms")
	b.ReportMetric(pct(latencies, 0.99), "p99_ms")
	b.ReportMetric(ms(latencies[len(latencies)-1]), "max_ms")
	b.ReportMetric(pct(pickups, 0.50), "pickup_p50_ms")
	b.ReportMetric(pct(pickups, 0.99), "pickup_p99_ms")
	b.ReportMetric(pct(checks, 0.50), "checks_p50_ms")
}
