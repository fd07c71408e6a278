//go:build !fast

// Live: needs a browser (chromium, driven by chromedp).

package e2e_test

import (
	"net/url"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"
	"github.com/stretchr/testify/require"

	"gantry/cmd/gantry/webtest"
	runmodel "gantry/models/run"
	"gantry/views/paths"
)

// Artifacts for a human; not assertions.
const (
	destroyScreenshot   = "/tmp/gantry-destroy-1280.png"
	destroyedScreenshot = "/tmp/gantry-destroyed-1280.png"
	archivedScreenshot  = "/tmp/gantry-archived-1280.png"
)

// TestDestroyFromWorkspaceInBrowser: a requester opens an applied workspace, chooses
// Destroy…, reads what it removes (the resources in state), types a wrong name (refused
// at the field, nothing requested), then the workspace's name; the destroy run waits on
// the risk-3 path: an admin may not approve it, an owner freshly signed in approves it
// with DESTROY and a reason, and the workspace is left with nothing in state.
func TestDestroyFromWorkspaceInBrowser(t *testing.T) {
	chrome := chromePath(t)
	app := webtest.Start(t)
	operatorHTTP := app.LoggedIn(t, operatorEmail)
	dev := app.OrgEnvironmentID(t, "acme", "development")
	applied := waitForRunRow(t, app, requestRunHTTP(t, app, operatorHTTP, url.Values{"template": {"bucket"}, "environment": {dev},
		"workspace": {"old-exports"}, "kind": {"apply"}, "inputs.name": {"old-exports"}}), runmodel.Succeeded)

	b := startBrowser(t, chrome)
	signInAs(t, b, app, operatorEmail, operatorPassword, "Olivia")
	b.do(t, "open the workspace", chromedp.Navigate(app.URL+paths.Workspace(applied.WorkspaceID)),
		chromedp.WaitVisible(chromedp.CSS(`[data-testid="workspace-resources"]`)))
	inState := text(t, b, chromedp.CSS(`[data-testid="workspace-resources"] tbody`))
	require.Contains(t, inState, "sandbox_bucket")
	b.do(t, "choose Destroy…", chromedp.Click(chromedp.ID("destroy-workspace"), chromedp.NodeVisible),
		chromedp.WaitVisible(chromedp.CSS(`[data-testid="destroy-resources"]`)))
	restated := text(t, b, chromedp.CSS(`[data-testid="destroy-resources"] tbody`))
	require.Equal(t, inState, restated, "the confirmation restates exactly what is in state")
	require.Contains(t, text(t, b, chromedp.CSS(`main`)), "risk 3")
	screenshotAt(t, b, destroyScreenshot, 1280, 800, false)
	b.do(t, "reset the viewport", chromedp.ResetViewport())

	b.do(t, "type another name", chromedp.SendKeys(chromedp.ID("confirm"), "old-export"),
		chromedp.Click(chromedp.ID("request-destroy"), chromedp.NodeVisible),
		chromedp.WaitVisible(chromedp.CSS(`[data-testid="error-summary"]`)))
	require.NotEmpty(t, text(t, b, chromedp.CSS(`[data-testid="error-confirm"]`)))
	require.Equal(t, "true", attribute(t, b, chromedp.ID("confirm"), "aria-invalid"))
	var runs int64
	require.NoError(t, app.DB.Raw("SELECT count(*) FROM runs WHERE workspace_id = ?", applied.WorkspaceID).Scan(&runs).Error)
	require.EqualValues(t, 1, runs, "a wrong name requests nothing")

	// The refused form comes back empty (a confirmation is typed, never kept).
	require.Empty(t, attribute(t, b, chromedp.ID("confirm"), "value"))
	b.do(t, "type the workspace's name", chromedp.WaitReady(chromedp.ID("confirm")), chromedp.SendKeys(chromedp.ID("confirm"), "old-exports"),
		chromedp.Click(chromedp.ID("request-destroy"), chromedp.NodeVisible),
		chromedp.WaitVisible(chromedp.CSS(`[data-testid="run-state"]`)))
	id := strings.TrimPrefix(strings.TrimPrefix(location(t, b), app.URL), "/runs/")
	destroy := waitForRunRow(t, app, id, runmodel.PendingApproval)
	require.Equal(t, runmodel.KindDestroy, destroy.Kind)
	require.Equal(t, 3, *destroy.RiskClass)
	require.True(t, runmodel.RequirementOf(destroy).Elevated)

	admin := startBrowser(t, chrome)
	signInAs(t, admin, app, adminEmail, adminPassword, adminFirst)
	admin.do(t, "open the destroy's review", chromedp.Navigate(app.URL+paths.RunReview(id)), chromedp.WaitVisible(chromedp.CSS(`main h1`)))
	require.Zero(t, count(t, admin, "#approve"), "an admin does not decide a risk-3 run")

	owner := startBrowser(t, chrome)
	signInAs(t, owner, app, ownerEmail, ownerPassword, ownerFirst)
	owner.do(t, "arm the destroy's approval", chromedp.Navigate(app.URL+paths.RunReview(id)), chromedp.Click(chromedp.ID("arm-approve"), chromedp.NodeVisible))
	waitForFocus(t, owner, "approve-confirmation-body") // the confirmation takes the focus: type after it moved
	owner.do(t, "approve the destroy",
		chromedp.SendKeys(chromedp.ID("approve-confirm"), runmodel.ConfirmWord),
		chromedp.SendKeys(chromedp.ID("approve-reason"), goodReason),
		chromedp.Click(chromedp.ID("approve"), chromedp.NodeVisible),
		chromedp.WaitVisible(chromedp.CSS(`.flashes .flash-success`)))
	waitForRunRow(t, app, id, runmodel.Succeeded)
	b.do(t, "open the workspace again", chromedp.Navigate(app.URL+paths.Workspace(applied.WorkspaceID)),
		chromedp.WaitVisible(chromedp.CSS(`[data-testid="workspace-no-resources"], [data-testid="workspace-resources"]`)))
	require.Zero(t, count(t, b, `[data-testid="workspace-resources"] tbody tr`), "nothing left in state")
	require.Zero(t, count(t, b, "#destroy-workspace"), "nothing left to destroy")

	// The page tells the truth about the destroy and offers to archive the workspace,
	// which then leaves the list and keeps its page.
	said := text(t, b, chromedp.CSS(`[data-testid="workspace-no-resources"]`))
	require.Contains(t, said, "Destroyed by run #2")
	require.Contains(t, said, "state history is kept")
	requireAccessible(t, b, "the destroyed workspace")
	screenshotAt(t, b, destroyedScreenshot, 1280, 900, false)
	b.do(t, "reset the viewport", chromedp.ResetViewport())
	b.do(t, "archive it", chromedp.Click(chromedp.ID("archive-workspace"), chromedp.NodeVisible),
		chromedp.WaitVisible(chromedp.CSS(`[data-testid="workspace-archived"]`)))
	require.Contains(t, text(t, b, chromedp.CSS(`.flashes`)), "old-exports in development is archived")
	require.Zero(t, count(t, b, "#archive-workspace"), "archived once")
	screenshotAt(t, b, archivedScreenshot, 1280, 900, false)
	b.do(t, "reset the viewport", chromedp.ResetViewport())
	b.do(t, "list the workspaces", chromedp.Navigate(app.URL+paths.Workspaces()+"?q=old-exports"), chromedp.WaitVisible(chromedp.CSS(`main h1`)))
	require.Zero(t, count(t, b, `a[href="`+paths.Workspace(applied.WorkspaceID)+`"]`), "an archived workspace leaves the list")
	b.do(t, "list the archived ones", chromedp.Navigate(app.URL+paths.Workspaces()+"?q=old-exports&archived=on"), chromedp.WaitVisible(chromedp.CSS(`main h1`)))
	require.Equal(t, 1, count(t, b, `[data-testid="workspaces"] a[href="`+paths.Workspace(applied.WorkspaceID)+`"]`), "listed on request")
}
