package web_test

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"gantry/bench"
	"gantry/cmd/gantry/webtest"
	"gantry/models/run"
)

// inboxLoad is the open-loop load of the inbox benchmarks: GANTRY_BENCH_RATE requests
// per second (default 50) for GANTRY_BENCH_SECONDS (default 30).
func inboxLoad(b *testing.B) (rate float64, d time.Duration) {
	rate, secs := 50.0, 30.0
	if v, err := strconv.ParseFloat(os.Getenv("GANTRY_BENCH_RATE"), 64); err == nil && v > 0 {
		rate = v
	}
	if v, err := strconv.ParseFloat(os.Getenv("GANTRY_BENCH_SECONDS"), 64); err == nil && v > 0 {
		secs = v
	}
	return rate, time.Duration(secs * float64(time.Second))
}

// seedWaiting clones run tpl into n runs of its workspace, all waiting for a decision
// (deadlines a second apart), and writes who may decide them as the run service does.
func seedWaiting(b testing.TB, app *webtest.App, tpl run.Run, n int) {
	b.Helper()
	require.NoError(b, app.DB.Exec(`INSERT INTO runs SELECT (jsonb_populate_record(NULL::runs, to_jsonb(r) || jsonb_build_object(
			'id', r.id || '-' || g, 'number', 1000 + g, 'decision_deadline', now() + interval '1 day' + g * interval '1 second'))).*
		FROM runs r, generate_series(1, ?) AS g WHERE r.id = ?`, n, tpl.ID).Error)
	require.NoError(b, app.DB.Exec("ANALYZE runs").Error)
	require.NoError(b, app.System.Runs.Eligibility.RefreshDecidersIn(context.Background(), tpl.OrganizationID, tpl.EnvironmentID))
	require.NoError(b, app.DB.Exec("ANALYZE run_deciders").Error)
}

// BenchmarkInbox10k: the personal inbox with 10,000 runs waiting across two
// organizations (5,000 each), as an admin of one opens it, under an open-loop load at a
// fixed rate on loopback: p50, p99, errors and the rate achieved. Each answer is checked:
// a full first page of each list.
func BenchmarkInbox10k(b *testing.B) {
	app := webtest.Start(b)
	for _, slug := range []string{"acme", "globex"} {
		operator := app.LoggedIn(b, "operator@"+slug+".test")
		req := bucketRequest(app.OrgEnvironmentID(b, slug, "staging"), "eu-west")
		req.Set("workspace", "inbox-bench")
		tpl := waitForState(b, app, app.RequestRun(b, operator, req), run.PendingApproval)
		seedWaiting(b, app, tpl, 4_999)
	}
	admin := app.LoggedIn(b, "admin@acme.test")
	rate, d := inboxLoad(b)
	get := func() error {
		resp, err := admin.Get(app.URL + "/approvals")
		if err != nil {
			return err
		}
		body := webtest.ReadBody(b, resp)
		if resp.StatusCode != http.StatusOK || strings.Count(body, `<tr data-testid="run-`) != 50 {
			return fmt.Errorf("answered %d with %d rows", resp.StatusCode, strings.Count(body, `<tr data-testid="run-`))
		}
		return nil
	}
	require.NoError(b, get()) // warm the connection and the plans
	var l bench.Load
	b.ResetTimer()
	for range b.N {
		l = bench.OpenLoop(rate, d, get)
	}
	b.ReportMetric(float64(l.P50.Microseconds())/1000, "p50_ms")
	b.ReportMetric(float64(l.P99.Microseconds())/1000, "p99_ms")
	b.ReportMetric(float64(l.Errors), "errors")
	b.ReportMetric(l.Achieved, "req_per_s")
}
