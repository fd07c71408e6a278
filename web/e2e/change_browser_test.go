//go:build !fast

// Live: needs a browser (chromium, driven by chromedp).

package e2e_test

import (
	"net/url"
	"os"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"
	"github.com/stretchr/testify/require"

	"gantry/cmd/gantry/webtest"
	runmodel "gantry/models/run"
	"gantry/views/paths"
)

// changeShots is where the change page's screenshots go, for a person to look at.
const changeShots = "/tmp/shots37/change"

// TestChangeRenamePredictsReplaceInBrowser (issue 37, items 4 and 7): a requester opens
// a bucket workspace's Change, finds the workspace and environment fixed and the last
// applied inputs filled in, renames the bucket, and before submitting the preview says
// the bucket is replaced and its data lost, at risk 3 for an owner, with the name
// shown was → now. Renaming it back takes the replace away again.
func TestChangeRenamePredictsReplaceInBrowser(t *testing.T) {
	chrome := chromePath(t)
	require.NoError(t, os.MkdirAll(changeShots, 0o755))
	app := webtest.Start(t)
	operator := app.LoggedIn(t, operatorEmail)
	dev := app.OrgEnvironmentID(t, "acme", "development")
	applied := waitForRunRow(t, app, requestRunHTTP(t, app, operator, url.Values{"template": {"bucket"}, "environment": {dev},
		"workspace": {"team-assets"}, "kind": {"apply"}, "inputs.name": {"team-assets"}, "inputs.retention_days": {"14"},
		"inputs.region": {"eu-central"}}), runmodel.Succeeded)

	b := startBrowser(t, chrome)
	signInAs(t, b, app, operatorEmail, operatorPassword, "Olivia")
	b.do(t, "open the workspace", chromedp.Navigate(app.URL+paths.Workspace(applied.WorkspaceID)),
		chromedp.WaitVisible(chromedp.ID("change-workspace")))
	b.do(t, "choose Change", chromedp.Click(chromedp.ID("change-workspace"), chromedp.NodeVisible),
		chromedp.WaitVisible(chromedp.ID("submit-request")))
	require.True(t, strings.HasSuffix(location(t, b), paths.ChangeWorkspace("bucket", applied.WorkspaceID)), location(t, b))
	require.Contains(t, text(t, b, chromedp.CSS("h1")), "Change team-assets")
	require.Equal(t, "development", text(t, b, chromedp.CSS(`[data-testid="change-environment"]`)))
	require.Zero(t, count(t, b, `select#environment`), "the environment is not a choice")
	require.Equal(t, "team-assets", value(t, b, chromedp.ID("input-name")), "the last applied run's inputs")
	require.Equal(t, "14", value(t, b, chromedp.ID("input-retention_days")))
	require.Contains(t, text(t, b, chromedp.CSS(`[data-testid="note-name"]`)), "Fixed:")
	require.Contains(t, text(t, b, chromedp.CSS(`[data-testid="preview-replaces"]`)), "the plan would change nothing")
	requireAccessible(t, b, "the change page")
	screenshotAt(t, b, changeShots+"/change-page-1366.png", 1366, 900, false)
	b.do(t, "reset the viewport", chromedp.ResetViewport())

	// The rename: before submitting, the replace, the lost data, the raised risk and
	// who decides; the name was → now.
	retype(t, b, "input-name", "team-assets-eu")
	replaces := waitForText(t, b, "the replace prediction", `[data-testid="preview-replaces"]`,
		`s => s.includes("is replaced")`, liveBase)
	require.Contains(t, replaces, "sandbox_bucket.this")
	require.Contains(t, replaces, "name cannot change in place")
	require.Contains(t, replaces, "What it holds is lost")
	decider := text(t, b, chromedp.CSS(`[data-testid="preview-decider"]`))
	require.Contains(t, decider, "Risk 3")
	require.Contains(t, decider, "an owner, not the requester")
	require.NotContains(t, decider, "self-service")
	row := strings.Join(strings.Fields(text(t, b, chromedp.CSS(`[data-testid="was-now-name"]`))), " ")
	require.Equal(t, "Bucket name fixed team-assets changed to team-assets-eu", row)
	require.Equal(t, "changed", attribute(t, b, chromedp.CSS(`[data-testid="was-now-name"]`), "class"))
	requireAccessible(t, b, "the change page predicting a replace")
	screenshotAt(t, b, changeShots+"/change-rename-1366.png", 1366, 900, false)
	screenshotAt(t, b, changeShots+"/change-rename-390.png", 390, 844, true)
	b.do(t, "reset the viewport", chromedp.ResetViewport())

	// A name the template refuses: the preview cannot know, and says the plan will tell.
	retype(t, b, "input-name", "Team Assets")
	unknown := waitForText(t, b, "the plan will tell", `[data-testid="preview-replaces"]`,
		`s => s.includes("the plan will tell")`, liveBase)
	require.NotContains(t, unknown, "Nothing is replaced")

	// Back to the applied name with a longer retention: in place, self-service again.
	retype(t, b, "input-name", "team-assets")
	retype(t, b, "input-retention_days", "30")
	waitForText(t, b, "an in-place change", `[data-testid="preview-replaces"]`,
		`s => s.includes("Nothing is replaced or destroyed")`, liveBase)
	require.Contains(t, text(t, b, chromedp.CSS(`[data-testid="preview-decider"]`)), "self-service")
	screenshotAt(t, b, changeShots+"/change-in-place-1366.png", 1366, 900, false)
}
