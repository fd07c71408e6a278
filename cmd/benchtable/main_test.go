package main

import (
	"strings"
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
`

func TestParseAndTable(t *testing.T) {
	var echo strings.Builder
	res := parse(strings.NewReader(stream), &echo)
	require.Equal(t, 0.9818, res["gantry/web"]["BenchmarkRequestToPendingApproval50"]["ratio"])
	require.Equal(t, float64(310000), res["gantry/web"]["BenchmarkReviewPage10k"]["page-bytes"])
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
		if len(cells) == 6 {
			rows[cells[1]+" "+cells[2]] = line
		}
	}
	require.Contains(t, rows["BenchmarkRequestToPendingApproval50 ratio"], "| 0.9818 | ≤ 1.1 | yes |")
	require.Contains(t, rows["BenchmarkRequestToPendingApproval50 portal_s"], "| 1.452 | reported | yes |")
	require.Contains(t, rows["BenchmarkReviewPage10k page-bytes"], "| 310000 | ≤ 204800 | no |")
	require.Contains(t, rows["BenchmarkApprovalToApplyStart p99_ms"], "| ≥ 8000 (timed out) | ≤ 100 | no |", "a timed-out figure is a lower bound")
	require.Contains(t, rows["BenchmarkApprovalToApplyStart timeouts"], "| 3 | ≤ 0 | no |")
	require.Contains(t, rows["BenchmarkEvaluate10k ratio"], "| no figure (did not run or did not finish) | ≤ 5 | no |")
	require.Contains(t, rows["BenchmarkLoad10k ratio"], "no figure")
	require.Contains(t, table, "2 of 7 goals met.")
	require.Contains(t, table, "all benchmarks")
}
