//go:build !fast

// Live: needs a browser (chromium, driven by chromedp).

package e2e_test

import (
	"os"
	"strings"
	"testing"
	"testing/fstest"

	"github.com/chromedp/chromedp"
	"github.com/stretchr/testify/require"

	"gantry/cmd/gantry/webtest"
	"gantry/models/bundle"
	"gantry/models/modules/modulestest"
	"gantry/views/paths"
)

// shots39 is where this test's screenshots go.
const shots39 = "/tmp/shots39/modules"

// TestChangedModuleArchiveInBrowser: the catalog offers the team bucket, which calls
// the allowlisted labels module. Its registry now serves a changed archive under the
// pinned version: a person who fills in the request form and submits it reads, in the
// error summary, which module was refused and both sha256, and nothing is requested.
func TestChangedModuleArchiveInBrowser(t *testing.T) {
	chrome := chromePath(t)
	require.NoError(t, os.MkdirAll(shots39, 0o755))
	cat := webtest.CatalogWith(t, nil)
	cat["allowlist.yaml"] = &fstest.MapFile{Data: []byte(strings.Replace(string(cat["allowlist.yaml"].Data),
		"    vendored: modules/labels-1.0.0.tar.gz\n", "", 1))}
	archive := cat["modules/labels-1.0.0.tar.gz"].Data
	changed := append(append([]byte(nil), archive...), '\n')
	reg := modulestest.NewRegistry(t, map[string][]byte{"platform/labels/sandbox/1.0.0": changed})
	app := webtest.StartWith(t, webtest.Options{CatalogFS: cat, ModuleClient: reg.Client()})
	b := startBrowser(t, chrome)
	signInAs(t, b, app, operatorEmail, operatorPassword, "Olivia")

	b.do(t, "open the catalog", chromedp.Navigate(app.URL+paths.Catalog()),
		chromedp.WaitVisible(chromedp.CSS(`[data-testid="template-team-bucket"]`)))
	require.Contains(t, text(t, b, chromedp.CSS(`[data-testid="template-team-bucket"]`)), "Team bucket")
	screenshotAt(t, b, shots39+"/catalog-1280.png", 1280, 1500, false)
	b.do(t, "reset the viewport", chromedp.ResetViewport())

	b.do(t, "open its request form", chromedp.Navigate(app.URL+paths.NewRequest("team-bucket")),
		chromedp.WaitVisible(chromedp.ID("submit-request")))
	b.do(t, "fill it in and submit",
		chromedp.SetValue(chromedp.ID("environment"), app.OrgEnvironmentID(t, "acme", "development")),
		chromedp.SetValue(chromedp.ID("workspace"), "payments-invoices"),
		chromedp.SetValue(chromedp.ID("input-team"), "payments"),
		chromedp.SetValue(chromedp.ID("input-name"), "invoices"),
		chromedp.SetValue(chromedp.ID("input-cost_center"), "cc-1042"),
		chromedp.Evaluate[chromedp.Void](`document.getElementById("submit-request").click()`),
		chromedp.WaitVisible(chromedp.CSS(`[data-testid="error-summary"]`)))
	summary := text(t, b, chromedp.CSS(`[data-testid="summary-template"]`))
	require.Contains(t, summary, "Template team-bucket cannot be used now: module registry.acme.example/platform/labels/sandbox 1.0.0")
	require.Contains(t, summary, "has "+bundle.Digest(changed)+", not the allowlisted "+bundle.Digest(archive))
	require.Contains(t, text(t, b, chromedp.CSS(`[data-testid="error-summary"]`)), "Nothing was created")
	requireAccessible(t, b, "the team bucket's request form refused for its module")
	screenshotAt(t, b, shots39+"/request-module-refused-1280.png", 1280, 1500, false)
	b.do(t, "reset the viewport", chromedp.ResetViewport())
	screenshotAt(t, b, shots39+"/request-module-refused-390.png", 390, 1500, true)
	requireNoCSPViolations(t, b)
	var runs int64
	require.NoError(t, app.DB.Raw("SELECT count(*) FROM runs").Scan(&runs).Error)
	require.Zero(t, runs)
}
