//go:build !fast

// Live: needs a browser (chromium, driven by chromedp).

package e2e_test

import (
	"net/http"
	"net/url"
	"os"
	"regexp"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"
	"github.com/stretchr/testify/require"

	"gantry/cmd/gantry/webtest"
	runmodel "gantry/models/run"
	"gantry/policies"
	"gantry/views/paths"
)

// Artifacts for a human; not assertions.
const stateWordsShots = "/tmp/gantry-shots/states/"

// codesShown matches the codes of run states, kinds and policy outcomes as whole words.
func codesShown() *regexp.Regexp {
	var codes []string
	for _, s := range runmodel.States {
		codes = append(codes, string(s))
	}
	codes = append(codes, string(runmodel.KindPlanOnly), string(runmodel.KindDrift), string(policies.OutcomeSoft), string(policies.OutcomeHard))
	return regexp.MustCompile(`\b(` + strings.Join(codes, "|") + `)\b`)
}

// TestStatesInWordsInBrowser: as an admin reads them, the inbox after a decision, a run
// blocked by policy, a dry run, the runs list and the audit history say states, kinds
// and policy outcomes in words, no code anywhere in what the page shows; every state
// badge carries its code in data-state, where this test (and any script) reads it.
func TestStatesInWordsInBrowser(t *testing.T) {
	chrome := chromePath(t)
	require.NoError(t, os.MkdirAll(stateWordsShots, 0o755))
	app := webtest.Start(t)
	operator := app.LoggedIn(t, operatorEmail)
	dev, staging := app.OrgEnvironmentID(t, "acme", "development"), app.OrgEnvironmentID(t, "acme", "staging")
	request := func(form url.Values) string {
		t.Helper()
		form.Set("_csrf", app.CSRF(t, operator))
		resp := app.PostForm(t, operator, "/requests", form)
		webtest.ReadBody(t, resp)
		require.Equal(t, http.StatusSeeOther, resp.StatusCode)
		return strings.TrimPrefix(resp.Header.Get("Location"), "/runs/")
	}
	bucket := func(env, name, kind string) url.Values {
		return url.Values{"template": {"bucket"}, "environment": {env}, "workspace": {name}, "kind": {kind}, "inputs.name": {name}}
	}
	dry := request(bucket(dev, "words-dry", string(runmodel.KindPlanOnly)))
	blocked := request(url.Values{"template": {"postgres"}, "environment": {staging}, "workspace": {"words-orders"}, "kind": {"apply"},
		"inputs.name": {"words-orders"}, "inputs.engine_version": {"16"}, "inputs.size": {"small"}, "inputs.storage_gb": {"20"},
		"inputs.backup_retention_days": {"1"}, "inputs.network_cidr": {"10.30.0.0/16"}})
	first := request(bucket(staging, "words-first", "apply"))
	second := request(bucket(staging, "words-second", "apply"))
	waitForRunRow(t, app, dry, runmodel.Planned)
	waitForRunRow(t, app, blocked, runmodel.PolicyBlocked)
	waitForRunRow(t, app, first, runmodel.PendingApproval)
	waitForRunRow(t, app, second, runmodel.PendingApproval)

	b := startBrowser(t, chrome)
	signInAs(t, b, app, adminEmail, adminPassword, adminFirst)
	codes := codesShown()
	shown := func(page string) string {
		t.Helper()
		main := run(t, b, "read "+page, chromedp.Evaluate[string](`document.querySelector("main").innerText`))
		require.Empty(t, codes.FindAllString(main, -1), "%s shows codes to people:\n%s", page, main)
		badges := run(t, b, "read the state badges of "+page, chromedp.Evaluate[[][2]string](
			`[...document.querySelectorAll("main [data-state]")].map(e => [e.dataset.state, e.innerText.trim()])`))
		for _, badge := range badges {
			if s := runmodel.State(badge[0]); s.Valid() {
				require.Equal(t, s.Words(), badge[1], "%s: the badge of %s", page, badge[0])
			}
		}
		return main
	}

	// The inbox after a decision: "Now Approved" (or wherever the run is by then).
	b.do(t, "open the first run's review", chromedp.Navigate(app.URL+paths.RunReview(first)), chromedp.WaitVisible(chromedp.ID("approve")))
	require.Equal(t, string(runmodel.PendingApproval), shownRunState(t, b))
	require.Equal(t, runmodel.PendingApproval.Words(), text(t, b, chromedp.CSS(`[data-testid="run-state"]`)))
	shown("the review")
	b.do(t, "approve it", chromedp.Click(chromedp.ID("approve"), chromedp.NodeVisible))
	waitForNewPage(t, b, "decided="+first)
	now := attribute(t, b, chromedp.CSS(`[data-testid="decided-state"]`), "data-state")
	require.True(t, runmodel.State(now).Valid(), "the panel's badge carries the state's code: %q", now)
	require.Equal(t, runmodel.State(now).Words(), text(t, b, chromedp.CSS(`[data-testid="decided-state"]`)))
	shown("the inbox after a decision")
	requireAccessible(t, b, "the inbox after a decision")
	screenshotAt(t, b, stateWordsShots+"inbox-decided-1280.png", 1280, 800, false)
	b.do(t, "reset the viewport", chromedp.ResetViewport())

	// A run blocked by policy, and the policy's outcome, in words.
	b.do(t, "open the blocked run", chromedp.Navigate(app.URL+paths.Run(blocked)), chromedp.WaitVisible(chromedp.CSS(`[data-testid="review-summary"]`)))
	require.Equal(t, string(runmodel.PolicyBlocked), shownRunState(t, b))
	main := shown("the blocked run's page")
	require.Contains(t, main, "Blocked by policy")
	require.Contains(t, main, "Failed, may be overridden")
	requireAccessible(t, b, "a run blocked by policy")
	screenshotAt(t, b, stateWordsShots+"run-blocked-1280.png", 1280, 900, false)
	b.do(t, "reset the viewport", chromedp.ResetViewport())

	// A dry run says what it is.
	b.do(t, "open the dry run", chromedp.Navigate(app.URL+paths.Run(dry)), chromedp.WaitVisible(chromedp.CSS(`[data-testid="run-kind"]`)))
	require.Equal(t, string(runmodel.KindPlanOnly), attribute(t, b, chromedp.CSS(`[data-testid="run-kind"]`), "data-kind"))
	require.Equal(t, "Dry run: plan only, never applied", text(t, b, chromedp.CSS(`[data-testid="run-kind"]`)))
	require.Contains(t, shown("the dry run's page"), "Dry run of bucket")
	screenshotAt(t, b, stateWordsShots+"run-dry-1280.png", 1280, 900, false)
	b.do(t, "reset the viewport", chromedp.ResetViewport())

	// The runs list and the audit history.
	b.do(t, "open the runs list", chromedp.Navigate(app.URL+paths.Runs()), chromedp.WaitVisible(chromedp.CSS(`[data-testid="run-`+second+`"]`)))
	main = shown("the runs list")
	require.Contains(t, main, "Waiting for approval")
	require.Equal(t, string(runmodel.PendingApproval), attribute(t, b, chromedp.CSS(`[data-testid="run-`+second+`"] [data-state]`), "data-state"))
	screenshotAt(t, b, stateWordsShots+"runs-list-1280.png", 1280, 900, false)
	b.do(t, "reset the viewport", chromedp.ResetViewport())
	b.do(t, "open the audit history", chromedp.Navigate(app.URL+"/audit"), chromedp.WaitVisible(chromedp.CSS(`[data-testid="chain-state"]`)))
	main = shown("the audit history")
	require.Contains(t, main, "to “Blocked by policy”")
	require.Contains(t, main, "to “Waiting for approval”")
	screenshotAt(t, b, stateWordsShots+"audit-1280.png", 1280, 900, false)
	requireNoCSPViolations(t, b)
}
