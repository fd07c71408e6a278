//go:build !fast

// Live: needs a browser (chromium, driven by chromedp).

package e2e_test

import (
	"net/url"
	"testing"

	"github.com/chromedp/chromedp"
	"github.com/stretchr/testify/require"

	"gantry/cmd/gantry/webtest"
	runmodel "gantry/models/run"
	"gantry/views/paths"
)

// TestHardBlockedRunIsRejectedInBrowser: a run a hard-mandatory policy blocked offers an
// admin only a rejection on its review page (no approval), which takes a reason; the run
// then reads REJECTED with its ending code and words on its page.
func TestHardBlockedRunIsRejectedInBrowser(t *testing.T) {
	chrome := chromePath(t)
	app := webtest.Start(t)
	operator := app.LoggedIn(t, operatorEmail)
	// us-east is against the organization's data residency: a hard-mandatory block.
	id := requestRunHTTP(t, app, operator, url.Values{"template": {"bucket"}, "environment": {app.OrgEnvironmentID(t, "acme", "development")},
		"workspace": {"us-logs"}, "kind": {"apply"}, "inputs.name": {"us-logs"}, "inputs.retention_days": {"30"}, "inputs.region": {"us-east"}})
	r := waitForRunRow(t, app, id, runmodel.PolicyBlocked)
	require.True(t, r.HardBlocked())

	b := startBrowser(t, chrome)
	signInAs(t, b, app, adminEmail, adminPassword, adminFirst)
	b.do(t, "open the review page", chromedp.Navigate(app.URL+paths.RunReview(id)), chromedp.WaitVisible(chromedp.ID("reject-reason")))
	require.Zero(t, count(t, b, "#approve"), "a hard block is never approved")
	require.Contains(t, text(t, b, chromedp.CSS(`[data-testid="reject-only"]`)), "You may reject this plan, not approve it.",
		"the bar above the plan says so, instead of \"waits for your decision\"")
	screenshotAt(t, b, decisionShot(t, "review"), 1280, 900, false)

	// Without a reason the form comes back with the error at its field.
	b.do(t, "reject without a reason", chromedp.Click(chromedp.ID("reject")), chromedp.WaitVisible(chromedp.ID("reject-reason-error")))
	require.Equal(t, runmodel.PolicyBlocked, waitForRunRow(t, app, id, runmodel.PolicyBlocked).State)
	b.do(t, "reject with a reason",
		chromedp.SendKeys(chromedp.ID("reject-reason"), "customer data must stay in the EU"),
		chromedp.Click(chromedp.ID("reject")),
		chromedp.WaitVisible(`[data-testid="run-ending"]`),
	)
	require.Equal(t, "REJECTED", shownRunState(t, b))
	require.Equal(t, "Rejected", text(t, b, chromedp.CSS(`[data-testid="run-state"]`)), "the state in words")
	require.Equal(t, "REJECTED", attribute(t, b, chromedp.CSS(`[data-testid="run-ending"]`), "data-ending"))
	require.Contains(t, text(t, b, chromedp.CSS(`[data-testid="run-ending"]`)), runmodel.EndRejected.Words())
	screenshotAt(t, b, decisionShot(t, "rejected"), 1280, 900, false)
	done := waitForRunRow(t, app, id, runmodel.Rejected)
	require.Equal(t, runmodel.EndRejected, done.Ending)
	require.Nil(t, done.ApprovedBy)
}
