//go:build !fast

// Live: needs a browser (chromium, driven by chromedp).

package e2e_test

import (
	"testing"

	"github.com/chromedp/chromedp"
	"github.com/stretchr/testify/require"

	"gantry/cmd/gantry/webtest"
)

// TestRequestFormErrorsInBrowser: a request with mistakes comes back with the focus on
// an error summary that lists each mistake in the form's order and links its field;
// following a link focuses the field (with a focus ring of the accent blue); correcting
// a field clears its message and its aria-invalid as the person types.
func TestRequestFormErrorsInBrowser(t *testing.T) {
	chrome := chromePath(t)
	app := webtest.Start(t)
	b := startBrowser(t, chrome)
	signInAs(t, b, app, operatorEmail, operatorPassword, "Olivia")
	b.do(t, "open the bucket's request form", chromedp.Navigate(app.URL+"/requests/new?template=bucket"),
		chromedp.WaitVisible(chromedp.ID("submit-request")))
	require.True(t, run(t, b, "read required", chromedp.Evaluate[bool](`document.getElementById("input-name").required`)),
		"a required input says so")
	b.do(t, "fill the form with mistakes",
		chromedp.SetValue(chromedp.ID("workspace"), "form-errors"),
		chromedp.SetValue(chromedp.ID("input-name"), "Bad_Name"),
		chromedp.SetValue(chromedp.ID("input-retention_days"), "99999"),
		// The button's own activation: inline messages and the preview swap in as the
		// values change and move the button, so a click at its old place could miss it.
		chromedp.Evaluate[chromedp.Void](`document.getElementById("submit-request").click()`),
		chromedp.WaitVisible(chromedp.CSS(`[data-testid="error-summary"]`)))
	waitForFocus(t, b, "error-summary")

	links := run(t, b, "read the summary's links", chromedp.Evaluate[[]string](`[...document.querySelectorAll(
		'[data-testid="error-summary"] a')].map(a => a.getAttribute("href"))`))
	require.Equal(t, []string{"#environment", "#input-name", "#input-retention_days"}, links, "every mistake, in the form's order")
	for _, id := range []string{"environment", "input-name", "input-retention_days"} {
		require.Equal(t, "true", attribute(t, b, chromedp.ID(id), "aria-invalid"), id)
	}
	require.Equal(t, "Bad_Name", value(t, b, chromedp.ID("input-name")), "what was typed is kept")

	b.do(t, "follow the name's link", chromedp.Click(chromedp.CSS(`[data-testid="error-summary"] a[href="#input-name"]`), chromedp.NodeVisible))
	waitForFocus(t, b, "input-name")
	ring := run(t, b, "read the focus ring", chromedp.Evaluate[map[string]string](`(() => {
		const s = getComputedStyle(document.activeElement);
		return {style: s.outlineStyle, color: s.outlineColor};
	})()`))
	require.Equal(t, "solid", ring["style"], "%v", ring)
	require.Equal(t, "rgb(31, 95, 191)", ring["color"], "the accent blue: 5.7:1 on the page")
	b.do(t, "follow the retention's link", chromedp.Click(chromedp.CSS(`[data-testid="error-summary"] a[href="#input-retention_days"]`), chromedp.NodeVisible))
	waitForFocus(t, b, "input-retention_days")

	// Correcting the name: the inline validation clears its message and aria-invalid.
	b.do(t, "correct the name", chromedp.Click(chromedp.ID("input-name"), chromedp.NodeVisible),
		chromedp.Evaluate[chromedp.Void](`document.getElementById("input-name").select()`),
		chromedp.SendKeys(chromedp.ID("input-name"), "good-name"))
	runWithin(t, b, "wait for aria-invalid to follow the inline validation", stepBase, chromedp.PollFunction[bool](
		`() => document.getElementById("input-name").getAttribute("aria-invalid") === "false"`, untilCancelled))
	require.Equal(t, "", liveText(t, b, "error-inputs.name"), "the name's message is gone")
	require.Equal(t, "true", attribute(t, b, chromedp.ID("input-retention_days"), "aria-invalid"), "the other mistake stays marked")
	requireNoCSPViolations(t, b)
}
