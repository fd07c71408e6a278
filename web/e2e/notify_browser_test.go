//go:build !fast

// Live: needs a browser (chromium, driven by chromedp).

package e2e_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"
	"github.com/riverqueue/river"
	"github.com/stretchr/testify/require"

	"gantry/bench"
	"gantry/cmd/gantry/webtest"
	"gantry/models/notify"
	"gantry/web/devmail"
)

// Artifacts for a human; not assertions.
const (
	webhookScreenshot = "/tmp/gantry-webhook-1280.png"
	devMailScreenshot = "/tmp/gantry-devmail-1280.png"
)

// TestNotificationsInBrowser: an admin adds a webhook through its form and sees its
// secret once; a run starts waiting; the hook's delivery log shows the delivery; the
// caught mail on the dev page links to the review page, which opens with the decision
// still waiting. The pages pass axe-core.
func TestNotificationsInBrowser(t *testing.T) {
	chrome := chromePath(t)
	app := webtest.StartWith(t, webtest.Options{Mail: true})
	got := make(chan string, 10)
	receiver := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got <- r.Header.Get("Gantry-Event")
		w.WriteHeader(http.StatusNoContent)
	}))
	defer receiver.Close()

	admin := startBrowser(t, chrome)
	signInAs(t, admin, app, adminEmail, adminPassword, "Adam")
	admin.do(t, "open the webhooks", chromedp.Click(chromedp.CSS(`#nav-settings > summary`), chromedp.NodeVisible),
		chromedp.Click(chromedp.CSS(`nav.mainnav a[href="/settings/webhooks"]`), chromedp.NodeVisible),
		chromedp.WaitVisible(chromedp.ID("add-webhook-button")))
	requireAccessible(t, admin, "/settings/webhooks")
	admin.do(t, "submit without a URL", chromedp.SetValue(chromedp.ID("hook-name"), "platform-alerts"),
		chromedp.Click(chromedp.ID("add-webhook-button"), chromedp.NodeVisible),
		chromedp.WaitVisible(chromedp.CSS(`[data-testid="error-url"]`)))
	require.Equal(t, "platform-alerts", run(t, admin, "read the name", chromedp.Evaluate[string](`document.getElementById("hook-name").value`)),
		"what was typed is kept")
	admin.do(t, "add the webhook", chromedp.SetValue(chromedp.ID("hook-url"), receiver.URL+"/gantry"),
		chromedp.Click(chromedp.ID("add-webhook-button"), chromedp.NodeVisible),
		chromedp.WaitVisible(chromedp.CSS(`[data-testid="webhook-secret-value"]`)))
	secret := liveText(t, admin, "webhook-secret-value")
	require.True(t, strings.HasPrefix(secret, "whsec_"), secret)

	operatorHTTP := app.LoggedIn(t, operatorEmail)
	staging := app.OrgEnvironmentID(t, "acme", "staging")
	form := map[string][]string{"_csrf": {app.CSRF(t, operatorHTTP)}, "template": {"bucket"}, "environment": {staging},
		"workspace": {"billing-assets"}, "kind": {"apply"}, "inputs.name": {"billing-assets"}}
	resp := app.PostForm(t, operatorHTTP, "/requests", form)
	webtest.ReadBody(t, resp)
	require.Equal(t, http.StatusSeeOther, resp.StatusCode)
	runID := strings.TrimPrefix(resp.Header.Get("Location"), "/runs/")
	require.Equal(t, "decision.waiting", bench.Receive(t, "the webhook's first event", liveBase, got))

	admin.do(t, "open the delivery log", chromedp.Reload(), chromedp.WaitVisible(chromedp.CSS(`[data-testid="webhooks"] a`)),
		chromedp.Click(chromedp.CSS(`[data-testid="webhooks"] a`), chromedp.NodeVisible),
		chromedp.WaitVisible(chromedp.CSS(`[data-testid="deliveries"]`)))
	require.NotContains(t, liveText(t, admin, "deliveries"), secret)
	// The delivery job records the answer after the receiver gave it: wait for the job,
	// then read the log (it is not live) once more.
	wake := jobsFinished(t, app)
	bench.Eventually(t, "a delivery recorded as delivered", liveBase, func() (bool, any) {
		var statuses []string
		require.NoError(t, app.DB.Model(&notify.Delivery{}).Where("organization_id = ?", app.Orgs["acme"]).Pluck("status", &statuses).Error)
		return slices.Contains(statuses, string(notify.DeliveryDelivered)), statuses
	}, bench.Wake(wake))
	admin.do(t, "reload the log", chromedp.Reload(), chromedp.WaitVisible(chromedp.CSS(`[data-testid="deliveries"]`)))
	require.Contains(t, run(t, admin, "read the log", chromedp.Evaluate[string](`document.querySelector('[data-testid="deliveries"]').innerHTML`)),
		`data-status="delivered"`)
	require.Contains(t, liveText(t, admin, "deliveries"), "HTTP 204")
	requireAccessible(t, admin, "the webhook's page")
	screenshotAt(t, admin, webhookScreenshot, 1280, 800, false)
	admin.do(t, "reset the viewport", chromedp.ResetViewport())

	// The caught mail, and its link: the catcher says when it caught it.
	ctx, cancel := bench.Context(context.Background(), liveBase)
	_, err := app.Mail.Wait(ctx, func(m devmail.Message) bool { return strings.Contains(m.Subject+"\n"+m.Text, "billing-assets #1") })
	cancel()
	require.NoError(t, err, "the mail about billing-assets #1 (%v)", context.Cause(ctx))
	admin.do(t, "open the caught mail", chromedp.Navigate(app.URL+"/dev/mail"), chromedp.WaitVisible(chromedp.CSS(`main h1`)))
	require.Contains(t, run(t, admin, "read the page", chromedp.Evaluate[string](`document.querySelector("main").innerText`)), "billing-assets #1")
	requireAccessible(t, admin, "/dev/mail")
	screenshotAt(t, admin, devMailScreenshot, 1280, 800, false)
	admin.do(t, "reset the viewport", chromedp.ResetViewport())
	admin.do(t, "follow the review link", chromedp.Click(chromedp.CSS(`article.devmail a[href$="/runs/`+runID+`/review"]`), chromedp.NodeVisible),
		chromedp.WaitVisible(chromedp.ID("approve")))
	var state string
	require.NoError(t, app.DB.Raw("SELECT state FROM runs WHERE id = ?", runID).Scan(&state).Error)
	require.Equal(t, "PENDING_APPROVAL", state, "following the link decides nothing")

	admin.do(t, "open the notification settings", chromedp.Click(chromedp.CSS(`#nav-account > summary`), chromedp.NodeVisible),
		chromedp.Click(chromedp.CSS(`a.account-link`), chromedp.NodeVisible),
		chromedp.WaitVisible(chromedp.ID("save-preferences")))
	requireAccessible(t, admin, "/settings/notifications")
}

// jobsFinished signals whenever a job of the portal's queue completes, fails, is
// cancelled or snoozed (River's events, in process), until the test ends.
func jobsFinished(t *testing.T, app *webtest.App) <-chan struct{} {
	events, cancel := app.System.Queue.Client.Subscribe(river.EventKindJobCompleted, river.EventKindJobFailed,
		river.EventKindJobCancelled, river.EventKindJobSnoozed)
	t.Cleanup(cancel)
	wake := make(chan struct{}, 1)
	go func() {
		for range events { // until cancel closes events
			signal(wake)
		}
	}()
	return wake
}
