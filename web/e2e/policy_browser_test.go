//go:build !fast

// Live: needs a browser (chromium, driven by chromedp).

package e2e_test

import (
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"
	"github.com/stretchr/testify/require"

	"gantry/cmd/gantry/webtest"
	runmodel "gantry/models/run"
	"gantry/views/paths"
)

// Policy blocks a person can act on (issue 37), as the requester and the approver meet
// them: the blocked run's page opens with the rule that failed and its message, and
// "Edit and resubmit" fixes the request; the review's panel takes the override.

// backupMessage is what database_protection says of a staging database kept with
// too few days of backups.
const backupMessage = "backup_retention_days must be at least 7 in staging"

// policyShot is where a screenshot of this part goes, for a person to look at.
func policyShot(t *testing.T, name string) string {
	t.Helper()
	dir := filepath.Join(os.TempDir(), "shots37", "policy")
	require.NoError(t, os.MkdirAll(dir, 0o755))
	return filepath.Join(dir, name+".png")
}

// blockedDatabase requests a staging database with one day of backups, which the
// soft-mandatory database_protection rule blocks, and returns the run's id.
func blockedDatabase(t *testing.T, app *webtest.App, workspace string) string {
	t.Helper()
	operator := app.LoggedIn(t, operatorEmail)
	id := requestRunHTTP(t, app, operator, url.Values{"template": {"postgres"}, "environment": {app.OrgEnvironmentID(t, "acme", "staging")},
		"workspace": {workspace}, "kind": {"apply"}, "inputs.name": {workspace}, "inputs.engine_version": {"16"}, "inputs.size": {"small"},
		"inputs.storage_gb": {"20"}, "inputs.backup_retention_days": {"1"}, "inputs.network_cidr": {"10.30.0.0/16"}})
	require.Equal(t, "soft_failed", waitForRunRow(t, app, id, runmodel.PolicyBlocked).PolicyOutcome)
	return id
}

// TestBlockedRunIsResubmittedInBrowser: the requester opens her blocked run; the first
// thing under its state is the failed rule with its whole message; "Edit and resubmit"
// opens the form filled in with her request, she fixes the backups and the new run
// passes the policy and waits for its approval.
func TestBlockedRunIsResubmittedInBrowser(t *testing.T) {
	chrome := chromePath(t)
	app := webtest.Start(t)
	id := blockedDatabase(t, app, "orders")

	b := startBrowser(t, chrome)
	signInAs(t, b, app, operatorEmail, operatorPassword, "Olivia")
	b.do(t, "open the blocked run", chromedp.Navigate(app.URL+paths.Run(id)), chromedp.WaitVisible(`[data-testid="policy-block"]`))
	first := run(t, b, "find what follows the run's state", chromedp.Evaluate[string](
		`document.querySelector('[data-testid="run-state"]').closest("p").nextElementSibling.dataset.testid`))
	require.Equal(t, "policy-block", first, "the block comes first, right under the state")
	require.Contains(t, text(t, b, chromedp.CSS(`[data-testid="blocked-rule"][data-rule="database_protection"]`)), "Soft-mandatory")
	message := text(t, b, chromedp.CSS(`[data-testid="blocked-message"]`))
	require.Contains(t, message, backupMessage, "the message in full")
	clipped := run(t, b, "measure the message", chromedp.Evaluate[bool](
		`(el => el.scrollWidth > el.clientWidth)(document.querySelector('[data-testid="blocked-message"]'))`))
	require.False(t, clipped, "the message is not clipped")
	require.Zero(t, count(t, b, "#review-override"), "the requester overrides nothing")
	requireAccessible(t, b, "a policy-blocked run as its requester")
	screenshotAt(t, b, policyShot(t, "blocked-run-requester"), 1280, 900, false)
	screenshotAt(t, b, policyShot(t, "blocked-run-requester-390"), 390, 844, true)
	b.do(t, "reset the viewport", chromedp.ResetViewport())

	b.do(t, "edit and resubmit", chromedp.Click(chromedp.ID("edit-resubmit"), chromedp.NodeVisible), chromedp.WaitVisible(chromedp.ID("request-form")))
	require.Equal(t, "1", value(t, b, chromedp.ID("input-backup_retention_days")), "the form holds the blocked request")
	require.Equal(t, "orders", value(t, b, chromedp.ID("workspace")))
	retype(t, b, "input-backup_retention_days", "7")
	screenshotAt(t, b, policyShot(t, "resubmit-form"), 1280, 900, false)
	b.do(t, "reset the viewport", chromedp.ResetViewport())
	b.do(t, "submit the fixed request", chromedp.Click(chromedp.ID("submit-request"), chromedp.NodeVisible),
		chromedp.WaitVisible(`[data-testid="run-state"]`))
	again := strings.TrimPrefix(location(t, b), app.URL+"/runs/")
	require.NotEqual(t, id, again, "a new run")
	r := waitForRunRow(t, app, again, runmodel.PendingApproval)
	require.Equal(t, "pass", r.PolicyOutcome)
	b.do(t, "reload the new run", chromedp.Reload(), chromedp.WaitVisible(`[data-testid="review-summary"]`))
	require.Zero(t, count(t, b, `[data-testid="policy-block"]`), "nothing blocks the fixed request")
	screenshotAt(t, b, policyShot(t, "resubmitted-run"), 1280, 900, false)
	b.do(t, "reset the viewport", chromedp.ResetViewport())
	requireNoCSPViolations(t, b)
}

// TestOverrideFromTheDecisionPanelInBrowser: an admin opens the blocked run's review;
// the panel at the top explains the block and holds the override; a reason too short
// comes back at its field, a good one releases the run, which then waits for someone
// else's approval (four eyes): the admin is told why they may not approve it.
func TestOverrideFromTheDecisionPanelInBrowser(t *testing.T) {
	chrome := chromePath(t)
	app := webtest.Start(t)
	id := blockedDatabase(t, app, "ledger")

	b := startBrowser(t, chrome)
	signInAs(t, b, app, adminEmail, adminPassword, adminFirst)
	b.do(t, "open the review", chromedp.Navigate(app.URL+paths.RunReview(id)), chromedp.WaitVisible(chromedp.ID("override-database_protection")))
	panel := text(t, b, chromedp.CSS(`[data-testid="policy-block"]`))
	require.Contains(t, panel, backupMessage)
	require.Contains(t, panel, "Soft-mandatory")
	rows := run(t, b, "read the policy table's order", chromedp.Evaluate[[]string](
		`[...document.querySelectorAll('[data-testid="policy-row"]')].map(r => r.dataset.passed)`))
	require.NotEmpty(t, rows)
	require.Equal(t, "false", rows[0], "failed rules head the table")
	requireAccessible(t, b, "the decision panel offering the override")
	screenshotAt(t, b, policyShot(t, "review-panel-admin"), 1280, 900, false)
	b.do(t, "reset the viewport", chromedp.ResetViewport())

	b.do(t, "override with a short reason",
		chromedp.SendKeys(chromedp.ID("override-database_protection"), "nightly"),
		chromedp.Click(chromedp.ID("override-database_protection-submit"), chromedp.NodeVisible),
		chromedp.WaitVisible(chromedp.ID("override-database_protection-error")),
	)
	require.Equal(t, "nightly", value(t, b, chromedp.ID("override-database_protection")), "what was typed is kept")
	require.Equal(t, "true", attribute(t, b, chromedp.ID("override-database_protection"), "aria-invalid"))
	screenshotAt(t, b, policyShot(t, "override-short-reason"), 1280, 900, false)
	b.do(t, "reset the viewport", chromedp.ResetViewport())
	require.Equal(t, runmodel.PolicyBlocked, waitForRunRow(t, app, id, runmodel.PolicyBlocked).State)

	retype(t, b, "override-database_protection", "exported nightly to the archive")
	b.do(t, "override with a reason", chromedp.Click(chromedp.ID("override-database_protection-submit"), chromedp.NodeVisible),
		chromedp.WaitVisible(chromedp.CSS(`.flashes .flash-success`)))
	require.Contains(t, text(t, b, chromedp.CSS(`.flashes .flash-success`)), "Override recorded for database_protection")
	waitForRunRow(t, app, id, runmodel.PendingApproval)
	b.do(t, "reload the review", chromedp.Reload(), chromedp.WaitVisible(`[data-testid="risk"]`))
	require.Zero(t, count(t, b, "#approve"), "who overrode does not approve")
	require.Zero(t, count(t, b, `[data-testid="policy-block"]`), "nothing blocks the run any more")
	require.Contains(t, text(t, b, chromedp.CSS(`[data-testid="reject-only"]`)),
		"You overrode a policy failure of this run: four eyes means someone else approves it.")
	screenshotAt(t, b, policyShot(t, "overridden-admin"), 1280, 900, false)
	b.do(t, "reset the viewport", chromedp.ResetViewport())
	requireNoCSPViolations(t, b)
}
