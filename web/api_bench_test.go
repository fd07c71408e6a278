package web_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/require"

	"gantry/bench"
	"gantry/cmd/gantry/webtest"
	"gantry/models/authz"
	"gantry/models/run"
)

// BenchmarkAPIRuns10k: API clients listing runs with 10,000 runs in the organization
// (and 1,000 in another), with a read token, under an open-loop load at a fixed rate on
// loopback (GANTRY_BENCH_RATE, 50/s by default, for GANTRY_BENCH_SECONDS, 30): first
// the first page, then in turn a state filter, a search and the page after the first
// (by its cursor). Every answer is checked: 50 runs and the total.
func BenchmarkAPIRuns10k(b *testing.B) {
	app := webtest.Start(b)
	for slug, n := range map[string]int{"acme": 9_999, "globex": 999} {
		operator := app.LoggedIn(b, "operator@"+slug+".test")
		req := bucketRequest(app.OrgEnvironmentID(b, slug, "development"), "eu-west")
		req.Set("workspace", "bench-template")
		tpl := waitForState(b, app, app.RequestRun(b, operator, req), run.Succeeded)
		seedWorkspacesWithRuns(b, app, tpl, n)
	}
	token := app.Token(b, app.NewMember(b, "acme", "Bea Bench", authz.RoleViewer, false), "read")
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 64}}
	get := func(path string, total int64) (string, error) {
		req, err := http.NewRequest(http.MethodGet, app.URL+path, nil)
		if err != nil {
			return "", err
		}
		req.Header.Set("Authorization", "Bearer "+token)
		resp, err := client.Do(req)
		if err != nil {
			return "", err
		}
		var page struct {
			Runs  []json.RawMessage `json:"runs"`
			Total int64             `json:"total"`
			Next  string            `json:"next"`
		}
		err = json.NewDecoder(resp.Body).Decode(&page)
		resp.Body.Close()
		if err != nil || resp.StatusCode != http.StatusOK || len(page.Runs) != 50 || (total > 0 && page.Total != total) {
			return "", fmt.Errorf("%s answered %d with %d runs of %d (%v)", path, resp.StatusCode, len(page.Runs), page.Total, err)
		}
		return page.Next, nil
	}
	next, err := get("/api/v1/runs", 10_000) // warm the connection and the plans, and check the count once
	require.NoError(b, err)
	others := []string{"/api/v1/runs?state=SUCCEEDED", "/api/v1/runs?q=svc-01", next}
	for _, p := range others {
		_, err := get(p, 0)
		require.NoError(b, err)
	}
	rate, d := inboxLoad(b)
	var first, rest bench.Load
	b.ResetTimer()
	for range b.N {
		first = bench.OpenLoop(rate, d, func() error { _, err := get("/api/v1/runs", 10_000); return err })
		var n atomic.Int64
		rest = bench.OpenLoop(rate, d, func() error { _, err := get(others[int(n.Add(1))%len(others)], 0); return err })
	}
	b.ReportMetric(float64(first.P50.Microseconds())/1000, "p50_ms")
	b.ReportMetric(float64(first.P99.Microseconds())/1000, "p99_ms")
	b.ReportMetric(float64(first.Errors+rest.Errors), "errors")
	b.ReportMetric(first.Achieved, "req_per_s")
	b.ReportMetric(float64(rest.P99.Microseconds())/1000, "filtered_p99_ms")
}
