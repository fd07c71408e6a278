//go:build !fast

// Live: needs a browser (chromium, driven by chromedp).

package e2e_test

import (
	"net/url"
	"os"
	"path/filepath"
	"testing"

	"github.com/chromedp/chromedp"
	"github.com/stretchr/testify/require"

	"gantry/cmd/gantry/webtest"
	"gantry/models/ratelimit"
	runmodel "gantry/models/run"
	"gantry/views/paths"
	"gantry/web"
)

// signInShots is where this test's screenshots go, for a person to look at.
func signInShots(t *testing.T) string {
	t.Helper()
	dir := filepath.Join(os.TempDir(), "shots39", "edges")
	require.NoError(t, os.MkdirAll(dir, 0o755))
	return dir
}

// TestSignInWithoutAuthTimeInBrowser: with a provider that sends no auth_time, the owner
// signs in in a real browser (the sign-in in progress is the sealed cookie, sent back to
// the callback by the browser itself), yet the review of a risk-3 run offers only "Sign in
// again to decide"; doing so ends on a page that says the provider must send auth_time,
// with the way back to signing in. That failed return counts against the address: the
// next one that fails meets the page saying when to try again (429).
func TestSignInWithoutAuthTimeInBrowser(t *testing.T) {
	chrome := chromePath(t)
	app := webtest.StartWith(t, webtest.Options{OmitAuthTime: true,
		RateLimits: &web.RateLimits{FailedSignIn: ratelimit.Rate{PerMinute: 1, Burst: 1}}})
	operator := app.LoggedIn(t, operatorEmail)
	dev := app.OrgEnvironmentID(t, "acme", "development")
	bucket := func(kind string) url.Values {
		return url.Values{"template": {"bucket"}, "environment": {dev}, "workspace": {"billing-exports"}, "kind": {kind},
			"inputs.name": {"billing-exports"}}
	}
	waitForRunRow(t, app, requestRunHTTP(t, app, operator, bucket("apply")), runmodel.Succeeded)
	id := requestRunHTTP(t, app, operator, bucket("destroy"))
	waitForRunRow(t, app, id, runmodel.PendingApproval)
	shots := signInShots(t)

	b := startBrowser(t, chrome)
	signInAs(t, b, app, ownerEmail, ownerPassword, ownerFirst)
	b.do(t, "open the review", chromedp.Navigate(app.URL+paths.RunReview(id)))
	b.do(t, "wait for the re-authentication offer", chromedp.WaitVisible(chromedp.ID("reauthenticate")))
	require.Zero(t, count(t, b, "#arm-approve"), "a sign-in without auth_time is not fresh: no approval form")
	require.Contains(t, text(t, b, chromedp.CSS(`[data-testid="reauth"]`)), "it needs a sign-in within the last 15 minutes")

	b.do(t, "sign in again at the provider",
		chromedp.Click(chromedp.ID("reauthenticate"), chromedp.NodeVisible),
		chromedp.WaitVisible(chromedp.ID("username")),
		chromedp.SendKeys(chromedp.ID("username"), ownerEmail),
		chromedp.SendKeys(chromedp.ID("password"), ownerPassword),
		chromedp.Click(chromedp.ID("sign-in"), chromedp.NodeVisible),
		chromedp.WaitVisible(chromedp.CSS(`.error-page`)),
	)
	page := text(t, b, chromedp.CSS(`.error-page`))
	require.Contains(t, page, "400")
	require.Contains(t, page, "its ID token has no auth_time")
	require.Contains(t, page, "ask your Gantry administrator to have the provider send auth_time")
	require.NotEqual(t, "Sign in", text(t, b, chromedp.CSS(`[data-testid="error-action"]`)), "still signed in: no sign-in offered")
	screenshotAt(t, b, filepath.Join(shots, "no-auth-time.png"), 1280, 800, false)
	screenshotAt(t, b, filepath.Join(shots, "no-auth-time-390.png"), 390, 844, true)
	b.do(t, "reset the viewport", chromedp.ResetViewport())

	// The next return that fails from this address is over the limit.
	b.do(t, "return from the provider with nothing in progress",
		chromedp.Navigate(app.URL+"/auth/callback?state=x&code=y"),
		chromedp.WaitVisible(chromedp.CSS(`.error-page`)),
	)
	page = text(t, b, chromedp.CSS(`.error-page`))
	require.Contains(t, page, "429")
	require.Contains(t, page, "Too many sign-ins failed from your network in a short time")
	require.Contains(t, page, "Try again in 60 seconds.")
	screenshotAt(t, b, filepath.Join(shots, "failed-sign-ins-429.png"), 1280, 800, false)
	b.do(t, "reset the viewport", chromedp.ResetViewport())

	requireNoCSPViolations(t, b)
}
