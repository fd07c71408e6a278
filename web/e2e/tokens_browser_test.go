//go:build !fast

// Live: needs a browser (chromium, driven by chromedp).

package e2e_test

import (
	"net/http"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"
	"github.com/stretchr/testify/require"

	"gantry/cmd/gantry/webtest"
)

// Artifact for a human; not an assertion.
const (
	tokensScreenshot       = "/tmp/gantry-tokens-1280.png"
	apiReferenceScreenshot = "/tmp/gantry-api-reference-1280.png"
)

// TestAPITokensInBrowser: an admin opens API tokens from the account menu, is told what
// is wrong with an empty form (nothing made), adds a service account, makes it a token
// and their own, sees each secret once, uses theirs on the API and revokes it. The page
// passes axe-core.
func TestAPITokensInBrowser(t *testing.T) {
	chrome := chromePath(t)
	app := webtest.Start(t)
	b := startBrowser(t, chrome)
	signInAs(t, b, app, adminEmail, adminPassword, "Adam")
	b.do(t, "open API tokens", chromedp.Click(chromedp.CSS(`#nav-account > summary`), chromedp.NodeVisible),
		chromedp.Click(chromedp.CSS(`a.account-link[href="/settings/tokens"]`), chromedp.NodeVisible),
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

	// The API reference, from the same operations /api/v1/openapi.json describes.
	b.do(t, "open the API reference", chromedp.Click(chromedp.CSS(`[data-testid="api-reference-link"]`), chromedp.NodeVisible),
		chromedp.WaitVisible(chromedp.CSS(`[data-testid="api-decisions"]`)))
	decisions := liveText(t, b, "api-decisions")
	require.Contains(t, decisions, "POST /api/v1/runs/{id}/approve")
	require.Contains(t, decisions, "Idempotency-Key")
	ops := run(t, b, "count the operations", chromedp.Evaluate[int](`document.querySelectorAll('[data-testid="api-op"]').length`))
	require.Greater(t, ops, 30)
	requireAccessible(t, b, "/api/reference")
	screenshotAt(t, b, apiReferenceScreenshot, 1280, 900, false)
	b.do(t, "open the description", chromedp.Click(chromedp.CSS(`[data-testid="openapi-link"]`), chromedp.NodeVisible),
		chromedp.WaitVisible(chromedp.CSS("body")))
	require.Contains(t, run(t, b, "read the description", chromedp.Evaluate[string](`document.body.innerText`)), `"openapi": "3.1.0"`)
}
