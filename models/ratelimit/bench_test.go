package ratelimit_test

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"gantry/bench"
)

// decisionRate is the rate at which BenchmarkApprovalToApplyStart (runner/bench_test.go)
// decides: 200 approvals, each followed by its apply's start, took 7.1 s on the
// development machine (28 a second), rounded up. floodRate is a flood's, for the headroom.
const (
	decisionRate = 30
	floodRate    = 500
)

// BenchmarkRateLimitCheck measures one rate limit check as a decision makes it (its
// session's bucket and its address's, in one statement, models/ratelimit) on two
// replicas with a pool each, alternating, on the database's clock: 200 checks at the
// decision rate of BenchmarkApprovalToApplyStart, 20 sessions behind 5 addresses (some
// refused, as over their limit), then a flood of 1,000 checks at 500 a second, each a
// session and an address never seen (two new buckets each). Before them, as many
// SELECT 1 at the decision rate: the round trip alone, to read the check's figures
// against on a busy machine. Open loop (bench.OpenLoop): latency from each call's
// scheduled time. It reports microseconds, and the check's median over the round
// trip's (ratio), which a busy machine does not skew.
func BenchmarkRateLimitCheck(b *testing.B) {
	stores, gdb := replicas(b, 2)
	ctx := context.Background()
	var n atomic.Int64
	check := func(session, ip string) error {
		i := n.Add(1)
		_, err := stores[i%2].Allow(ctx, key("decide session "+session, 30, 10), key("decide-ip "+ip, 60, 20))
		return err
	}
	// A portal's connections stay open between requests: open them before the clock starts.
	for i := range 20 {
		require.NoError(b, check("warm", fmt.Sprint("192.0.2.", i)))
	}
	b.ResetTimer()
	// The yardstick, at the same rate on the same machine: a statement that does nothing,
	// its round trip alone.
	roundTrip := bench.OpenLoop(decisionRate, 200*time.Second/decisionRate, func() error {
		return gdb.WithContext(ctx).Exec("SELECT 1").Error
	})
	var i atomic.Int64
	decisions := bench.OpenLoop(decisionRate, 200*time.Second/decisionRate, func() error {
		k := i.Add(1)
		return check(fmt.Sprint("s", k%20), fmt.Sprint("198.51.100.", k%5))
	})
	flood := bench.OpenLoop(floodRate, 1000*time.Second/floodRate, func() error {
		k := i.Add(1)
		return check(fmt.Sprint("f", k), fmt.Sprint("203.0.", k/256%256, ".", k%256))
	})
	b.StopTimer()
	us := func(d time.Duration) float64 { return float64(d.Nanoseconds()) / 1000 }
	b.ReportMetric(us(decisions.P50), "p50_us")
	b.ReportMetric(us(decisions.P99), "p99_us")
	b.ReportMetric(float64(decisions.Errors+flood.Errors+roundTrip.Errors), "errors")
	b.ReportMetric(us(roundTrip.P50), "roundtrip_p50_us")
	b.ReportMetric(float64(decisions.P50)/float64(max(roundTrip.P50, 1)), "ratio")
	b.ReportMetric(us(flood.P50), "flood_p50_us")
	b.ReportMetric(us(flood.P99), "flood_p99_us")
	b.ReportMetric(flood.Achieved, "flood_req_per_s")
}
