// Package bench is what Gantry's benchmarks share: deadlines scaled to how busy the
// machine is, waits on events that report a time-out as a figure instead of failing, and
// the table of every benchmark's goal that `go tool task bench` summarises (goals.go).
// It is a leaf: it imports nothing of Gantry, and only tests and tools/benchtable use it.
package bench

import (
	"crypto/sha256"
	"testing"
	"time"
)

// referenceCalibration is how long hashing 64 MiB takes on an idle 2-core development
// machine (the machine the goals were set on).
const referenceCalibration = 48 * time.Millisecond

// Scale is how many times slower than the reference this machine is right now: Slowdown,
// re-measured every few seconds (a benchmark that runs for minutes sees the machine as it is
// when it asks), or GANTRY_BENCH_SCALE. A machine whose cores another process keeps busy gets
// a larger scale, so a deadline stretches instead of failing the benchmark.
func Scale() float64 { return Slowdown() }

// calibrateMiB times a fixed CPU-bound job: hashing n MiB.
func calibrateMiB(n int) time.Duration {
	buf := make([]byte, 1<<20)
	start := time.Now()
	h := sha256.New()
	for range n {
		h.Write(buf)
	}
	_ = h.Sum(nil)
	return time.Since(start)
}

// Deadline is base stretched by Scale, and by 4 more: a deadline is what a benchmark
// gives up after, not what it expects, so it is generous.
func Deadline(base time.Duration) time.Duration {
	return time.Duration(float64(base) * Scale() * 4)
}

// Waited is the outcome of a wait: how long it took, or that the deadline passed first.
type Waited struct {
	Took     time.Duration
	TimedOut bool
}

// Until waits until done reports true, checking it at once and then each time wake
// delivers (an event: a notification that something changed) or every poll as a safety
// net, whichever comes first, for at most deadline. It never fails the benchmark: a
// time-out is an outcome, which Report turns into a figure.
func Until(wake <-chan struct{}, poll, deadline time.Duration, done func() bool) Waited {
	start := time.Now()
	timer := time.NewTimer(deadline)
	defer timer.Stop()
	ticker := time.NewTicker(poll)
	defer ticker.Stop()
	for {
		if done() {
			return Waited{Took: time.Since(start)}
		}
		select {
		case <-wake:
		case <-ticker.C:
		case <-timer.C:
			if done() {
				return Waited{Took: time.Since(start)}
			}
			return Waited{Took: time.Since(start), TimedOut: true}
		}
	}
}

// ReportTimeouts reports how many of a benchmark's waits timed out, as the metric
// "timeouts" (the summary marks a benchmark with any as not met, whatever its figure).
func ReportTimeouts(b *testing.B, n int) {
	b.ReportMetric(float64(n), "timeouts")
}

// Ratio measures subject against baseline in one run: every iteration runs the baseline,
// then the subject, timed apart, so both see the same machine at the same moment. It
// reports "ratio" (the subject's time over the baseline's), the subject's time as ns/op
// (replacing the default, which would include the baseline) and the baseline's as
// baseline-ns/op.
func Ratio(b *testing.B, baseline, subject func()) {
	var base, subj time.Duration
	for b.Loop() {
		t0 := time.Now()
		baseline()
		t1 := time.Now()
		subject()
		subj += time.Since(t1)
		base += t1.Sub(t0)
	}
	n := float64(b.N)
	b.ReportMetric(float64(subj.Nanoseconds())/n, "ns/op")
	b.ReportMetric(float64(base.Nanoseconds())/n, "baseline-ns/op")
	b.ReportMetric(float64(subj)/float64(base), "ratio")
}
