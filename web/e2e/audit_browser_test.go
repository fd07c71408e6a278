//go:build !fast

// Live: needs a browser (chromium, driven by chromedp).

package e2e_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/stretchr/testify/require"

	"gantry/bench"
	"gantry/cmd/gantry/webtest"
	"gantry/models/audit/exportfile"
	runmodel "gantry/models/run"
)

const (
	auditorEmail    = "auditor@acme.test"
	auditorPassword = "auditor-acme"

	// Artifacts for a human; not assertions.
	auditScreenshot       = "/tmp/gantry-audit-1280.png"
	auditPhoneScreenshot  = "/tmp/gantry-audit-390.png"
	auditExportScreenshot = "/tmp/gantry-audit-export-1280.png"
	evidenceScreenshot    = "/tmp/gantry-evidence-1280.png"
)

// TestAuditorInBrowser: an auditor finds the history in the navigation, reads it in
// sentences, filters it by action, environment and a workspace's name, exports what
// the filters select (their range and filters: the export has no dates of its own) as CSV,
// watches the export page turn ready by itself (SSE) and downloads a file that
// verifies against the organization's published key.
func TestAuditorInBrowser(t *testing.T) {
	chrome := chromePath(t)
	app := webtest.Start(t)
	operator := app.LoggedIn(t, operatorEmail)
	development := app.OrgEnvironmentID(t, "acme", "development")
	form := url.Values{"_csrf": {app.CSRF(t, operator)}, "template": {"bucket"}, "environment": {development}, "workspace": {"audited"},
		"kind": {"apply"}, "inputs.name": {"audited-bucket"}}
	resp := app.PostForm(t, operator, "/requests", form)
	webtest.ReadBody(t, resp)
	require.Equal(t, http.StatusSeeOther, resp.StatusCode)
	runPath := resp.Header.Get("Location")
	waitForRunRow(t, app, strings.TrimPrefix(runPath, "/runs/"), runmodel.Succeeded)

	b := startBrowser(t, chrome)
	signInAs(t, b, app, auditorEmail, auditorPassword, "Audrey")
	b.do(t, "open the audit history from the navigation", chromedp.Click(chromedp.CSS(`#nav-audit > summary`), chromedp.NodeVisible),
		chromedp.Click(chromedp.CSS(`nav.mainnav a[href="/audit"]`), chromedp.NodeVisible),
		chromedp.WaitVisible(chromedp.CSS(`[data-testid="audit-events"]`)))
	require.Contains(t, liveText(t, b, "chain-state"), "chain")
	events := liveText(t, b, "audit-events")
	require.Contains(t, events, "requested run #1 of audited in development from template bucket")
	require.Contains(t, events, "Audrey (Acme Corp auditor) signed in")
	screenshotAt(t, b, auditScreenshot, 1280, 900, false)
	screenshotAt(t, b, auditPhoneScreenshot, 390, 844, true)
	b.do(t, "back to the desktop viewport", chromedp.EmulateViewport(1280, 900))

	b.do(t, "mark the page before filtering", chromedp.Evaluate[chromedp.Void](`window.gantryBefore = true`))
	b.do(t, "filter by action, environment and the workspace's name",
		chromedp.SetValue(chromedp.CSS(`#filter-action`), "run.queued"),
		chromedp.SetValue(chromedp.CSS(`#filter-environment`), development),
		chromedp.SendKeys(chromedp.CSS(`#filter-workspace`), "audited"),
		chromedp.Click(chromedp.CSS(`[data-testid="audit-filters"] button[type="submit"]`), chromedp.NodeVisible))
	waitForNewPage(t, b, "action=run.queued")
	b.do(t, "wait for the filtered events", chromedp.WaitVisible(chromedp.CSS(`[data-testid="audit-events"]`)))
	actions := run(t, b, "read the listed actions", chromedp.Evaluate[[]string](
		`[...document.querySelectorAll('[data-testid="audit-event"]')].map(e => e.dataset.action)`))
	require.Equal(t, []string{"run.queued"}, actions)
	require.Equal(t, "audited (development)", value(t, b, chromedp.CSS(`#filter-workspace`)), "the workspace, by its name")
	// The export takes these filters, and says so: one set of dates.
	scope := liveText(t, b, "export-scope")
	require.Contains(t, scope, "· action Run requested · environment development · workspace audited (development)")
	require.Contains(t, liveText(t, b, "export-range-note"), "the export covers the last 30 days")
	require.Equal(t, 2, run(t, b, "count the date fields", chromedp.Evaluate[int](`document.querySelectorAll('input[type="datetime-local"]').length`)))
	requireAccessible(t, b, "the filtered audit history with its export")
	screenshotAt(t, b, "/tmp/shots37/smaller/audit-filtered-1366.png", 1366, 900, false)
	screenshotAt(t, b, "/tmp/shots37/smaller/audit-filtered-390.png", 390, 844, true)
	b.do(t, "back to the desktop viewport", chromedp.EmulateViewport(1280, 900))

	b.do(t, "export the filtered range as CSV",
		chromedp.SetValue(chromedp.CSS(`#export-format`), "csv"),
		chromedp.Click(chromedp.CSS(`[data-testid="export-submit"]`), chromedp.NodeVisible),
		chromedp.WaitVisible(chromedp.CSS(`[data-testid="export-status"]`)))
	exportURL := location(t, b)
	require.Regexp(t, `/audit/exports/exp-[a-z0-9]+$`, exportURL)
	loads := runPageLoads(b, exportURL)
	waitForPage(t, b, "the export to be ready, live", `document.querySelector('[data-testid="export-status"]')?.dataset.status == "ready"`,
		"export-status")
	require.Equal(t, loads, runPageLoads(b, exportURL), "the export page turned ready in place")
	require.Contains(t, liveText(t, b, "export-status"), "Ready: 1 event,")
	screenshotAt(t, b, auditExportScreenshot, 1280, 900, false)

	// The browser downloads the file (same-origin fetch with the auditor's session)
	// and it verifies against the key the organization publishes.
	file := run(t, b, "download the export", chromedp.Evaluate[string](
		`fetch(document.querySelector('[data-testid="export-download"]').href).then(r => r.text())`,
		chromedp.EvalAwaitPromise))
	keys := run(t, b, "read the published keys", chromedp.Evaluate[string](`fetch('/api/v1/audit/keys').then(r => r.text())`,
		chromedp.EvalAwaitPromise))
	var set exportfile.KeySet
	require.NoError(t, json.Unmarshal([]byte(keys), &set))
	verdict := exportfile.Verify(bytes.NewReader([]byte(file)), exportfile.Trust{Keys: &set})
	require.True(t, verdict.OK, verdict.Verdict)
	require.Contains(t, verdict.Verdict, "filtered export")
	require.True(t, strings.HasPrefix(file, "seq,occurred_at,actor,action"))

	// From the history to the run, to its evidence report, and its download.
	b.do(t, "back to the history", chromedp.Navigate(app.URL+"/audit?action=run.queued"),
		chromedp.WaitVisible(chromedp.CSS(`[data-testid="audit-events"]`)))
	b.do(t, "open the run from its event", chromedp.Click(chromedp.CSS(`[data-testid="audit-event"] a[href="`+runPath+`"]`), chromedp.NodeVisible),
		chromedp.WaitVisible(chromedp.CSS(`[data-testid="evidence-link"]`)))
	b.do(t, "open the evidence report", chromedp.Click(chromedp.CSS(`[data-testid="evidence-link"]`), chromedp.NodeVisible),
		chromedp.WaitVisible(chromedp.CSS(`[data-testid="evidence-verdict"]`)))
	require.Equal(t, "true", attribute(t, b, chromedp.CSS(`[data-testid="evidence-verdict"]`), "data-match"))
	require.Contains(t, liveText(t, b, "evidence-verdict"), "The applied artifact is the approved artifact")
	screenshotAt(t, b, evidenceScreenshot, 1280, 900, false)
	report := run(t, b, "download the evidence report", chromedp.Evaluate[string](
		`fetch(document.querySelector('[data-testid="evidence-download"]').href).then(r => r.headers.get('Content-Disposition'))`,
		chromedp.EvalAwaitPromise))
	require.Contains(t, report, "attachment; filename=\"gantry-evidence-run-")
	html := run(t, b, "read the downloaded report", chromedp.Evaluate[string](
		`fetch(document.querySelector('[data-testid="evidence-download"]').href).then(r => r.text())`, chromedp.EvalAwaitPromise))
	require.Contains(t, html, "The applied artifact is the approved artifact")
	requireNoCSPViolations(t, b)
}

// waitForNewPage waits until the page marked with window.gantryBefore was replaced by
// one whose address contains part and that finished loading (a form submitted by a
// click navigates after the click returns; asking meanwhile can meet either page, or
// none). It looks again at every page load the tab reports.
func waitForNewPage(t *testing.T, b *browser, part string) {
	t.Helper()
	bench.Eventually(t, fmt.Sprintf("a new page with %q in its address, loaded", part), stepBase, func() (bool, any) {
		// A probe on a document being replaced may find no page to evaluate in: it
		// gives up within its budget and counts as not there yet.
		ctx, cancel := bench.Context(b.ctx, time.Second)
		defer cancel()
		v, err := chromedp.Run(ctx, chromedp.Evaluate[struct {
			Old   bool
			URL   string
			State string
		}](`({old: !!window.gantryBefore, url: location.href, state: document.readyState})`))
		if err != nil {
			return false, b.why(ctx, err)
		}
		return !v.Old && strings.Contains(v.URL, part) && v.State == "complete",
			fmt.Sprintf("%s, %s, marked as the old page: %t", v.URL, v.State, v.Old)
	}, bench.Wake(b.events.loaded))
}
