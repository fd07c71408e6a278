//go:build !fast

// Live: needs a browser (chromium, driven by chromedp).

package e2e_test

import (
	"net/http"
	"os"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"
	"github.com/stretchr/testify/require"

	"gantry/cmd/gantry/webtest"
	"gantry/models/scim"
)

// Artifacts for a human; not assertions.
const scimShots = "/tmp/shots40/scimpage/"

// TestSCIMTokenPageInBrowser: an owner goes from /members to the directory sync page,
// makes the organization's SCIM token, sees it once with a copy button beside it and the
// warning that it will not be shown again, and the directory can call SCIM with it.
func TestSCIMTokenPageInBrowser(t *testing.T) {
	chrome := chromePath(t)
	app := webtest.Start(t)
	b := startBrowser(t, chrome)
	signInAs(t, b, app, ownerEmail, ownerPassword, ownerFirst)
	b.do(t, "open directory sync from the members page", chromedp.Navigate(app.URL+"/members"),
		chromedp.Click(chromedp.CSS(`[data-testid="scim-link"] a`), chromedp.NodeVisible),
		chromedp.WaitVisible(chromedp.ID("make-scim-token")))
	require.Equal(t, app.URL+"/scim/v2", liveText(t, b, "scim-base-url"))
	require.Contains(t, liveText(t, b, "scim-token-status"), "None yet")
	require.Equal(t, "Make a SCIM token", text(t, b, chromedp.ID("make-scim-token")))
	requireAccessible(t, b, "/settings/scim")
	require.NoError(t, os.MkdirAll(scimShots, 0o755))
	screenshotAt(t, b, scimShots+"before-1280.png", 1280, 800, false)
	b.do(t, "reset the viewport", chromedp.ResetViewport())

	b.do(t, "make a SCIM token", chromedp.Click(chromedp.ID("make-scim-token"), chromedp.NodeVisible),
		chromedp.WaitVisible(chromedp.CSS(`[data-testid="scim-secret-value"]`)))
	secret := liveText(t, b, "scim-secret-value")
	require.True(t, strings.HasPrefix(secret, scim.TokenPrefix), secret)
	require.Contains(t, liveText(t, b, "scim-secret"), "will not be shown again")
	require.Contains(t, liveText(t, b, "scim-token-status"), "by Alice")
	require.Equal(t, 1, count(t, b, `button.copy[data-copy="scim-secret-value"]`), "a copy button beside the token")
	require.True(t, run(t, b, "is the copy button shown", chromedp.Evaluate[bool](
		`getComputedStyle(document.querySelector('button.copy[data-copy="scim-secret-value"]')).display !== "none"`)))
	require.Equal(t, "Rotate the SCIM token", text(t, b, chromedp.ID("make-scim-token")))
	require.Contains(t, text(t, b, chromedp.ID("scim-rotate-hint")), "ends the current token at once")
	requireAccessible(t, b, "/settings/scim with a token shown")
	screenshotAt(t, b, scimShots+"made-1280.png", 1280, 900, false)
	screenshotAt(t, b, scimShots+"made-390.png", 390, 844, true)
	b.do(t, "reset the viewport", chromedp.ResetViewport())

	req, err := http.NewRequest(http.MethodGet, app.URL+"/scim/v2/Users", nil)
	require.NoError(t, err)
	req.Header.Set("Authorization", "Bearer "+secret)
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode, "the token shown works")

	b.do(t, "open the page again", chromedp.Navigate(app.URL+"/settings/scim"), chromedp.WaitVisible(chromedp.ID("make-scim-token")))
	require.NotContains(t, run(t, b, "read the page", chromedp.Evaluate[string](`document.body.innerHTML`)), secret, "the token is shown once")
}
