//go:build !fast

// Live: needs a browser (chromium, driven by chromedp).

package e2e_test

import (
	"net/url"
	"os"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"
	"github.com/stretchr/testify/require"

	"gantry/cmd/gantry/webtest"
	runmodel "gantry/models/run"
	"gantry/views/paths"
)

const whoWhyShots = "/tmp/shots37/whowhy"

// TestReviewWhoWhyInBrowser: an admin opening the review of a change reads, above the
// plan, who asked for it (not "you": the operator did), the reason as typed with its
// line breaks and a long unbroken word that does not widen the page, the ticket as a
// link, and retention_days "30 → 90" against the run applied before; the requester
// reads "you". On a 390 px phone nothing sticks out sideways.
func TestReviewWhoWhyInBrowser(t *testing.T) {
	chrome := chromePath(t)
	app := webtest.Start(t)
	operator, admin := app.LoggedIn(t, operatorEmail), app.LoggedIn(t, adminEmail)
	staging := app.OrgEnvironmentID(t, "acme", "staging")
	bucket := func(retention string) url.Values {
		return url.Values{"template": {"bucket"}, "environment": {staging}, "workspace": {"invoice-archive"}, "kind": {"apply"},
			"inputs.name": {"invoice-archive"}, "inputs.retention_days": {retention}, "inputs.region": {"eu-west"}}
	}
	first := waitForRunRow(t, app, requestRunHTTP(t, app, operator, bucket("30")), runmodel.PendingApproval)
	approveHTTP(t, app, admin, first)
	waitForRunRow(t, app, first.ID, runmodel.Succeeded)

	change := bucket("90")
	long := "see-" + strings.Repeat("x", 120)
	change.Set("reason", "Auditors need invoices kept for 90 days.\nAgreed with finance: "+long)
	change.Set("ticket", "https://tickets.example/OPS-4711")
	waiting := waitForRunRow(t, app, requestRunHTTP(t, app, operator, change), runmodel.PendingApproval)

	b := startBrowser(t, chrome)
	signInAs(t, b, app, adminEmail, adminPassword, "Adam")
	b.do(t, "open the change's review", chromedp.Navigate(app.URL+paths.RunReview(waiting.ID)),
		chromedp.WaitVisible(chromedp.CSS(`[data-testid="whowhy"]`)))
	require.Contains(t, text(t, b, chromedp.CSS(`[data-testid="requester"]`)), "Olivia")
	require.Zero(t, count(t, b, `[data-testid="requester-you"]`), "the admin did not ask for it")
	require.Equal(t, "Auditors need invoices kept for 90 days.\nAgreed with finance: "+long,
		text(t, b, chromedp.CSS(`[data-testid="reason"]`)), "the line break is kept")
	link := chromedp.CSS(`[data-testid="ticket-link"]`)
	require.Equal(t, "https://tickets.example/OPS-4711", attribute(t, b, link, "href"))
	require.Equal(t, "noopener noreferrer", attribute(t, b, link, "rel"))
	retention := `[data-testid="input-retention_days"]`
	require.Equal(t, "changed", attribute(t, b, chromedp.CSS(retention), "data-status"))
	require.Equal(t, "30 → 90", strings.Join(strings.Fields(text(t, b, chromedp.CSS(retention+" td"))), " "))
	require.Equal(t, "unchanged", attribute(t, b, chromedp.CSS(`[data-testid="input-region"]`), "data-status"))
	require.Contains(t, text(t, b, chromedp.CSS(`[data-testid="inputs-compared"]`)), "Compared with run #1, the last one applied to this workspace: 1 input changes.")
	above := run(t, b, "is who and why above the plan", chromedp.Evaluate[bool](
		`document.querySelector('[data-testid="whowhy"]').getBoundingClientRect().top < document.querySelector('[data-testid="counts"]').getBoundingClientRect().top`))
	require.True(t, above, "who and why come before the plan")
	requireAccessible(t, b, "the review with who and why")

	require.NoError(t, os.MkdirAll(whoWhyShots, 0o755))
	screenshotAt(t, b, whoWhyShots+"/review-1280.png", 1280, 900, false)
	elementShot(t, b, `[data-testid="whowhy"]`, whoWhyShots+"/whowhy-1280.png")
	screenshotAt(t, b, whoWhyShots+"/review-390.png", 390, 844, true)
	elementShot(t, b, `[data-testid="whowhy"]`, whoWhyShots+"/whowhy-390.png")
	overflow := run(t, b, "measure horizontal overflow at 390 px", chromedp.Evaluate[int64](
		`document.documentElement.scrollWidth - document.documentElement.clientWidth`))
	require.Zero(t, overflow, "the long reason does not widen the page")

	// The requester reads "you"; the inbox row of the admin shows the reason's first
	// line and the ticket.
	b.do(t, "open the admin's inbox", chromedp.EmulateViewport(1280, 900), chromedp.Navigate(app.URL+paths.Approvals()),
		chromedp.WaitVisible(chromedp.CSS(`[data-testid="run-`+waiting.ID+`"] [data-testid="inbox-note"]`)))
	require.Equal(t, "Auditors need invoices kept for 90 days. …",
		text(t, b, chromedp.CSS(`[data-testid="run-`+waiting.ID+`"] [data-testid="inbox-reason"]`)))
	screenshotAt(t, b, whoWhyShots+"/inbox-1280.png", 1280, 700, false)
	elementShot(t, b, `[data-testid="run-`+waiting.ID+`"]`, whoWhyShots+"/inbox-row-1280.png")
	requester := startBrowser(t, chrome)
	signInAs(t, requester, app, operatorEmail, operatorPassword, "Olivia")
	requester.do(t, "open the review as its requester", chromedp.Navigate(app.URL+paths.RunReview(waiting.ID)),
		chromedp.WaitVisible(chromedp.CSS(`[data-testid="requester-you"]`)))
	requester.do(t, "open the run page", chromedp.Navigate(app.URL+paths.Run(waiting.ID)),
		chromedp.WaitVisible(chromedp.CSS(`[data-testid="run-ticket"] a`)))
	require.Contains(t, text(t, requester, chromedp.CSS(`[data-testid="note-reason"]`)), "Auditors need invoices kept for 90 days.")
	requireAccessible(t, requester, "the run page with its reason")
	screenshotAt(t, requester, whoWhyShots+"/run-390.png", 390, 844, true)
	elementShot(t, requester, `dl.facts`, whoWhyShots+"/run-facts-390.png")
	requireNoCSPViolations(t, b)
}
