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

const (
	rollbackConfirmScreenshot = "/tmp/gantry-rollback-confirm-1280.png"
	rollbackReviewScreenshot  = "/tmp/gantry-rollback-review-1280.png"
)

// TestRollbackInBrowser: a database on PostgreSQL 15, replaced by 16, is rolled back
// from its workspace page: "Roll back…" on state version 1 restates what it re-applies
// and what a rollback cannot bring back; "Plan the rollback" lands on the new run,
// whose page says it is that rollback, linking run #1, and whose review says the
// database comes back empty and what only a forward fix brings back, beside the risk 3
// it needs.
func TestRollbackInBrowser(t *testing.T) {
	chrome := chromePath(t)
	app := webtest.Start(t)
	operator := app.LoggedIn(t, operatorEmail)
	owner := app.LoggedIn(t, "owner@acme.test")
	dev := app.OrgEnvironmentID(t, "acme", "development")
	db := func(engine string) url.Values {
		return url.Values{"template": {"postgres"}, "environment": {dev}, "workspace": {"rollback-db"}, "kind": {"apply"},
			"inputs.name": {"orders"}, "inputs.engine_version": {engine}, "inputs.size": {"small"}, "inputs.storage_gb": {"20"},
			"inputs.backup_retention_days": {"7"}, "inputs.network_cidr": {"10.30.0.0/16"}}
	}
	first := waitForRunRow(t, app, requestRunHTTP(t, app, operator, db("15")), runmodel.Succeeded)
	upgrade := waitForRunRow(t, app, requestRunHTTP(t, app, operator, db("16")), runmodel.PendingApproval)
	approveHTTP(t, app, owner, upgrade)
	waitForRunRow(t, app, upgrade.ID, runmodel.Succeeded)

	b := startBrowser(t, chrome)
	signInAs(t, b, app, operatorEmail, operatorPassword, "Olivia")
	b.do(t, "open the workspace", chromedp.Navigate(app.URL+paths.Workspace(first.WorkspaceID)),
		chromedp.WaitVisible(chromedp.CSS(`[data-testid="workspace-rollback-boundary"]`)))
	require.Contains(t, text(t, b, chromedp.CSS(`[data-testid="workspace-rollback-boundary"]`)), "module.postgres.sandbox_database.this")
	b.do(t, "roll back to version 1", chromedp.Click(chromedp.CSS(`[data-testid="rollback-1"]`), chromedp.NodeVisible),
		chromedp.WaitVisible(chromedp.ID("confirm-rollback")))
	require.Contains(t, text(t, b, chromedp.CSS(`h1`)), "Roll back rollback-db to state version 1?")
	require.Contains(t, text(t, b, chromedp.CSS(`[data-testid="rollback-inputs"]`)), "15")
	requireAccessible(t, b, "the rollback confirmation")
	screenshotAt(t, b, rollbackConfirmScreenshot, 1280, 900, false)
	b.do(t, "reset the viewport", chromedp.ResetViewport())

	b.do(t, "plan the rollback", chromedp.Evaluate[chromedp.Void](`document.getElementById("confirm-rollback").click()`),
		chromedp.WaitVisible(chromedp.CSS(`[data-testid="run-state"]`)))
	require.Contains(t, text(t, b, chromedp.CSS(`.flashes`)), "Rollback of rollback-db requested")
	waitForRunState(t, b, "PENDING_APPROVAL")
	// The rollback's page says what it is and links the run whose configuration it re-applies.
	require.Regexp(t, `^Rollback of rollback-db to state version 1, re-applying the inputs and template version of run #1 \(applied \d{4}-\d\d-\d\d \d\d:\d\d UTC\)$`,
		text(t, b, chromedp.CSS(`[data-testid="run-origin"]`)))
	require.Equal(t, paths.Run(first.ID), attribute(t, b, chromedp.CSS(`[data-testid="origin-link"]`), "href"))
	screenshotAt(t, b, "/tmp/shots37/smaller/rollback-run-1366.png", 1366, 768, false)
	b.do(t, "reset the viewport", chromedp.ResetViewport())
	b.do(t, "open the review", chromedp.Click(chromedp.ID("review-link"), chromedp.NodeVisible),
		chromedp.WaitVisible(chromedp.CSS(`[data-testid="rollback"]`)))
	section := text(t, b, chromedp.CSS(`[data-testid="rollback"]`))
	require.Contains(t, section, "A rollback to state version 1")
	require.Contains(t, section, "is replaced: it comes back empty")
	require.Contains(t, section, "was replaced after serial 1")
	require.Contains(t, text(t, b, chromedp.CSS(`[data-testid="risk"]`)), "Risk class 3")
	requireAccessible(t, b, "the rollback's review")
	screenshotAt(t, b, rollbackReviewScreenshot, 1280, 1200, false)
	requireNoCSPViolations(t, b)
}
