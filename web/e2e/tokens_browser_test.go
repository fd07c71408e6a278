package e2e_test

import (
	"net/http"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"
	"github.com/stretchr/testify/require"

	"gantry/web/webtest"
)

// Artifact for a human; not an assertion.
const tokensScreenshot = "/tmp/gantry-tokens-1280.png"

// TestAPITokensInBrowser: an admin opens API tokens from the account menu, is told what
// is wrong with an empty form (nothing made), adds a service account, makes it a token
// and their own, sees each secret once, uses theirs on the API and revokes it. The page
// passes axe-core.
func TestAPITokensInBrowser(t *testing.T) {
	chrome := chromePath(t)
	app := webtest.Start(t)
	b := startBrowser(t, chrome)
	signInAs(t, b, app, adminEmail, adminPassword, "Adam")
	b.do(t, "open API tokens", chromedp.Click(chromedp.CSS(`a.account-link[href="/settings/tokens"]`), chromedp.NodeVisible),
		chromedp.WaitVisible(chromedp.ID("make-token")))
	requireAccessible(t, b, "/settings/tokens")

	b.do(t, "make a token from an empty form", chromedp.Click(chromedp.ID("make-token"), chromedp.NodeVisible),
		chromedp.WaitVisible(chromedp.CSS(`[data-testid="error-summary"]`)))
	require.Contains(t, liveText(t, b, "error-name"), "Name the token")
	requireAccessible(t, b, "the token form with errors")

	b.do(t, "add a service account", chromedp.SetValue(chromedp.ID("account-name"), "deploy-bot"),
		chromedp.SetValue(chromedp.ID("account-role"), "operator"),
		chromedp.Click(chromedp.ID("add-service-account"), chromedp.NodeVisible),
		chromedp.WaitVisible(chromedp.CSS(`[data-testid="service-accounts"]`)))
	require.Contains(t, liveText(t, b, "service-accounts"), "deploy-bot (operator)")

	holder := run(t, b, "find the service account", chromedp.Evaluate[string](
		`[...document.querySelectorAll("#token-holder option")].find(o => o.textContent.includes("deploy-bot")).value`))
	b.do(t, "make the service account a token", chromedp.SetValue(chromedp.ID("token-name"), "pipeline"),
		chromedp.SetValue(chromedp.ID("token-holder"), holder),
		chromedp.Click(chromedp.CSS(`input[name="scopes"][value="apply"]`), chromedp.NodeVisible),
		chromedp.Click(chromedp.ID("make-token"), chromedp.NodeVisible),
		chromedp.WaitVisible(chromedp.CSS(`[data-testid="token-secret-value"]`)))
	pipeline := liveText(t, b, "token-secret-value")
	require.True(t, strings.HasPrefix(pipeline, "gantry_"), pipeline)

	b.do(t, "make an own admin token", chromedp.SetValue(chromedp.ID("token-name"), "my-laptop"),
		chromedp.SetValue(chromedp.ID("token-holder"), ""),
		chromedp.Click(chromedp.CSS(`input[name="scopes"][value="admin"]`), chromedp.NodeVisible),
		chromedp.Click(chromedp.ID("make-token"), chromedp.NodeVisible),
		chromedp.WaitVisible(chromedp.CSS(`[data-testid="token-my-laptop"]`)))
	mine := liveText(t, b, "token-secret-value")
	require.NotEqual(t, pipeline, mine)
	requireAccessible(t, b, "the tokens page with a secret shown")
	screenshotAt(t, b, tokensScreenshot, 1280, 900, false)
	b.do(t, "reset the viewport", chromedp.ResetViewport())

	resp := app.API(t, mine, http.MethodGet, "/api/v1/environments", "")
	body := webtest.ReadBody(t, resp)
	require.Equal(t, http.StatusOK, resp.StatusCode, body)

	b.do(t, "revoke my token", chromedp.Click(chromedp.CSS(`[data-testid="revoke-my-laptop"]`), chromedp.NodeVisible),
		chromedp.WaitVisible(chromedp.CSS(`[data-testid="token-my-laptop"][data-state="revoked"]`)))
	require.NotContains(t, run(t, b, "read the page", chromedp.Evaluate[string](`document.body.innerHTML`)), mine, "the secret is not shown again")
	resp = app.API(t, mine, http.MethodGet, "/api/v1/environments", "")
	webtest.ReadBody(t, resp)
	require.Equal(t, http.StatusUnauthorized, resp.StatusCode)
}
