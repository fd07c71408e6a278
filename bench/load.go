package bench

import (
	"os"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"
)

// Load is what an open-loop load at a fixed rate measured.
type Load struct {
	Sent   int
	Errors int
	// Achieved is requests completed per second of the run (the last completion
	// included), against the rate asked for.
	Achieved float64
	P50, P99 time.Duration
}

// OpenLoop sends do at a fixed rate for d, each call in its own goroutine at its
// scheduled time whether or not the ones before it finished (open loop: a slow server
// does not slow the load down, it queues). Latency is measured from the scheduled time,
// so time spent waiting behind a busy client counts too (no coordinated omission).
func OpenLoop(rate float64, d time.Duration, do func() error) Load {
	interval := time.Duration(float64(time.Second) / rate)
	n := int(d / interval)
	latencies := make([]time.Duration, n)
	failed := make([]bool, n)
	var wg sync.WaitGroup
	start := time.Now()
	for i := range n {
		at := start.Add(time.Duration(i) * interval)
		time.Sleep(time.Until(at))
		wg.Go(func() {
			err := do()
			latencies[i], failed[i] = time.Since(at), err != nil
		})
	}
	wg.Wait()
	elapsed := time.Since(start)
	out := Load{Sent: n, Achieved: float64(n) / elapsed.Seconds()}
	for _, f := range failed {
		if f {
			out.Errors++
		}
	}
	sort.Slice(latencies, func(i, j int) bool { return latencies[i] < latencies[j] })
	if n > 0 {
		out.P50, out.P99 = latencies[n/2], latencies[min(n-1, n*99/100)]
	}
	return out
}

// LoadAverage is the machine's 1-minute load average (0 where /proc/loadavg cannot be
// read): benchmark rows record it beside their figures, and a row taken above 1 is not idle.
func LoadAverage() float64 {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return 0
	}
	f := strings.Fields(string(b))
	if len(f) == 0 {
		return 0
	}
	v, _ := strconv.ParseFloat(f[0], 64)
	return v
}
