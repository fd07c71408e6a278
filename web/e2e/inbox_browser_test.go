//go:build !fast

// Live: needs a browser (chromium, driven by chromedp).

package e2e_test

import (
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/stretchr/testify/require"

	"gantry/bench"
	"gantry/cmd/gantry/webtest"
)

// Artifacts for a human; not assertions.
const inboxScreenshot = "/tmp/gantry-inbox-1280.png"

// TestInboxInBrowser: an approver's navigation count rises live as runs start waiting
// for them (the page is never reloaded); the requester finds her run under "Waiting for
// others"; the approver finds both under "Waiting for you", decides the first, lands
// back on the inbox offering the next as a link, follows it and decides it, and the
// count falls as they decide.
func TestInboxInBrowser(t *testing.T) {
	chrome := chromePath(t)
	app := webtest.Start(t)
	operatorHTTP := app.LoggedIn(t, operatorEmail)
	staging := app.OrgEnvironmentID(t, "acme", "staging")
	request := func(workspace string) string {
		t.Helper()
		form := url.Values{"_csrf": {app.CSRF(t, operatorHTTP)}, "template": {"bucket"}, "environment": {staging}, "workspace": {workspace},
			"kind": {"apply"}, "inputs.name": {workspace}}
		resp := app.PostForm(t, operatorHTTP, "/requests", form)
		webtest.ReadBody(t, resp)
		require.Equal(t, http.StatusSeeOther, resp.StatusCode)
		return strings.TrimPrefix(resp.Header.Get("Location"), "/runs/")
	}
	count := func(b *browser) string { return liveText(t, b, "inbox-count") }
	waitCount := func(b *browser, want string) {
		t.Helper()
		// The page is the subject: its count changes over its live stream, in place.
		bench.Eventually(t, "the navigation's count to read "+want, stepBase, func() (bool, any) {
			got := count(b)
			return got == want, got
		}, bench.Poll(50*time.Millisecond))
	}

	admin := startBrowser(t, chrome)
	signInAs(t, admin, app, adminEmail, adminPassword, "Adam")
	admin.do(t, "open the inbox", chromedp.Click(chromedp.CSS(`nav.mainnav a[href="/approvals"]`), chromedp.NodeVisible),
		chromedp.WaitVisible(chromedp.CSS(`[data-testid="for-you-empty"]`)))
	settle(t, admin)
	run(t, admin, "mark the page", chromedp.Evaluate[chromedp.Void](`window.gantryE2ENoReload = true`))
	require.Equal(t, "", count(admin), "nothing waits yet")

	first := request("inbox-first")
	waitCount(admin, "1")
	second := request("inbox-second")
	waitCount(admin, "2")
	require.True(t, run(t, admin, "read the mark", chromedp.Evaluate[bool](`window.gantryE2ENoReload === true`)),
		"the count rose without a reload")

	operator := startBrowser(t, chrome)
	signInAs(t, operator, app, operatorEmail, operatorPassword, "Olivia")
	operator.do(t, "open the inbox", chromedp.Click(chromedp.CSS(`nav.mainnav a[href="/approvals"]`), chromedp.NodeVisible),
		chromedp.WaitVisible(chromedp.CSS(`[data-testid="waiting-for-others"]`)))
	others := liveText(t, operator, "waiting-for-others")
	require.Contains(t, others, "inbox-first #1")
	require.Contains(t, others, "decided by")
	require.Equal(t, "", liveText(t, operator, "approvals"), "nothing waits for the requester herself")

	admin.do(t, "reload the inbox", chromedp.Reload(), chromedp.WaitVisible(chromedp.CSS(`[data-testid="approvals"]`)))
	mine := liveText(t, admin, "approvals")
	require.Contains(t, mine, "inbox-first #1")
	require.Contains(t, mine, "inbox-second #1")
	require.Less(t, strings.Index(mine, "inbox-first"), strings.Index(mine, "inbox-second"), "the decision that closes first comes first")
	screenshotAt(t, admin, inboxScreenshot, 1280, 800, false)
	admin.do(t, "reset the viewport", chromedp.ResetViewport())

	admin.do(t, "open the first run's review", chromedp.Click(chromedp.CSS(`[data-testid="run-`+first+`"] th a`), chromedp.NodeVisible),
		chromedp.WaitVisible(chromedp.ID("approve")))
	require.Equal(t, app.URL+"/runs/"+first+"/review", location(t, admin))
	admin.do(t, "mark the page", chromedp.Evaluate[chromedp.Void](`window.gantryBefore = true`))
	admin.do(t, "approve it", chromedp.Click(chromedp.ID("approve"), chromedp.NodeVisible))
	waitForNewPage(t, admin, "decided="+first)
	require.Equal(t, "You approved inbox-first #1", text(t, admin, chromedp.ID("decided-title")))
	require.Equal(t, "inbox-second #1", text(t, admin, chromedp.CSS(`[data-testid="next-waiting-link"]`)),
		"the next waiting run offered as a link, not opened")
	require.Equal(t, app.URL+"/approvals?decided="+first, location(t, admin), "back in the inbox")
	waitCount(admin, "1")

	admin.do(t, "follow the link to the next", chromedp.Click(chromedp.CSS(`[data-testid="next-waiting-link"]`), chromedp.NodeVisible),
		chromedp.WaitVisible(chromedp.ID("approve")))
	require.Equal(t, app.URL+"/runs/"+second+"/review", location(t, admin))
	admin.do(t, "mark the page", chromedp.Evaluate[chromedp.Void](`window.gantryBefore = true`))
	admin.do(t, "approve the second", chromedp.Click(chromedp.ID("approve"), chromedp.NodeVisible))
	waitForNewPage(t, admin, "/runs/"+second)
	require.Contains(t, text(t, admin, chromedp.CSS(`.flashes .flash-success`)), "You approved inbox-second #1.")
	require.Equal(t, app.URL+"/runs/"+second, location(t, admin), "nothing else waits: the run page")
	require.Equal(t, "", count(admin))
	requireNoCSPViolations(t, admin)
	requireNoCSPViolations(t, operator)
}
