package web_test

import (
	"fmt"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/require"

	"gantry/bench"
	"gantry/cmd/gantry/webtest"
	"gantry/models/run"
)

// seedWorkspacesWithRuns writes n workspaces (svc-00001…) in tpl's environment, each
// with one run cloned from tpl (its newest run, for the list's last-run column).
func seedWorkspacesWithRuns(b testing.TB, app *webtest.App, tpl run.Run, n int) {
	b.Helper()
	require.NoError(b, app.DB.Exec(`INSERT INTO workspaces (id, organization_id, environment_id, name, template_name, next_run_number, last_run_at)
		SELECT ? || '-' || lpad(g::text, 5, '0'), ?, ?, 'svc-' || lpad(g::text, 5, '0'), 'bucket', 2, now() - g * interval '1 second'
		FROM generate_series(1, ?) AS g`, tpl.WorkspaceID, tpl.OrganizationID, tpl.EnvironmentID, n).Error)
	require.NoError(b, app.DB.Exec(`INSERT INTO runs SELECT (jsonb_populate_record(NULL::runs, to_jsonb(r) || jsonb_build_object(
			'id', r.id || '-' || w.id, 'workspace_id', w.id, 'number', 1, 'created_at', w.last_run_at))).*
		FROM runs r JOIN workspaces w ON w.organization_id = r.organization_id AND w.name LIKE 'svc-%' WHERE r.id = ?`, tpl.ID).Error)
	require.NoError(b, app.DB.Exec("ANALYZE workspaces").Error)
	require.NoError(b, app.DB.Exec("ANALYZE runs").Error)
}

// BenchmarkWorkspaces10k: the workspaces list with 10,000 workspaces across two
// organizations (5,000 each, every one with a run), as an admin of one opens it, under
// an open-loop load at a fixed rate on loopback (GANTRY_BENCH_RATE, 50/s by default, for
// GANTRY_BENCH_SECONDS, 30): first the list's first page, then the same load of pages
// people reach from it, in turn: a search, a sort by last activity and a filter by
// environment. Every answer is checked: 50 rows, each with its last run.
func BenchmarkWorkspaces10k(b *testing.B) {
	app := webtest.Start(b)
	for _, slug := range []string{"acme", "globex"} {
		operator := app.LoggedIn(b, "operator@"+slug+".test")
		req := bucketRequest(app.OrgEnvironmentID(b, slug, "development"), "eu-west")
		req.Set("workspace", "bench-template")
		tpl := waitForState(b, app, app.RequestRun(b, operator, req), run.Succeeded)
		seedWorkspacesWithRuns(b, app, tpl, 4_999)
	}
	admin := app.LoggedIn(b, "admin@acme.test")
	dev := app.OrgEnvironmentID(b, "acme", "development")
	get := func(path string) error {
		resp, err := admin.Get(app.URL + path)
		if err != nil {
			return err
		}
		body := webtest.ReadBody(b, resp)
		rows, last := strings.Count(body, `<tr data-testid="workspace-`), strings.Count(body, `data-testid="last-run"><a href="/runs/`)
		if resp.StatusCode != http.StatusOK || rows != 50 || last != 50 {
			return fmt.Errorf("%s answered %d with %d rows, %d with a last run", path, resp.StatusCode, rows, last)
		}
		return nil
	}
	others := []string{"/workspaces?q=svc-01", "/workspaces?sort=-activity", "/workspaces?environment=" + dev}
	for _, p := range append([]string{"/workspaces"}, others...) {
		require.NoError(b, get(p)) // warm the connection and the plans, and check every page once
	}
	rate, d := inboxLoad(b)
	var first, rest bench.Load
	b.ResetTimer()
	for range b.N {
		first = bench.OpenLoop(rate, d, func() error { return get("/workspaces") })
		var n atomic.Int64
		rest = bench.OpenLoop(rate, d, func() error { return get(others[int(n.Add(1))%len(others)]) })
	}
	b.ReportMetric(float64(first.P50.Microseconds())/1000, "p50_ms")
	b.ReportMetric(float64(first.P99.Microseconds())/1000, "p99_ms")
	b.ReportMetric(float64(first.Errors+rest.Errors), "errors")
	b.ReportMetric(first.Achieved, "req_per_s")
	b.ReportMetric(float64(rest.P99.Microseconds())/1000, "filtered_p99_ms")
}
