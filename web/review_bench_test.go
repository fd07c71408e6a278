package web_test

import (
	"context"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"gantry/bench"
	"gantry/cmd/gantry/webtest"
	"gantry/models/artifact"
	"gantry/models/classify/classifytest"
	"gantry/models/run"
)

// reviewOf10k is a run waiting for approval whose plan is the 10,000-change plan the
// classification and policy benchmarks use, and an admin's client.
func reviewOf10k(b testing.TB) (*webtest.App, *http.Client, string) {
	b.Helper()
	app := webtest.Start(b)
	operator := app.LoggedIn(b, "operator@acme.test")
	staging := app.OrgEnvironmentID(b, "acme", "staging")
	r := waitForState(b, app, app.RequestRun(b, operator, bucketRequest(staging, "eu-west")), run.PendingApproval)
	plan := classifytest.Plan10kFile(b)
	a, err := app.System.Artifacts.Put(context.Background(), r.OrganizationID, r.WorkspaceID, artifact.PlanJSON, plan)
	require.NoError(b, err)
	require.NoError(b, app.DB.Exec("UPDATE runs SET plan_json_artifact_id = ? WHERE id = ?", a.ID, r.ID).Error)
	return app, app.LoggedIn(b, "admin@acme.test"), r.ID
}

// BenchmarkReviewPage10k is the review page's first response for a 10,000-change plan:
// read, decrypt, classify, render the summary and the first page of every section;
// against a plain decode of the same plan in the same run (goals: ratio ≤ 3 and
// page-bytes ≤ 200 KB, bench/goals.go).
func BenchmarkReviewPage10k(b *testing.B) {
	app, admin, id := reviewOf10k(b)
	var size int
	bench.Ratio(b, classifytest.PlainDecode(b, classifytest.Plan10kFile(b)), func() {
		resp := app.Get(b, admin, "/runs/"+id+"/review")
		body, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		require.NoError(b, err)
		require.Equal(b, http.StatusOK, resp.StatusCode)
		size = len(body)
	})
	b.ReportMetric(float64(size), "page-bytes")
}

// TestReviewPageOfALargePlan: the 10,000-change plan's review page shows the counts and
// the first page of each section, pages the rest through htmx, and stays small.
func TestReviewPageOfALargePlan(t *testing.T) {
	t.Parallel()
	app, admin, id := reviewOf10k(t)
	page := webtest.ReadBody(t, app.Get(t, admin, "/runs/"+id+"/review"))
	require.Less(t, len(page), 200*1024, "the first response stays under 200 KB")
	require.Contains(t, page, "<dt>replace</dt><dd>500</dd>")
	require.Contains(t, page, "<dt>destroy</dt><dd>250</dd>")
	require.Contains(t, page, "<dt>update in place</dt><dd>250</dd>")
	require.Equal(t, 3*20, strings.Count(page, `data-testid="change"`), "20 entries of each non-empty section (the plan creates nothing)")
	require.Contains(t, page, "Page 1 of 25") // 500 replaces, 20 a page
	// The first replace is network n0; its dependents, transitively, are listed with it.
	require.Contains(t, page, `data-address="sandbox_network.n0"`)
	require.Contains(t, page, "<li><code>sandbox_dns_record.r0</code></li>")
	req, err := http.NewRequest(http.MethodGet, app.URL+"/runs/"+id+"/review/replace?page=2", nil)
	require.NoError(t, err)
	req.Header.Set("HX-Request", "true")
	htmxResp, err := admin.Do(req)
	require.NoError(t, err)
	next := webtest.ReadBody(t, htmxResp)
	require.NotContains(t, next, "<html", "for htmx a section page is the section alone")
	require.Contains(t, next, "Page 2 of 25")
	require.Equal(t, 20, strings.Count(next, `data-testid="change"`))
	resp := app.Get(t, admin, "/runs/"+id+"/review/nonsense?page=1")
	webtest.ReadBody(t, resp)
	require.Equal(t, http.StatusNotFound, resp.StatusCode)
}
