//go:build !fast

// Live: needs a browser (chromium, driven by chromedp).

package e2e_test

import (
	"strings"
	"testing"

	"github.com/chromedp/chromedp"
	"github.com/stretchr/testify/require"

	"gantry/cmd/gantry/webtest"
)

const previewScreenshot = "/tmp/gantry-request-preview-1280.png"

// TestRequestPreviewInBrowser: on the request form, who decides and what it costs follow
// what a person chooses and types, in place: development is self-service, production
// needs an admin; four subnets cost twice what two do.
func TestRequestPreviewInBrowser(t *testing.T) {
	chrome := chromePath(t)
	app := webtest.Start(t)
	dev, prod := app.OrgEnvironmentID(t, "acme", "development"), app.OrgEnvironmentID(t, "acme", "production")
	b := startBrowser(t, chrome)
	signInAs(t, b, app, operatorEmail, operatorPassword, "Olivia")
	form := app.URL + "/requests/new?template=network"
	b.do(t, "open the network form", chromedp.Navigate(form), chromedp.WaitVisible(chromedp.CSS(`[data-testid="request-preview"]`)))
	require.Contains(t, liveText(t, b, "preview-decider"), "Choose an environment")
	loads := runPageLoads(b, form)

	waitFor := func(what, testid, want string) {
		t.Helper()
		waitForPage(t, b, what, `(document.querySelector('[data-testid="`+testid+`"]')?.innerText ?? "").includes(`+jsString(want)+`)`, testid)
	}
	b.do(t, "choose development and name it", chromedp.SetValue(chromedp.ID("environment"), dev),
		chromedp.SendKeys(chromedp.ID("input-name"), "preview-net"))
	waitFor("the development floor", "preview-decider", "self-service")
	waitFor("the cost of two subnets", "preview-cost", "$9.00 a month")
	b.do(t, "ask for four subnets", chromedp.Evaluate[chromedp.Void](`document.getElementById("input-subnet_count").value = ""`), chromedp.SendKeys(chromedp.ID("input-subnet_count"), "4"))
	waitFor("the cost of four subnets", "preview-cost", "$18.00 a month")
	b.do(t, "choose production", chromedp.SetValue(chromedp.ID("environment"), prod),
		chromedp.Evaluate[chromedp.Void](`document.getElementById("environment").dispatchEvent(new Event("change", {bubbles: true}))`))
	waitFor("the production floor", "preview-decider", "an admin or owner, not the requester")
	// Predicted from a simulated plan of the inputs by the rules the run's plan meets.
	require.Contains(t, liveText(t, b, "preview-decider"), "Risk 2 (any change in a production environment)")
	require.Contains(t, liveText(t, b, "preview-decider"), "Predicted from a simulated plan")
	require.Equal(t, loads, runPageLoads(b, form), "the preview changed in place")
	requireAccessible(t, b, "the request form with its preview")
	screenshotAt(t, b, previewScreenshot, 1280, 1100, false)
	requireNoCSPViolations(t, b)
}

// jsString quotes s as a JavaScript string literal.
func jsString(s string) string {
	return `"` + strings.NewReplacer(`\`, `\\`, `"`, `\"`).Replace(s) + `"`
}
