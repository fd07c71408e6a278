//go:build !fast

// Live: needs a browser (chromium, driven by chromedp).

package e2e_test

import (
	"net/url"
	"testing"

	"github.com/chromedp/chromedp"
	"github.com/stretchr/testify/require"

	"gantry/cmd/gantry/webtest"
	"gantry/models/risk"
	runmodel "gantry/models/run"
	"gantry/models/runport"
	"gantry/views/paths"
)

// Artifacts for a human; not assertions.
const (
	selfApprovedRunScreenshot = "/tmp/gantry-self-approved-run-1280.png"
	governanceScreenshot      = "/tmp/gantry-governance-1280.png"
)

// TestSelfApprovalInBrowser: with four eyes off for risk 1-protected, an operator
// approves her own run on its page; the page then marks the decision self-approved, so
// does its evidence report, and the auditor's governance report lists the apply as a
// self-approved finding, linking the run and the setting to change.
func TestSelfApprovalInBrowser(t *testing.T) {
	chrome := chromePath(t)
	app := webtest.Start(t)
	app.SaveMatrix(t, "acme", func(m *risk.Matrix) { webtest.Decision(m, risk.Level1Protected).FourEyes = false })
	staging := app.OrgEnvironmentID(t, "acme", "staging")
	id := requestRunHTTP(t, app, app.LoggedIn(t, operatorEmail), url.Values{"template": {"bucket"}, "environment": {staging},
		"workspace": {"own-bucket"}, "kind": {"apply"}, "inputs.name": {"own-bucket"}, "inputs.region": {"eu-west"}})
	waitForRunRow(t, app, id, runmodel.PendingApproval)

	b := startBrowser(t, chrome)
	signInAs(t, b, app, operatorEmail, operatorPassword, "Olivia")
	b.do(t, "open her own run and approve it", chromedp.Navigate(app.URL+paths.Run(id)),
		chromedp.Click(chromedp.ID("approve"), chromedp.NodeVisible))
	require.True(t, waitForRunRow(t, app, id, runmodel.Succeeded).SelfApproved())
	b.do(t, "see the run succeeded, its decision marked", chromedp.Navigate(app.URL+paths.Run(id)),
		chromedp.WaitVisible(chromedp.CSS(`[data-testid="self-approved"]`)))
	require.Equal(t, runport.SelfApproved, liveText(t, b, "self-approved"))
	screenshotAt(t, b, selfApprovedRunScreenshot, 1280, 900, false)
	b.do(t, "open the evidence report", chromedp.Click(chromedp.CSS(`[data-testid="evidence-link"]`), chromedp.NodeVisible),
		chromedp.WaitVisible(chromedp.CSS(`[data-testid="self-approved"]`)))
	require.Equal(t, "true", attribute(t, b, chromedp.CSS(`[data-testid="evidence-verdict"]`), "data-self-approved"))

	auditor := startBrowser(t, chrome)
	signInAs(t, auditor, app, "auditor@acme.test", "auditor-acme", "Audrey")
	auditor.do(t, "open the governance report", chromedp.Navigate(app.URL+paths.Governance()),
		chromedp.WaitVisible(chromedp.CSS(`[data-testid="governance-env-staging"] [data-testid="findings"]`)))
	findings := run(t, auditor, "read staging's findings", chromedp.Evaluate[string](
		`document.querySelector('[data-testid="governance-env-staging"] [data-testid="findings"]').innerText`))
	require.Contains(t, findings, "self-approved: 1 apply approved by their own requester")
	require.Contains(t, findings, "self-approval possible: four eyes is off for risk 1-protected")
	require.Equal(t, paths.Run(id), attribute(t, auditor, chromedp.CSS(`[data-testid="governance-env-staging"] [data-testid="finding-run"]`), "href"))
	require.Equal(t, "finding", attribute(t, auditor, chromedp.CSS(`[data-testid="governance-env-staging"] [data-testid="gate-approval-create-update"] [data-status]`), "data-status"))
	screenshotAt(t, auditor, governanceScreenshot, 1280, 900, false)
	requireNoCSPViolations(t, auditor)
}
