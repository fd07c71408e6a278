package web_test

import (
	"net/http"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"gantry/cmd/gantry/webtest"
	"gantry/models/audit/audittest"
)

// BenchmarkAuditHistory1M: the audit history page of an organization with a million
// events, as its auditor opens it: p50 and p99 of the first page over 100 requests
// (and of a page filtered by environment and action), through the whole portal
// (session, service, names, chain checkpoint, rendering).
func BenchmarkAuditHistory1M(b *testing.B) {
	const n = 1_000_000
	app := webtest.Start(b)
	envs := []string{app.OrgEnvironmentID(b, "acme", "development"), app.OrgEnvironmentID(b, "acme", "staging"),
		app.OrgEnvironmentID(b, "acme", "production")}
	require.NoError(b, audittest.Seed(b.Context(), app.DB, app.Orgs["acme"], n, envs, []string{"ws-bench1", "ws-bench2", "ws-bench3"}))
	auditor := app.LoggedIn(b, "auditor@acme.test")

	measure := func(path string) (p50, p99 time.Duration) {
		b.Helper()
		get := func() time.Duration {
			start := time.Now()
			resp := app.Get(b, auditor, path)
			body := webtest.ReadBody(b, resp)
			took := time.Since(start)
			require.Equal(b, http.StatusOK, resp.StatusCode)
			require.Equal(b, 50, strings.Count(body, `data-testid="audit-event"`), "a full first page")
			return took
		}
		get() // warm the connection and the plan cache
		latencies := make([]time.Duration, 100)
		for i := range latencies {
			latencies[i] = get()
		}
		sort.Slice(latencies, func(i, j int) bool { return latencies[i] < latencies[j] })
		return latencies[49], latencies[98]
	}
	var first50, first99, filtered50, filtered99 time.Duration
	b.ResetTimer()
	for range b.N {
		first50, first99 = measure("/audit")
		filtered50, filtered99 = measure("/audit?environment=" + envs[2] + "&action=run.approved")
	}
	ms := func(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }
	b.ReportMetric(ms(first50), "p50_ms")
	b.ReportMetric(ms(first99), "p99_ms")
	b.ReportMetric(ms(filtered50), "filtered_p50_ms")
	b.ReportMetric(ms(filtered99), "filtered_p99_ms")
}
