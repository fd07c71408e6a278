//go:build !fast

// Live: needs a browser (chromium, driven by chromedp).

package e2e_test

import (
	"encoding/json"
	"net/url"
	"testing"

	cdpbrowser "github.com/chromedp/cdproto/browser"
	"github.com/chromedp/chromedp"
	"github.com/stretchr/testify/require"

	"gantry/bench"
	"gantry/cmd/gantry/webtest"
	runmodel "gantry/models/run"
	"gantry/views/paths"
)

// longARN is an output value wider than a phone's screen, with separators to wrap at.
const longARN = "arn:sandbox:s3:eu-central-1:123456789012:bucket/outputs-copy-test-bucket/with/a/rather/long/prefix/for-exports"

// TestOutputsWrapAndCopyInBrowser: a requester's applied bucket shows its outputs on the
// run page and on the workspace page, each value whole in its box with a Copy button
// that puts it on the clipboard and says "Copied" beside itself; a value longer than a
// phone's screen wraps inside its box; a sensitive output shows no value and offers no
// Copy.
func TestOutputsWrapAndCopyInBrowser(t *testing.T) {
	chrome := chromePath(t)
	app := webtest.Start(t)
	operator := app.LoggedIn(t, operatorEmail)
	dev := app.OrgEnvironmentID(t, "acme", "development")
	r := waitForRunRow(t, app, requestRunHTTP(t, app, operator, url.Values{"template": {"bucket"}, "environment": {dev},
		"workspace": {"outputs-copy"}, "kind": {"apply"}, "inputs.name": {"outputs-copy"}, "inputs.region": {"eu-central"}}), runmodel.Succeeded)
	var runOutputs map[string]struct{ Value any }
	require.NoError(t, json.Unmarshal(r.Outputs, &runOutputs))
	url0, ok := runOutputs["url"].Value.(string)
	require.True(t, ok, "the bucket's url output: %s", r.Outputs)
	recordOutputs(t, app, r, map[string]any{
		"admin_password": map[string]any{"value": "hunter2-never-shown", "type": "string", "sensitive": true},
		"arn":            map[string]any{"value": longARN, "type": "string"},
	})

	b := startBrowser(t, chrome)
	grantClipboard(t, b, app.URL)
	signInAs(t, b, app, operatorEmail, operatorPassword, "Olivia")

	// The run page: the outputs the apply wrote, each with its Copy button.
	b.do(t, "open the run page", chromedp.Navigate(app.URL+paths.Run(r.ID)),
		chromedp.WaitVisible(chromedp.CSS(`[data-testid="outputs"] button[data-copy="run-output-url"]`)))
	require.Equal(t, "Copy the value of url", attribute(t, b, chromedp.CSS(`button[data-copy="run-output-url"]`), "aria-label"))
	b.do(t, "copy the url", chromedp.Click(chromedp.CSS(`button[data-copy="run-output-url"]`), chromedp.NodeVisible))
	waitForText(t, b, "the copy to be confirmed", `[data-output="url"] [data-testid="copy-status"]`, `s => s === "Copied"`, stepBase)
	require.Equal(t, url0, clipboard(t, b), "the url's value, whole, on the clipboard")
	requireAccessible(t, b, "the run page with its outputs")
	screenshotAt(t, b, "/tmp/shots37/smaller/run-outputs-1366.png", 1366, 768, false)

	// The workspace page: the long value wraps in its box at a phone's width, the
	// sensitive one is not there to copy.
	b.do(t, "open the workspace", chromedp.Navigate(app.URL+paths.Workspace(r.WorkspaceID)),
		chromedp.WaitVisible(chromedp.CSS(`[data-testid="workspace-outputs"] button[data-copy="workspace-output-arn"]`)))
	require.Equal(t, "sensitive: not shown", text(t, b, chromedp.CSS(`[data-output="admin_password"] dd`)))
	require.Zero(t, run(t, b, "count the sensitive output's controls", chromedp.Evaluate[int](
		`document.querySelectorAll('[data-output="admin_password"] dd button, [data-output="admin_password"] dd code').length`)))
	require.NotContains(t, run(t, b, "read the page", chromedp.Evaluate[string](`document.documentElement.outerHTML`)), "hunter2")
	b.do(t, "a phone's viewport", chromedp.EmulateViewport(390, 844, chromedp.EmulateMobile, chromedp.EmulatePortrait))
	box := run(t, b, "measure the long value", chromedp.Evaluate[struct{ Lines, Overflow, Page int }](`(() => {
		const el = document.getElementById("workspace-output-arn");
		const lh = parseFloat(getComputedStyle(el).lineHeight);
		return {lines: Math.round(el.getBoundingClientRect().height / lh), overflow: el.scrollWidth - el.clientWidth,
			page: document.documentElement.scrollWidth - document.documentElement.clientWidth};
	})()`))
	require.Greater(t, box.Lines, 1, "the long value wraps at a phone's width")
	require.LessOrEqual(t, box.Overflow, 0, "the long value stays in its box")
	require.LessOrEqual(t, box.Page, 0, "the page does not scroll sideways")
	b.do(t, "copy the long value", chromedp.Click(chromedp.CSS(`button[data-copy="workspace-output-arn"]`), chromedp.NodeVisible))
	waitForText(t, b, "the copy to be confirmed", `[data-output="arn"] [data-testid="copy-status"]`, `s => s === "Copied"`, stepBase)
	require.Equal(t, longARN, clipboard(t, b), "the value whole, without the wrap points")
	requireAccessible(t, b, "the workspace page with its outputs")
	screenshotAt(t, b, "/tmp/shots37/smaller/workspace-outputs-390.png", 390, 844, true)
	screenshotAt(t, b, "/tmp/shots37/smaller/workspace-outputs-1366.png", 1366, 768, false)
	requireNoCSPViolations(t, b)
}

// recordOutputs writes the next version of run r's workspace's state, as an apply would,
// with extra outputs.
func recordOutputs(t *testing.T, app *webtest.App, r runmodel.Run, extra map[string]any) {
	t.Helper()
	ctx := t.Context()
	pred, err := app.System.StateStore.Predecessor(ctx, r.OrganizationID, r.WorkspaceID)
	require.NoError(t, err)
	data, err := app.System.StateStore.Content(ctx, r.OrganizationID, pred.VersionID)
	require.NoError(t, err)
	var st map[string]any
	require.NoError(t, json.Unmarshal(data, &st))
	st["serial"] = st["serial"].(float64) + 1
	outputs, _ := st["outputs"].(map[string]any)
	if outputs == nil {
		outputs = map[string]any{}
	}
	for k, v := range extra {
		outputs[k] = v
	}
	st["outputs"] = outputs
	next, err := json.Marshal(st)
	require.NoError(t, err)
	_, err = app.System.StateStore.RecordApplied(ctx, r.OrganizationID, r.WorkspaceID, r.ID, next, app.System.Runs.Staleness)
	require.NoError(t, err)
}

// grantClipboard lets the pages of origin write and read the clipboard without asking,
// as a person's browser lets a page they clicked in.
func grantClipboard(t *testing.T, b *browser, origin string) {
	t.Helper()
	ctx, cancel := bench.Context(b.ctx, stepBase)
	defer cancel()
	for _, name := range []string{"clipboard-read", "clipboard-write"} {
		err := chromedp.FromContext(b.ctx).Browser.Call(ctx, cdpbrowser.CommandSetPermission, cdpbrowser.SetPermissionParams{
			Permission: &cdpbrowser.PermissionDescriptor{Name: name}, Setting: cdpbrowser.PermissionSettingGranted, Origin: origin}, nil)
		require.NoError(t, err, "granting %s", name)
	}
}

// clipboard is what the clipboard holds, read by the page.
func clipboard(t *testing.T, b *browser) string {
	t.Helper()
	return run(t, b, "read the clipboard", chromedp.Evaluate[string](`navigator.clipboard.readText()`, chromedp.EvalAwaitPromise))
}
