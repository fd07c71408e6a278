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

const promotionBlockedScreenshot = "/tmp/gantry-promotion-blocked-1280.png"

// TestPromotionInBrowser: from a staging database's page, "Promote…" opens the form
// with production chosen and the applied inputs; a changed network range comes back
// refused with both values side by side, focus on the summary; with the range put
// back and only the storage raised, the promotion is requested and waits for
// production's approver; its run page says it is that promotion, linking the staging run.
func TestPromotionInBrowser(t *testing.T) {
	chrome := chromePath(t)
	app := webtest.Start(t)
	operator := app.LoggedIn(t, operatorEmail)
	admin := app.LoggedIn(t, adminEmail)
	staging := app.OrgEnvironmentID(t, "acme", "staging")
	waiting := waitForRunRow(t, app, requestRunHTTP(t, app, operator, url.Values{"template": {"postgres"}, "environment": {staging},
		"workspace": {"orders-db"}, "kind": {"apply"}, "inputs.name": {"orders"}, "inputs.engine_version": {"16"}, "inputs.size": {"small"},
		"inputs.storage_gb": {"20"}, "inputs.backup_retention_days": {"7"}, "inputs.network_cidr": {"10.30.0.0/16"}}), runmodel.PendingApproval)
	approveHTTP(t, app, admin, waiting)
	waitForRunRow(t, app, waiting.ID, runmodel.Succeeded)

	b := startBrowser(t, chrome)
	signInAs(t, b, app, operatorEmail, operatorPassword, "Olivia")
	b.do(t, "open the workspace", chromedp.Navigate(app.URL+paths.Workspace(waiting.WorkspaceID)),
		chromedp.Click(chromedp.ID("promote-workspace"), chromedp.NodeVisible), chromedp.WaitVisible(chromedp.ID("promote")))
	require.Contains(t, run(t, b, "read the chosen environment", chromedp.Evaluate[string](`document.getElementById("environment").selectedOptions[0].text`)), "production (production, approval required)")
	require.Equal(t, "20", value(t, b, chromedp.ID("input-storage_gb")))
	requireAccessible(t, b, "the promotion form")
	require.True(t, run(t, b, "read whether the fixed range is read-only", chromedp.Evaluate[bool](`document.getElementById("input-network_cidr").readOnly`)),
		"a fixed input is drawn read-only")
	require.False(t, run(t, b, "read whether the storage is read-only", chromedp.Evaluate[bool](`document.getElementById("input-storage_gb").readOnly`)))

	set := func(id, v string) chromedp.Action[chromedp.Void] {
		return chromedp.Evaluate[chromedp.Void](`document.getElementById(` + jsString(id) + `).value = ` + jsString(v))
	}
	// A person cannot type into the fixed range; a stale or tampered form still sends a
	// changed one, which the promotion refuses side by side.
	b.do(t, "change the network range and promote", set("input-network_cidr", "10.40.0.0/16"),
		chromedp.Evaluate[chromedp.Void](`document.getElementById("promote").click()`),
		chromedp.WaitVisible(chromedp.CSS(`[data-testid="promotion-blocked"]`)))
	waitForFocus(t, b, "error-summary")
	row := text(t, b, chromedp.CSS(`[data-testid="difference-network_cidr"]`))
	require.Contains(t, row, "10.30.0.0/16")
	require.Contains(t, row, "10.40.0.0/16")
	require.Equal(t, "10.30.0.0/16", value(t, b, chromedp.ID("input-network_cidr")), "the fixed range is drawn again as the source has it")
	requireAccessible(t, b, "the refused promotion")
	screenshotAt(t, b, promotionBlockedScreenshot, 1280, 1000, false)
	b.do(t, "reset the viewport", chromedp.ResetViewport())

	b.do(t, "put the range back, raise the storage, promote", set("input-network_cidr", "10.30.0.0/16"), set("input-storage_gb", "50"),
		chromedp.Evaluate[chromedp.Void](`document.getElementById("promote").click()`),
		chromedp.WaitVisible(chromedp.CSS(`[data-testid="run-state"]`)))
	require.Contains(t, text(t, b, chromedp.CSS(`.flashes`)), "Promotion of orders-db requested")
	waitForRunState(t, b, "PENDING_APPROVAL")
	// The promoted run's page says what it is and links the staging run it promotes.
	require.Regexp(t, `^Promotion to production of orders-db #1 in staging \(applied \d{4}-\d\d-\d\d \d\d:\d\d UTC\)$`,
		text(t, b, chromedp.CSS(`[data-testid="run-origin"]`)))
	require.Equal(t, paths.Run(waiting.ID), attribute(t, b, chromedp.CSS(`[data-testid="origin-link"]`), "href"))
	screenshotAt(t, b, "/tmp/shots37/smaller/promotion-run-1366.png", 1366, 768, false)
	b.do(t, "reset the viewport", chromedp.ResetViewport())
	requireNoCSPViolations(t, b)
}
