//go:build !fast

// Live: needs a browser (chromium, driven by chromedp).

package e2e_test

import (
	"os"
	"testing"

	"github.com/chromedp/chromedp"
	"github.com/stretchr/testify/require"

	"gantry/cmd/gantry/webtest"
	"gantry/views/paths"
)

// shots38 is where this test's screenshots go.
const shots38 = "/tmp/shots38/cat"

// TestTeamNamespaceTemplateInBrowser: the catalog offers the team namespace; its page says
// that deleting the namespace deletes everything in it; its request form asks for a
// DNS-label name and a team group, refuses a group of Kubernetes itself, and has no field
// for the ids Gantry sets.
func TestTeamNamespaceTemplateInBrowser(t *testing.T) {
	chrome := chromePath(t)
	require.NoError(t, os.MkdirAll(shots38, 0o755))
	app := webtest.Start(t)
	b := startBrowser(t, chrome)
	signInAs(t, b, app, operatorEmail, operatorPassword, "Olivia")

	b.do(t, "open the catalog", chromedp.Navigate(app.URL+paths.Catalog()),
		chromedp.WaitVisible(chromedp.CSS(`[data-testid="template-team-namespace"]`)))
	require.Contains(t, text(t, b, chromedp.CSS(`[data-testid="template-team-namespace"]`)), "Team namespace")
	screenshotAt(t, b, shots38+"/catalog-1280.png", 1280, 1300, false)
	b.do(t, "reset the viewport", chromedp.ResetViewport())

	b.do(t, "open the team namespace", chromedp.Navigate(app.URL+paths.Template("team-namespace")),
		chromedp.WaitVisible(chromedp.CSS(`[data-testid="irreversible"]`)))
	require.Contains(t, text(t, b, chromedp.CSS(`[data-testid="irreversible"]`)), "kubernetes_namespace")
	require.Contains(t, text(t, b, chromedp.CSS(`[data-testid="template-notes"]`)), "Destroying the namespace deletes everything in it")
	requireAccessible(t, b, "the team namespace's page")
	screenshotAt(t, b, shots38+"/template-1280.png", 1280, 1800, false)
	b.do(t, "reset the viewport", chromedp.ResetViewport())

	b.do(t, "open its request form", chromedp.Navigate(app.URL+paths.NewRequest("team-namespace")),
		chromedp.WaitVisible(chromedp.ID("submit-request")))
	for _, id := range []string{"input-name", "input-group", "input-cpu", "input-memory_gib", "input-pods"} {
		require.Equal(t, 1, count(t, b, "#"+id), id)
	}
	require.Zero(t, count(t, b, `[name^="inputs.gantry_"]`), "no field for what Gantry sets")
	b.do(t, "name a group of Kubernetes itself",
		chromedp.SetValue(chromedp.ID("environment"), app.OrgEnvironmentID(t, "acme", "development")),
		chromedp.SetValue(chromedp.ID("workspace"), "payments-ns"),
		chromedp.SetValue(chromedp.ID("input-name"), "payments"),
		chromedp.SetValue(chromedp.ID("input-group"), "system:authenticated"),
		chromedp.Evaluate[chromedp.Void](`document.getElementById("submit-request").click()`),
		chromedp.WaitVisible(chromedp.CSS(`[data-testid="error-summary"]`)))
	require.Contains(t, text(t, b, chromedp.CSS(`[data-testid="error-inputs.group"]`)), ":")
	require.Equal(t, "true", attribute(t, b, chromedp.ID("input-group"), "aria-invalid"))
	requireAccessible(t, b, "the team namespace's request form with a mistake")
	screenshotAt(t, b, shots38+"/request-group-error-1280.png", 1280, 1600, false)
	requireNoCSPViolations(t, b)
}
