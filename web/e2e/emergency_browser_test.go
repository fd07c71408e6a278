//go:build !fast

// Live: needs a browser (chromium, driven by chromedp).

package e2e_test

import (
	"context"
	"net/url"
	"os"
	"strconv"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"
	"github.com/stretchr/testify/require"

	"gantry/bench"
	"gantry/cmd/gantry/webtest"
	"gantry/models/notify"
	runmodel "gantry/models/run"
	"gantry/runner/mock"
	"gantry/views/paths"
	"gantry/web/devmail"
)

// Artifacts for a human; not assertions.
const emergencyShots = "/tmp/shots37/emergency/"

// TestEmergencyReachesTheInboxInBrowser: the operator asks for a break-glass window
// from the workspace page; the admin's inbox lists it first, marked as an emergency,
// ahead of the run waiting for him, his navigation's count includes it, its link opens
// the window's page with the approval; the mail catcher caught the mail telling him.
// The operator, who asked, has no such line. The pages pass axe-core.
func TestEmergencyReachesTheInboxInBrowser(t *testing.T) {
	chrome := chromePath(t)
	require.NoError(t, os.MkdirAll(emergencyShots, 0o755))
	// The mock under a live executor's name: a window needs a live cloud to change; the
	// inbox and the mail are what is tested here.
	app := webtest.StartWith(t, webtest.Options{Runner: builtRunner{Runner: mock.New(), name: "tofu/process"}, Mail: true})
	operatorHTTP := app.LoggedIn(t, operatorEmail)
	development, staging := app.OrgEnvironmentID(t, "acme", "development"), app.OrgEnvironmentID(t, "acme", "staging")
	bucket := func(env, name string) url.Values {
		return url.Values{"template": {"bucket"}, "environment": {env}, "workspace": {name}, "kind": {"apply"}, "inputs.name": {name}}
	}
	applied := waitForRunRow(t, app, requestRunHTTP(t, app, operatorHTTP, bucket(development, "incident-assets")), runmodel.Succeeded)
	waitForRunRow(t, app, requestRunHTTP(t, app, operatorHTTP, bucket(staging, "billing-assets")), runmodel.PendingApproval)

	op := startBrowser(t, chrome)
	signInAs(t, op, app, operatorEmail, operatorPassword, "Olivia")
	op.do(t, "open the workspace", chromedp.Navigate(app.URL+paths.Workspace(applied.WorkspaceID)), chromedp.WaitVisible(chromedp.ID("ask-window")))
	op.do(t, "ask for a window", chromedp.Click(chromedp.ID("ask-window"), chromedp.NodeVisible), chromedp.WaitVisible(chromedp.ID("request-window")))
	op.do(t, "say why and for how long",
		chromedp.SendKeys(chromedp.ID("reason"), "INC-91: public bucket policy leaking, lock it by hand"),
		chromedp.SetValue(chromedp.ID("duration"), "30"),
		chromedp.Evaluate[chromedp.Void](`document.getElementById("request-window").click()`),
		chromedp.WaitVisible(chromedp.CSS(`[data-testid="window-state"]`)))
	id := strings.TrimPrefix(location(t, op), app.URL+"/breakglass/")
	require.True(t, strings.HasPrefix(id, "bgw-"), id)
	screenshotAt(t, op, emergencyShots+"requested-1280.png", 1280, 900, false)
	op.do(t, "reset the viewport", chromedp.ResetViewport())
	op.do(t, "open the operator's inbox", chromedp.Navigate(app.URL+paths.Approvals()), chromedp.WaitVisible(chromedp.ID("for-you-title")))
	require.Zero(t, count(t, op, `[data-testid="emergencies"]`), "the requester is not asked to decide her own window")

	ad := startBrowser(t, chrome)
	signInAs(t, ad, app, adminEmail, adminPassword, adminFirst)
	ad.do(t, "open the inbox", chromedp.Click(chromedp.CSS(`nav.mainnav a[href="/approvals"]`), chromedp.NodeVisible),
		chromedp.WaitVisible(chromedp.CSS(`[data-testid="emergencies"]`)))
	first := run(t, ad, "find what comes first", chromedp.Evaluate[string](
		`document.querySelector('main section').dataset.testid`))
	require.Equal(t, "emergencies", first, "the emergency heads the inbox")
	require.Equal(t, 1, count(t, ad, `[data-testid="window-`+id+`"]`))
	require.Contains(t, liveText(t, ad, "emergencies"), "INC-91: public bucket policy leaking")
	require.Contains(t, liveText(t, ad, "emergencies"), "Emergency")
	runs, err := strconv.Atoi(liveText(t, ad, "approval-count"))
	require.NoError(t, err)
	require.Equal(t, 1, runs, "the staging run waits for him too")
	require.Equal(t, strconv.Itoa(runs+1), liveText(t, ad, "inbox-count"), "the navigation counts the emergency")
	requireAccessible(t, ad, "the inbox with an emergency")
	screenshotAt(t, ad, emergencyShots+"inbox-1280.png", 1280, 900, false)
	screenshotAt(t, ad, emergencyShots+"inbox-390.png", 390, 900, true)
	ad.do(t, "reset the viewport", chromedp.ResetViewport())
	ad.do(t, "follow the emergency's link", chromedp.Click(chromedp.CSS(`[data-testid="window-`+id+`"] a[data-testid="decide-window"]`), chromedp.NodeVisible),
		chromedp.WaitVisible(chromedp.ID("approve-window")))
	require.Equal(t, app.URL+paths.BreakglassWindow(id), location(t, ad))

	// The mail catcher caught the mail to the admin, and shows it.
	ctx, cancel := bench.Context(context.Background(), liveBase)
	m, err := app.Mail.Wait(ctx, func(m devmail.Message) bool {
		return m.Headers["X-Gantry-Event"] == string(notify.BreakglassRequested) && len(m.To) == 1 && m.To[0] == adminEmail
	})
	cancel()
	require.NoError(t, err, "the break-glass mail to the admin (%v)", context.Cause(ctx))
	require.Contains(t, m.Subject, "Emergency: Olivia")
	require.Contains(t, m.Text, paths.BreakglassWindow(id))
	ad.do(t, "open the caught mail", chromedp.Navigate(app.URL+"/dev/mail"), chromedp.WaitVisible(chromedp.CSS(`main h1`)))
	require.Contains(t, run(t, ad, "read the page", chromedp.Evaluate[string](`document.querySelector("main").innerText`)), "Emergency: Olivia")
	screenshotAt(t, ad, emergencyShots+"devmail-1280.png", 1280, 900, false)
}
