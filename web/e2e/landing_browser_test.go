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

// shots37 is where this test's screenshots go.
const shots37 = "/tmp/shots37/controls"

// TestLandingAndControlsByRoleInBrowser: the viewer lands on the runs they may see and
// where to look, and their workspace page offers no Change, Promote or Destroy (an
// operator's does); the catalog offers them no "Request". The auditor lands on the
// compliance summary. Each page passes axe-core.
func TestLandingAndControlsByRoleInBrowser(t *testing.T) {
	chrome := chromePath(t)
	require.NoError(t, os.MkdirAll(shots37, 0o755))
	app := webtest.Start(t)
	operator := app.LoggedIn(t, operatorEmail)
	dev := app.OrgEnvironmentID(t, "acme", "development")
	resp := app.PostForm(t, operator, "/requests", url.Values{"_csrf": {app.CSRF(t, operator)}, "template": {"bucket"}, "environment": {dev},
		"workspace": {"landing-assets"}, "kind": {"apply"}, "inputs.name": {"landing-assets"}, "inputs.retention_days": {"30"}, "inputs.region": {"eu-west"}})
	webtest.ReadBody(t, resp)
	require.Equal(t, http.StatusSeeOther, resp.StatusCode)
	r := waitForRunRow(t, app, strings.TrimPrefix(resp.Header.Get("Location"), "/runs/"), runmodel.Succeeded)
	workspace := paths.Workspace(r.WorkspaceID)

	// The viewer: recent runs and where to look, nothing to request.
	viewer := startBrowser(t, chrome)
	signInAs(t, viewer, app, "viewer@acme.test", "viewer-acme", "Victor")
	viewer.do(t, "open the viewer's landing page", chromedp.Navigate(app.URL+"/"), chromedp.WaitVisible(chromedp.CSS(`[data-testid="dashboard-recent"]`)))
	require.Contains(t, text(t, viewer, chromedp.CSS(`[data-testid="dashboard-recent"]`)), "landing-assets")
	require.Contains(t, text(t, viewer, chromedp.CSS(`[data-testid="dashboard-look"]`)), "Workspaces")
	require.Zero(t, count(t, viewer, `[data-testid="new-request"]`), "a viewer requests nothing")
	requireAccessible(t, viewer, "the viewer's landing page")
	screenshotAt(t, viewer, shots37+"/viewer-landing-1280.png", 1280, 900, false)
	viewer.do(t, "reset the viewport", chromedp.ResetViewport())

	viewer.do(t, "open the workspace as the viewer", chromedp.Navigate(app.URL+workspace), chromedp.WaitVisible(chromedp.CSS(`main h1`)))
	for _, id := range []string{"#change-workspace", "#promote-workspace", "#destroy-workspace", "#ask-window"} {
		require.Zero(t, count(t, viewer, id), "the viewer is offered %s", id)
	}
	requireAccessible(t, viewer, "the viewer's workspace page")
	screenshotAt(t, viewer, shots37+"/viewer-workspace-1280.png", 1280, 900, false)
	viewer.do(t, "reset the viewport", chromedp.ResetViewport())

	viewer.do(t, "open the catalog as the viewer", chromedp.Navigate(app.URL+paths.Catalog()), chromedp.WaitVisible(chromedp.CSS(`[data-testid="catalog"]`)))
	require.Positive(t, count(t, viewer, `[data-testid="catalog"] article`))
	require.Zero(t, count(t, viewer, `[data-testid="catalog"] a.button`), "no Request for a viewer")
	requireAccessible(t, viewer, "the viewer's catalog")

	// The operator, for contrast: the same workspace offers the changes.
	op := startBrowser(t, chrome)
	signInAs(t, op, app, operatorEmail, operatorPassword, "Olivia")
	op.do(t, "open the workspace as the operator", chromedp.Navigate(app.URL+workspace), chromedp.WaitVisible(chromedp.ID("change-workspace")))
	for _, id := range []string{"#change-workspace", "#promote-workspace", "#destroy-workspace"} {
		require.Equal(t, 1, count(t, op, id), "the operator is offered %s", id)
	}
	op.do(t, "open the catalog as the operator", chromedp.Navigate(app.URL+paths.Catalog()), chromedp.WaitVisible(chromedp.CSS(`[data-testid="catalog"] a.button`)))

	// The auditor: the compliance summary first.
	auditor := startBrowser(t, chrome)
	signInAs(t, auditor, app, auditorEmail, auditorPassword, "Audrey")
	auditor.do(t, "open the auditor's landing page", chromedp.Navigate(app.URL+"/"), chromedp.WaitVisible(chromedp.CSS(`[data-testid="dashboard-compliance"]`)))
	require.Contains(t, text(t, auditor, chromedp.CSS(`[data-testid="chain-state"]`)), "Audit chain:")
	for _, id := range []string{"unevidenced", "self-approved", "standing", "open-windows", "overrides"} {
		require.Equal(t, 1, count(t, auditor, `[data-testid="dashboard-compliance"] [data-testid="`+id+`"]`), id)
	}
	require.Contains(t, text(t, auditor, chromedp.CSS(`[data-testid="dashboard-recent"]`)), "landing-assets")
	require.Zero(t, count(t, auditor, `[data-testid="new-request"]`))
	requireAccessible(t, auditor, "the auditor's landing page")
	screenshotAt(t, auditor, shots37+"/auditor-landing-1280.png", 1280, 1100, false)
	auditor.do(t, "reset the viewport", chromedp.ResetViewport())
	screenshotAt(t, auditor, shots37+"/auditor-landing-390.png", 390, 844, true)
}
