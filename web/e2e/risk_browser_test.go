//go:build !fast

// Live: needs a browser (chromium, driven by chromedp).

package e2e_test

import (
	"net/http"
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

// Artifacts for a human; not assertions.
const riskShots = "/tmp/shots37/risk/"

// TestRiskInBrowser: an owner's inbox lists the destroy (risk 3) first, each risk badge
// in its own shape and in words; the destroy's review offers a danger approval restating
// what it destroys, a create's the plain one. Approving a run by a double click while
// others wait lands on the inbox, which says what became of it and offers the next as a
// link; a further click where the approve button was approves nothing else: the runs
// still waiting are still waiting. axe-core finds nothing serious on these pages.
func TestRiskInBrowser(t *testing.T) {
	chrome := chromePath(t)
	app := webtest.Start(t)
	require.NoError(t, os.MkdirAll(riskShots, 0o755))
	operator := app.LoggedIn(t, operatorEmail)
	admin := app.LoggedIn(t, adminEmail)
	request := func(env, workspace string) runmodel.Run {
		t.Helper()
		form := url.Values{"_csrf": {app.CSRF(t, operator)}, "template": {"bucket"}, "environment": {app.OrgEnvironmentID(t, "acme", env)},
			"workspace": {workspace}, "kind": {"apply"}, "inputs.name": {workspace}}
		resp := app.PostForm(t, operator, "/requests", form)
		webtest.ReadBody(t, resp)
		require.Equal(t, http.StatusSeeOther, resp.StatusCode)
		return waitForRunRow(t, app, strings.TrimPrefix(resp.Header.Get("Location"), "/runs/"), runmodel.PendingApproval)
	}
	applied := request("staging", "risk-doomed")
	approveHTTP(t, app, admin, applied)
	waitForRunRow(t, app, applied.ID, runmodel.Succeeded)
	low := request("staging", "risk-low")
	high := request("production", "risk-prod")
	resp := app.PostForm(t, operator, "/workspaces/"+applied.WorkspaceID+"/destroy", url.Values{"_csrf": {app.CSRF(t, operator)}, "confirm": {"risk-doomed"}})
	webtest.ReadBody(t, resp)
	require.Equal(t, http.StatusSeeOther, resp.StatusCode)
	destroy := waitForRunRow(t, app, strings.TrimPrefix(resp.Header.Get("Location"), "/runs/"), runmodel.PendingApproval)
	require.Equal(t, []int{1, 2, 3}, []int{*low.RiskClass, *high.RiskClass, *destroy.RiskClass})

	b := startBrowser(t, chrome)
	signInAs(t, b, app, ownerEmail, ownerPassword, "Alice")
	b.do(t, "open the inbox", chromedp.Navigate(app.URL+paths.Approvals()), chromedp.WaitVisible(chromedp.CSS(`[data-testid="approvals"]`)))
	rows := run(t, b, "read the rows", chromedp.Evaluate[[]string](
		`[...document.querySelectorAll('[data-testid="approvals"] tbody tr')].map(r => r.dataset.testid)`))
	require.Equal(t, []string{"run-" + destroy.ID, "run-" + high.ID, "run-" + low.ID}, rows, "the owner's inbox: risk 3 first")
	badges := run(t, b, "read the badges", chromedp.Evaluate[[]string](
		`[...document.querySelectorAll('[data-testid="approvals"] [data-testid="risk-badge"]')].map(e => e.textContent.trim().replace(/\s+/g, " "))`))
	require.Equal(t, []string{"◆ risk 3 · critical", "▲ risk 2 · high", "● risk 1 · low"}, badges)
	// Not colour alone: the classes differ in their edges' style and weight too.
	looks := run(t, b, "read the badges' looks", chromedp.Evaluate[[]string](
		`[...document.querySelectorAll('[data-testid="approvals"] [data-testid="risk-badge"]')].map(e => {
			const s = getComputedStyle(e); return s.borderTopStyle + " " + s.borderTopWidth + " " + s.fontWeight })`))
	require.Len(t, looks, 3)
	require.NotEqual(t, looks[0], looks[1])
	require.NotEqual(t, looks[1], looks[2])
	requireAccessible(t, b, "the owner's inbox")
	screenshotAt(t, b, riskShots+"inbox-owner-1280.png", 1280, 800, false)
	screenshotAt(t, b, riskShots+"inbox-owner-390.png", 390, 844, true)
	b.do(t, "reset the viewport", chromedp.ResetViewport())

	// The destroy's approval is a danger control restating its counts; a create's is plain.
	b.do(t, "open the destroy's review", chromedp.Navigate(app.URL+paths.RunReview(destroy.ID)), chromedp.WaitVisible(chromedp.ID("arm-approve")))
	require.Equal(t, "Approve: destroys 1…", text(t, b, chromedp.ID("arm-approve")))
	require.Contains(t, attribute(t, b, chromedp.ID("arm-approve"), "class"), "danger")
	requireAccessible(t, b, "the destroy's review")
	decisionPicture(t, b, riskShots+"review-destroy-decision.png")
	b.do(t, "arm the approval", chromedp.Click(chromedp.ID("arm-approve"), chromedp.NodeVisible), chromedp.WaitVisible(chromedp.ID("approve")))
	require.Equal(t, "Approve: destroys 1", text(t, b, chromedp.ID("approve")))
	decisionPicture(t, b, riskShots+"review-destroy-armed.png")
	screenshotAt(t, b, riskShots+"review-destroy-1280.png", 1280, 800, false)
	b.do(t, "reset the viewport", chromedp.ResetViewport())
	b.do(t, "open the create's review", chromedp.Navigate(app.URL+paths.RunReview(low.ID)), chromedp.WaitVisible(chromedp.ID("approve")))
	require.Equal(t, "Approve this plan", text(t, b, chromedp.ID("approve")))
	require.NotContains(t, attribute(t, b, chromedp.ID("approve"), "class"), "danger")
	decisionPicture(t, b, riskShots+"review-create-decision.png")
	screenshotAt(t, b, riskShots+"review-create-1280.png", 1280, 800, false)
	b.do(t, "reset the viewport", chromedp.ResetViewport())
	b.do(t, "open the runs list", chromedp.Navigate(app.URL+paths.Runs()), chromedp.WaitVisible(chromedp.CSS(`[data-testid="runs"]`)))
	requireAccessible(t, b, "the runs list")
	screenshotAt(t, b, riskShots+"runs-390.png", 390, 844, true)
	b.do(t, "reset the viewport", chromedp.ResetViewport())

	// A double click on the production run's approve button, then a late click where
	// the button was.
	b.do(t, "open the production run's review", chromedp.Navigate(app.URL+paths.RunReview(high.ID)), chromedp.WaitVisible(chromedp.ID("approve")),
		chromedp.ScrollIntoView(chromedp.ID("approve")))
	at := run(t, b, "find the approve button", chromedp.Evaluate[[]float64](
		`(r => [r.x + r.width / 2, r.y + r.height / 2])(document.getElementById("approve").getBoundingClientRect())`))
	markPage(t, b)
	b.do(t, "double-click approve", chromedp.DoubleClick(chromedp.ID("approve"), chromedp.NodeVisible))
	waitForNewPage(t, b, "decided="+high.ID)
	b.do(t, "click again where the button was", chromedp.MouseClickXY(at[0], at[1]))
	// The decided page answered after the approval committed.
	var approved runmodel.Run
	require.NoError(t, app.DB.Where("id = ?", high.ID).Take(&approved).Error)
	require.NotNil(t, approved.ApprovedBy, "the run clicked is approved (now %s)", approved.State)
	for _, id := range []string{destroy.ID, low.ID} {
		var r runmodel.Run
		require.NoError(t, app.DB.Where("id = ?", id).Take(&r).Error)
		require.Equal(t, runmodel.PendingApproval, r.State, "run %s still waits: nothing else was approved", id)
		require.Nil(t, r.ApprovedBy)
	}
	b.do(t, "back to the decided page", chromedp.Navigate(app.URL+paths.Approvals()+"?decided="+high.ID),
		chromedp.WaitVisible(chromedp.CSS(`[data-testid="decided"]`)))
	require.Equal(t, "You approved risk-prod "+high.Label(), text(t, b, chromedp.ID("decided-title")))
	require.Equal(t, "risk-doomed "+destroy.Label(), text(t, b, chromedp.CSS(`[data-testid="next-waiting-link"]`)), "the next in the owner's order")
	require.Equal(t, 0, count(t, b, "#approve"), "no approve button on the page that follows a decision")
	requireAccessible(t, b, "the inbox after a decision")
	screenshotAt(t, b, riskShots+"decided-1280.png", 1280, 800, false)
	screenshotAt(t, b, riskShots+"decided-390.png", 390, 844, true)
	b.do(t, "reset the viewport", chromedp.ResetViewport())
	b.do(t, "follow the next waiting link", chromedp.Click(chromedp.CSS(`[data-testid="next-waiting-link"]`), chromedp.NodeVisible),
		chromedp.WaitVisible(chromedp.ID("arm-approve")))
	require.Equal(t, app.URL+paths.RunReview(destroy.ID), location(t, b))
	requireNoCSPViolations(t, b)
}

// decisionPicture saves a picture of the review's decision section alone.
func decisionPicture(t *testing.T, b *browser, path string) {
	t.Helper()
	png := run(t, b, "take a picture of the decision", chromedp.Screenshot(chromedp.CSS(`[data-testid="decision"]`), chromedp.NodeVisible))
	require.NoError(t, os.WriteFile(path, png, 0o644))
}
