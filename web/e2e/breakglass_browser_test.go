//go:build !fast

// Live: needs a browser (chromium, driven by chromedp) and live OpenTofu (bin/tofu, built from tools/tofu).

package e2e_test

import (
	"context"
	"fmt"
	"net/url"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"
	"github.com/stretchr/testify/require"

	"gantry/bench"
	"gantry/cmd/gantry/webtest"
	"gantry/models/breakglass"
	runmodel "gantry/models/run"
	"gantry/sandbox/api"
	"gantry/sandbox/client"
	"gantry/views/paths"
)

const (
	breakglassRequestShot   = "/tmp/gantry-breakglass-request-1280.png"
	breakglassOpenShot      = "/tmp/gantry-breakglass-open-1280.png"
	breakglassWorkspaceShot = "/tmp/gantry-breakglass-workspace-1280.png"
	breakglassCodifiedShot  = "/tmp/gantry-breakglass-codified-1280.png"
	breakglassPhoneShot     = "/tmp/gantry-breakglass-open-390.png"
	breakglassReviewShot    = "/tmp/gantry-breakglass-codify-review-1280.png"
	breakglassDriftRunShot  = "/tmp/gantry-drift-check-1280.png"
	breakglassListShot      = "/tmp/gantry-breakglass-list-1280.png"
	driftListShot           = "/tmp/gantry-drift-list-1280.png"
)

// TestBreakglassInBrowser: the manual change path as people click it, with live
// OpenTofu and the sandbox cloud. The requester asks for a window from the workspace
// page, an admin approves its terms on the window's page, the requester opens it and
// gets the credentials once, changes the database by hand with them, ends the window;
// the drift check that follows shows on the workspace page as the window's drift; the
// requester asks for the codification, the admin approves it on its review page, and
// the window reads codified. Every page passes the accessibility check.
func TestBreakglassInBrowser(t *testing.T) {
	chrome := chromePath(t)
	app := webtest.StartLive(t, webtest.LiveOptions{})
	operator := app.LoggedIn(t, operatorEmail)
	admin := app.LoggedIn(t, "admin@acme.test")
	staging := app.OrgEnvironmentID(t, "acme", "staging")
	applied := waitForRunRow(t, app.App, requestRunHTTP(t, app.App, operator, url.Values{"template": {"postgres"}, "environment": {staging},
		"workspace": {"glass-db"}, "kind": {"apply"}, "inputs.name": {"glass"}, "inputs.engine_version": {"16"}, "inputs.size": {"small"},
		"inputs.storage_gb": {"20"}, "inputs.backup_retention_days": {"7"}, "inputs.network_cidr": {"10.40.0.0/16"}}), runmodel.PendingApproval)
	approveHTTP(t, app.App, admin, applied)
	waitForRunRow(t, app.App, applied.ID, runmodel.Succeeded)
	ws := applied.WorkspaceID

	op := startBrowser(t, chrome)
	signInAs(t, op, app.App, operatorEmail, operatorPassword, "Olivia")
	op.do(t, "open the workspace", chromedp.Navigate(app.URL+paths.Workspace(ws)), chromedp.WaitVisible(chromedp.ID("ask-window")))
	require.Contains(t, text(t, op, chromedp.CSS(`[data-testid="workspace-drift"]`)), "Not checked yet")
	op.do(t, "ask for a window", chromedp.Click(chromedp.ID("ask-window"), chromedp.NodeVisible), chromedp.WaitVisible(chromedp.ID("request-window")))
	requireAccessible(t, op, "the break-glass request form")
	screenshotAt(t, op, breakglassRequestShot, 1280, 900, false)
	op.do(t, "reset the viewport", chromedp.ResetViewport())
	op.do(t, "say why and for how long",
		chromedp.SendKeys(chromedp.ID("reason"), "INC-77: database out of memory, resize by hand"),
		chromedp.SetValue(chromedp.ID("duration"), "30"),
		chromedp.Evaluate[chromedp.Void](`document.getElementById("request-window").click()`),
		chromedp.WaitVisible(chromedp.CSS(`[data-testid="window-state"]`)))
	require.Equal(t, "REQUESTED", attribute(t, op, chromedp.CSS(`[data-testid="window-state"]`), "data-state"))
	require.Contains(t, text(t, op, chromedp.CSS(`.flashes`)), "an admin other than you approves it")
	require.Zero(t, count(t, op, "#approve-window"), "the requester is offered no approval")
	id := strings.TrimPrefix(location(t, op), app.URL+"/breakglass/")
	requireAccessible(t, op, "a requested window")

	ad := startBrowser(t, chrome)
	signInAs(t, ad, app.App, "admin@acme.test", "admin-acme", "Adam")
	ad.do(t, "open the window", chromedp.Navigate(app.URL+paths.BreakglassWindow(id)), chromedp.WaitVisible(chromedp.ID("approve-window")))
	require.Contains(t, text(t, ad, chromedp.CSS(`[data-testid="window-why"]`)), "INC-77")
	ad.do(t, "approve its terms", chromedp.Click(chromedp.ID("approve-window"), chromedp.NodeVisible),
		chromedp.WaitVisible(chromedp.CSS(`.flashes`)))
	require.Equal(t, "APPROVED", attribute(t, ad, chromedp.CSS(`[data-testid="window-state"]`), "data-state"))

	op.do(t, "come back to the window", chromedp.Navigate(app.URL+paths.BreakglassWindow(id)), chromedp.WaitVisible(chromedp.ID("open-window")))
	require.Contains(t, text(t, op, chromedp.CSS(`[data-testid="window-clock"]`)), "open it by")
	op.do(t, "open it", chromedp.Click(chromedp.ID("open-window"), chromedp.NodeVisible),
		chromedp.WaitVisible(chromedp.CSS(`[data-testid="window-credentials"]`)))
	token := strings.TrimSpace(value(t, op, chromedp.ID("window-token")))
	require.NotEmpty(t, token)
	require.Equal(t, "OPEN", attribute(t, op, chromedp.CSS(`[data-testid="window-state"]`), "data-state"))
	requireAccessible(t, op, "an open window with its credentials")
	screenshotAt(t, op, breakglassOpenShot, 1280, 1100, false)
	screenshotAt(t, op, breakglassPhoneShot, 390, 900, true)
	op.do(t, "reset the viewport", chromedp.ResetViewport())

	// The change by hand, with the window's credentials.
	ctx := context.Background()
	glass, err := client.New(app.CloudURL, token)
	require.NoError(t, err)
	dbs, err := glass.List(ctx, "database")
	require.NoError(t, err)
	require.Len(t, dbs, 1, "the token sees its workspace's database")
	attrs := map[string]any{}
	k, _ := api.Lookup("database")
	for name, v := range dbs[0].Attributes {
		if a, _ := k.Attr(name); !a.Computed {
			attrs[name] = v
		}
	}
	attrs["size"] = "large"
	_, err = glass.Update(ctx, "database", dbs[0].ID, attrs)
	require.NoError(t, err)

	op.do(t, "look at the workspace while the window is open", chromedp.Navigate(app.URL+paths.Workspace(ws)),
		chromedp.WaitVisible(chromedp.CSS(`[data-testid="workspace-window"]`)))
	banner := text(t, op, chromedp.CSS(`[data-testid="workspace-window"]`))
	require.Contains(t, banner, "open until")
	require.Contains(t, banner, "No pipeline run of this workspace is approved or applied until it ends.")
	requireAccessible(t, op, "a workspace with an open window")
	screenshotAt(t, op, breakglassWorkspaceShot, 1280, 1400, false)
	op.do(t, "reset the viewport", chromedp.ResetViewport())

	// Ended early; the drift check that follows attributes the change to the window.
	op.do(t, "end the window", chromedp.Navigate(app.URL+paths.BreakglassWindow(id)), chromedp.WaitVisible(chromedp.ID("end-window")),
		chromedp.Click(chromedp.ID("end-window"), chromedp.NodeVisible), chromedp.WaitVisible(chromedp.CSS(`.flashes`)))
	require.Equal(t, "AWAITING_CODIFICATION", attribute(t, op, chromedp.CSS(`[data-testid="window-state"]`), "data-state"))
	var w breakglass.Window
	require.NoError(t, app.DB.Where("id = ?", id).Take(&w).Error)
	require.NotNil(t, w.DriftCheckRunID)
	check := waitForRunRow(t, app.App, *w.DriftCheckRunID, runmodel.Planned)
	require.Equal(t, runmodel.DriftExpected, check.DriftStatus)
	op.do(t, "see the drift on the workspace", chromedp.Navigate(app.URL+paths.Workspace(ws)),
		chromedp.WaitVisible(chromedp.CSS(`[data-testid="drift-status"]`)))
	require.Equal(t, "Drift from a break-glass window", text(t, op, chromedp.CSS(`[data-testid="drift-status"]`)))
	require.Equal(t, string(runmodel.DriftExpected), attribute(t, op, chromedp.CSS(`[data-testid="drift-status"]`), "data-state"))
	require.Contains(t, text(t, op, chromedp.CSS(`[data-testid="drift-resources"]`)), "through break-glass window "+id)
	requireAccessible(t, op, "a workspace with drift")
	op.do(t, "open the drift check", chromedp.Click(chromedp.CSS(`[data-testid="drift-run"]`), chromedp.NodeVisible),
		chromedp.WaitVisible(chromedp.CSS(`[data-testid="run-drift"]`)))
	require.Contains(t, text(t, op, chromedp.CSS(`[data-testid="run-window"]`)), "Checks the drift after break-glass window "+id)
	requireAccessible(t, op, "a drift check's run page")
	screenshotAt(t, op, breakglassDriftRunShot, 1280, 1200, false)
	op.do(t, "reset the viewport", chromedp.ResetViewport())

	// Codified: asked for by the requester, approved by the admin on the review page.
	op.do(t, "ask for the codification", chromedp.Navigate(app.URL+paths.BreakglassWindow(id)), chromedp.WaitVisible(chromedp.ID("codify-window")),
		chromedp.Click(chromedp.ID("codify-window"), chromedp.NodeVisible), chromedp.WaitVisible(chromedp.CSS(`[data-testid="run-state"]`)))
	require.Contains(t, text(t, op, chromedp.CSS(`[data-testid="run-window"]`)), "Codifies break-glass window "+id)
	waitForRunState(t, op, "PENDING_APPROVAL")
	codify := strings.TrimPrefix(location(t, op), app.URL+"/runs/")
	ad.do(t, "review the codification", chromedp.Navigate(app.URL+paths.RunReview(codify)), chromedp.WaitVisible(chromedp.ID("approve")))
	require.Contains(t, text(t, ad, chromedp.CSS(`[data-testid="codification"]`)), "Its apply changes nothing in the cloud")
	requireAccessible(t, ad, "a codification's review")
	screenshotAt(t, ad, breakglassReviewShot, 1280, 1400, false)
	ad.do(t, "reset the viewport", chromedp.ResetViewport())
	ad.do(t, "approve it", chromedp.Evaluate[chromedp.Void](`document.getElementById("approve").click()`),
		chromedp.WaitVisible(chromedp.CSS(`[data-testid="run-state"]`)))
	waitForRunState(t, ad, "SUCCEEDED")
	// The codification's success starts a drift check, and the drift check's result
	// codifies the window in the transaction that moves that run (which notifies): any
	// change of a run of the organization is worth a look.
	wake, stop := app.Server.Changes.Subscribe(w.OrganizationID, "")
	defer stop()
	bench.Eventually(t, "window "+id+" to be codified", liveBase, func() (bool, any) {
		require.NoError(t, app.DB.Where("id = ?", id).Take(&w).Error)
		if w.State == breakglass.Closed {
			t.Fatalf("window %s was closed, not codified: %s", id, w.StateReason)
		}
		return w.State == breakglass.Codified, fmt.Sprintf("%s (%s)", w.State, w.StateReason)
	}, bench.Wake(wake))
	op.do(t, "see the window codified", chromedp.Navigate(app.URL+paths.BreakglassWindow(id)),
		chromedp.WaitVisible(chromedp.CSS(`[data-testid="window-state"]`)))
	require.Equal(t, "CODIFIED", attribute(t, op, chromedp.CSS(`[data-testid="window-state"]`), "data-state"))
	require.Zero(t, count(t, op, "#codify-window"), "nothing is left to codify")
	require.Contains(t, text(t, op, chromedp.CSS(`[data-testid="window-notes"]`)), "not in its inputs")
	requireAccessible(t, op, "a codified window")
	screenshotAt(t, op, breakglassCodifiedShot, 1280, 1000, false)
	op.do(t, "open the drift list", chromedp.Navigate(app.URL+paths.Drift()), chromedp.WaitVisible(chromedp.CSS(`[data-testid="drift-list"]`)))
	require.Equal(t, string(runmodel.DriftClean), attribute(t, op, chromedp.CSS(`[data-testid="drift-list-row"] .state`), "data-state"))
	require.Equal(t, "No drift", text(t, op, chromedp.CSS(`[data-testid="drift-list-row"] .state`)))
	requireAccessible(t, op, "the drift list")
	screenshotAt(t, op, driftListShot, 1280, 700, false)
	op.do(t, "open the list of windows", chromedp.Click(chromedp.ID("windows-link"), chromedp.NodeVisible),
		chromedp.WaitVisible(chromedp.CSS(`[data-testid="windows"]`)))
	require.Equal(t, "CODIFIED", attribute(t, op, chromedp.CSS(`[data-testid="windows"] [data-state]`), "data-state"))
	require.Contains(t, text(t, op, chromedp.CSS(`[data-testid="windows"]`)), "Codified")
	requireAccessible(t, op, "the list of break-glass windows")
	screenshotAt(t, op, breakglassListShot, 1280, 700, false)
	requireNoCSPViolations(t, op)
	requireNoCSPViolations(t, ad)
}
