//go:build !fast

// Live: needs a browser (chromium, driven by chromedp).

package e2e_test

import (
	"context"
	"net/http"
	"net/url"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/chromedp"
	"github.com/stretchr/testify/require"

	"gantry/cmd/gantry/webtest"
	runmodel "gantry/models/run"
)

// wireBytes counts, per request, the bytes Chromium received over the network for it
// (headers and body as sent: compressed), including requests still open (a live
// stream) with what they received so far. Answers from the browser's cache count zero.
type wireBytes struct {
	mu       sync.Mutex
	partial  map[network.RequestID]float64
	finished map[network.RequestID]float64
}

func (w *wireBytes) record(ev any) {
	w.mu.Lock()
	defer w.mu.Unlock()
	switch ev := ev.(type) {
	case *network.EventResponseReceived:
		w.partial[ev.RequestID] += ev.Response.EncodedDataLength
	case *network.EventDataReceived:
		w.partial[ev.RequestID] += float64(ev.EncodedDataLength)
	case *network.EventLoadingFinished:
		w.finished[ev.RequestID] = ev.EncodedDataLength
	}
}

// take returns the bytes counted since the last take and starts again.
func (w *wireBytes) take() float64 {
	w.mu.Lock()
	defer w.mu.Unlock()
	total := 0.0
	for id, n := range w.partial {
		if f, ok := w.finished[id]; ok {
			n = f
		}
		total += n
	}
	for id, f := range w.finished {
		if _, ok := w.partial[id]; !ok {
			total += f
		}
	}
	w.partial, w.finished = map[network.RequestID]float64{}, map[network.RequestID]float64{}
	return total
}

// BenchmarkBytesPerNavigation: what a person's browser downloads for each page after
// the first, with its cache warm (the stylesheet, scripts and icons under hashed,
// immutable names): in headless Chromium, an admin signs in, opens the dashboard once,
// then the workspaces list (200 workspaces: a full page of 50), runs, approvals,
// catalog, policies, a run, its review, a workspace and the dashboard again. The
// figures are the largest and the mean of those nine navigations, and the first page.
func BenchmarkBytesPerNavigation(b *testing.B) {
	chrome := chromePath(b)
	app := webtest.Start(b)
	operator := app.LoggedIn(b, operatorEmail)
	staging := app.OrgEnvironmentID(b, "acme", "staging")
	form := url.Values{"_csrf": {app.CSRF(b, operator)}, "template": {"postgres"}, "environment": {staging}, "workspace": {"navigation"},
		"kind": {"apply"}, "inputs.name": {"navigation"}, "inputs.engine_version": {"16"}, "inputs.size": {"small"},
		"inputs.storage_gb": {"20"}, "inputs.backup_retention_days": {"7"}, "inputs.network_cidr": {"10.30.0.0/16"}}
	resp := app.PostForm(b, operator, "/requests", form)
	webtest.ReadBody(b, resp)
	require.Equal(b, http.StatusSeeOther, resp.StatusCode)
	runPath := resp.Header.Get("Location")
	r := waitForRunRow(b, app, runPath[len("/runs/"):], runmodel.PendingApproval)
	require.NoError(b, app.DB.Exec(`INSERT INTO workspaces (id, organization_id, environment_id, name, template_name, last_run_at)
		SELECT 'ws-nav' || lpad(g::text, 4, '0'), ?, ?, 'service-' || lpad(g::text, 4, '0'), 'bucket', now() - g * interval '1 minute'
		FROM generate_series(1, 200) AS g`, app.Orgs["acme"], staging).Error)

	alloc, cancelAlloc := chromedp.NewExecAllocator(context.Background(), chromedp.ExecPath(chrome), chromedp.Headless, chromedp.NoSandbox,
		chromedp.DisableGPU, chromedp.Flag("disable-quic", true), chromedp.NoFirstRun, chromedp.NoDefaultBrowserCheck,
		chromedp.Flag("disable-background-networking", true), chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true), chromedp.UserDataDir(b.TempDir()), chromedp.WindowSize(1280, 800))
	defer cancelAlloc()
	wire := &wireBytes{partial: map[network.RequestID]float64{}, finished: map[network.RequestID]float64{}}
	tab, cancelTab := chromedp.NewContext(alloc, chromedp.WithListener(wire.record))
	defer cancelTab()
	ctx, cancel := context.WithTimeout(tab, 5*time.Minute)
	defer cancel()
	require.NoError(b, chromedp.Do(ctx,
		chromedp.Navigate(app.URL+"/"), chromedp.WaitVisible(chromedp.ID("username")),
		chromedp.SendKeys(chromedp.ID("username"), adminEmail), chromedp.SendKeys(chromedp.ID("password"), adminPassword),
		chromedp.Click(chromedp.ID("sign-in"), chromedp.NodeVisible),
		chromedp.WaitVisible(chromedp.CSS(`[data-testid="current-user"]`))))
	// Let the sign-in's redirects and the first page's live stream settle.
	time.Sleep(time.Second)
	first := wire.take()

	pages := []string{"/workspaces", "/runs", "/approvals", "/catalog", "/policies", runPath, runPath + "/review",
		"/workspaces/" + r.WorkspaceID, "/"}
	var largest, sum float64
	b.ResetTimer()
	for range b.N {
		largest, sum = 0, 0
		for _, p := range pages {
			require.NoError(b, chromedp.Do(ctx, chromedp.Navigate(app.URL+p), chromedp.WaitVisible(chromedp.CSS(`main`))))
			// The page's live stream opens after its load: count its first event too.
			time.Sleep(300 * time.Millisecond)
			n := wire.take()
			b.Logf("%s: %.0f bytes", p, n)
			largest, sum = max(largest, n), sum+n
		}
	}
	b.ReportMetric(largest/1024, "max_kb")
	b.ReportMetric(sum/float64(len(pages))/1024, "mean_kb")
	b.ReportMetric(first/1024, "first_page_kb")
}
