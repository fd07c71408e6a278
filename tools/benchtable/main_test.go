package main

import (
	"crypto/sha256"
	"os"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"gantry/bench"
)

// A go test -json stream as `go test -bench -json` writes it (shortened).
const stream = `{"Action":"start","Package":"gantry/web"}
{"Action":"output","Package":"gantry/web","Output":"goos: linux\n"}
{"Action":"output","Package":"gantry/web","Output":"BenchmarkRequestToPendingApproval50-2   \t       1\t19170143834 ns/op\t         0.1800 init_s\t         1.452 portal_s\t         0.9818 ratio\t         0 timeouts\n"}
{"Action":"output","Package":"gantry/web","Output":"BenchmarkReviewPage10k-2   \t"}
{"Action":"output","Package":"gantry/runner","Output":"goarch: amd64\n"}
{"Action":"output","Package":"gantry/web","Output":"      10\t 170000000 ns/op\t 310000 page-bytes\t 1.65 ratio\t 5000 B/op\t 12 allocs/op\n"}
{"Action":"output","Package":"gantry/web","Output":"ok  \tgantry/web\t25.1s\n"}
{"Action":"output","Package":"gantry/runner","Output":"BenchmarkApprovalToApplyStart-2 \t 1\t 5 ns/op\t 8000 p50_ms\t 8000 p99_ms\t 3 timeouts\n"}
not json at all
{"Action":"output","Package":"gantry/policies","Output":"--- FAIL: BenchmarkEvaluate10k\n"}
{"Action":"start","Package":"gantry/models/review"}
`

// fakeProbe advances ten seconds, two CPU seconds and 0.5 of load average per reading.
type fakeProbe struct {
	n int
}

func (p *fakeProbe) Now() time.Time {
	p.n++
	return time.Unix(0, 0).Add(time.Duration(p.n) * 10 * time.Second)
}
func (p *fakeProbe) Load() float64      { return 0.5 * float64(p.n) }
func (p *fakeProbe) CPU() time.Duration { return time.Duration(p.n) * 2 * time.Second }

func TestParseAndTable(t *testing.T) {
	var echo strings.Builder
	res := parse(strings.NewReader(stream), &echo, &fakeProbe{})
	require.Equal(t, 0.9818, res.Figures["gantry/web"]["BenchmarkRequestToPendingApproval50"]["ratio"])
	require.Equal(t, float64(310000), res.Figures["gantry/web"]["BenchmarkReviewPage10k"]["page-bytes"])
	// gantry/web starts at reading 1; its first result is reading 2, its second reading 4
	// (gantry/runner's first event took reading 3).
	require.Equal(t, Run{Load: 0.5, Wall: 10 * time.Second, CPU: 2 * time.Second}, res.Runs["gantry/web"]["BenchmarkRequestToPendingApproval50"])
	require.Equal(t, Run{Load: 1, Wall: 20 * time.Second, CPU: 4 * time.Second}, res.Runs["gantry/web"]["BenchmarkReviewPage10k"],
		"a benchmark starts where the one before it ended, not where its name is printed")
	require.Contains(t, echo.String(), "--- FAIL: BenchmarkEvaluate10k")
	require.Contains(t, echo.String(), "gantry/web BenchmarkRequestToPendingApproval50-2")

	goals := []bench.Goal{
		{Package: "gantry/web", Benchmark: "BenchmarkRequestToPendingApproval50", Metric: "ratio", Max: 1.1},
		{Package: "gantry/web", Benchmark: "BenchmarkRequestToPendingApproval50", Metric: "portal_s", Report: true},
		{Package: "gantry/web", Benchmark: "BenchmarkReviewPage10k", Metric: "page-bytes", Max: 200 * 1024},
		{Package: "gantry/runner", Benchmark: "BenchmarkApprovalToApplyStart", Metric: "p99_ms", Max: 100},
		{Package: "gantry/runner", Benchmark: "BenchmarkApprovalToApplyStart", Metric: "timeouts", Max: 0},
		{Package: "gantry/policies", Benchmark: "BenchmarkEvaluate10k", Metric: "ratio", Max: 5},
		{Package: "gantry/models/review", Benchmark: "BenchmarkLoad10k", Metric: "ratio", Max: 2, AtLeast: true},
	}
	table := Table(goals, res, 90*time.Second, false)
	rows := map[string]string{}
	for _, line := range strings.Split(table, "\n") {
		cells := strings.Split(line, " | ")
		if len(cells) == 9 {
			rows[cells[1]+" "+cells[2]] = line
		}
	}
	require.Contains(t, rows["BenchmarkRequestToPendingApproval50 ratio"], "| 0.9818 | ≤ 1.1 | yes | 0.50 | 10.0 | 2.0 |")
	require.Contains(t, rows["BenchmarkReviewPage10k page-bytes"], "| 1.00 | 20.0 | 4.0 |", "load 1 is still idle")
	require.Contains(t, rows["BenchmarkApprovalToApplyStart p99_ms"], "| 1.50 (not idle) |")
	require.Contains(t, rows["BenchmarkRequestToPendingApproval50 portal_s"], "| 1.452 | reported | yes |")
	require.Contains(t, rows["BenchmarkReviewPage10k page-bytes"], "| 310000 | ≤ 204800 | no |")
	require.Contains(t, rows["BenchmarkApprovalToApplyStart p99_ms"], "| ≥ 8000 (timed out) | ≤ 100 | no |", "a timed-out figure is a lower bound")
	require.Contains(t, rows["BenchmarkApprovalToApplyStart timeouts"], "| 3 | ≤ 0 | no |")
	require.Contains(t, rows["BenchmarkEvaluate10k ratio"], "| no figure (did not run or did not finish) | ≤ 5 | no |")
	require.Contains(t, rows["BenchmarkLoad10k ratio"], "no figure")
	require.Contains(t, table, "2 of 7 goals met.")
	require.Contains(t, table, "all benchmarks")

	require.Equal(t, []string{
		"gantry/policies BenchmarkEvaluate10k: no ratio (did not run or did not finish), goal ≤ 5",
		"gantry/models/review BenchmarkLoad10k: no ratio (did not run or did not finish), goal ≥ 2",
	}, MissedRatios(goals, res), "a ratio goal without a figure is missed; the absolute ones are not counted")
	delete(res.Ran, "gantry/models/review")
	require.Len(t, MissedRatios(goals, res), 1, "a package that was not asked for misses nothing")
	res.Figures["gantry/web"]["BenchmarkRequestToPendingApproval50"]["ratio"] = 1.35
	require.Equal(t, "gantry/web BenchmarkRequestToPendingApproval50: ratio 1.35, goal ≤ 1.1", MissedRatios(goals, res)[0])
}

func TestProcStat(t *testing.T) {
	// A command name with spaces and a parenthesis, as a process may set it.
	s, ok := parseStat("4242 (go (test) x) S 17 4242 17 0 -1 4194560 100 0 0 0 250 50 30 20 20 0 12 0 100 0 0")
	require.True(t, ok)
	require.Equal(t, procStat{ppid: 17, ticks: 250 + 50 + 30 + 20}, s)
	_, ok = parseStat("garbage")
	require.False(t, ok)

	stats := map[int]procStat{
		10: {ppid: 1, ticks: 100},  // go test
		11: {ppid: 10, ticks: 300}, // the test binary
		12: {ppid: 11, ticks: 50},  // a tofu it started
		20: {ppid: 1, ticks: 999},  // somebody else
	}
	require.Equal(t, 4500*time.Millisecond, treeCPU(stats, 10))

	// Burn 100 ms of CPU by the kernel's own count (getrusage), then /proc must show it.
	own := procProbe{root: os.Getpid()}
	before, start := own.CPU(), selfCPU(t)
	sum := sha256.Sum256(nil)
	for selfCPU(t)-start < 100*time.Millisecond {
		for range 1000 {
			sum = sha256.Sum256(sum[:])
		}
	}
	require.GreaterOrEqual(t, own.CPU()-before, 80*time.Millisecond, "within two ticks of getrusage's count")
	require.Greater(t, own.Load(), 0.0, "a machine running this test has some load")
}

func selfCPU(t *testing.T) time.Duration {
	var ru syscall.Rusage
	require.NoError(t, syscall.Getrusage(syscall.RUSAGE_SELF, &ru))
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
