//go:build !fast

// Live: needs a browser (chromium, driven by chromedp).

package e2e_test

import (
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"
	"github.com/stretchr/testify/require"

	"gantry/cmd/gantry/webtest"
	runmodel "gantry/models/run"
	"gantry/views/paths"
)

// wordsShots is where TestWordsInBrowser leaves its screenshots. Artifacts for a human;
// not assertions.
const wordsShots = "/tmp/gantry-shots/words"

// TestWordsInBrowser reads, as each person would, the texts issue 37 put in words: a
// template's input rules without a regular expression, the members page's live-cloud
// entitlement, the policy input on the policies page instead of a file name, and a
// refusal that says who may decide instead of a permission code.
func TestWordsInBrowser(t *testing.T) {
	chrome := chromePath(t) // fail fast, before the database and servers start
	app := webtest.Start(t)
	require.NoError(t, os.MkdirAll(wordsShots, 0o755))
	shot := func(b *browser, name string) {
		t.Helper()
		screenshotAt(t, b, filepath.Join(wordsShots, name+".png"), 1280, 800, false)
		b.do(t, "reset the viewport", chromedp.ResetViewport())
	}

	// An operator reads the bucket template's input rules.
	op := startBrowser(t, chrome)
	signInAs(t, op, app, operatorEmail, operatorPassword, "Olivia")
	op.do(t, "open the bucket template", chromedp.Navigate(app.URL+paths.Template("bucket")),
		chromedp.WaitVisible(chromedp.CSS(`h1`)))
	inputs := text(t, op, chromedp.CSS(`main table`))
	require.Contains(t, inputs, "lower-case letters, digits and hyphens; 3 to 41 characters; starting with a lower-case letter")
	require.NotContains(t, inputs, "^[a-z]")
	shot(op, "template-bucket")

	// An owner reads the members page.
	owner := startBrowser(t, chrome)
	signInAs(t, owner, app, ownerEmail, ownerPassword, ownerFirst)
	owner.do(t, "open the members page", chromedp.Navigate(app.URL+paths.Members()),
		chromedp.WaitVisible(chromedp.CSS(`[data-testid="members"]`)))
	// The header is shown in capitals (CSS); the text is the words.
	require.Contains(t, strings.ToLower(text(t, owner, chromedp.CSS(`[data-testid="members"] thead`))), "live cloud")
	require.NotContains(t, text(t, owner, chromedp.CSS(`main`)), "cloud.live")
	shot(owner, "members")

	// The policies page says what a rule sees, on the page.
	owner.do(t, "open the policies page and what a rule sees", chromedp.Navigate(app.URL+paths.Policies()),
		chromedp.Click(chromedp.CSS(`[data-testid="policy-input"] > summary`), chromedp.NodeVisible),
		chromedp.WaitVisible(chromedp.CSS(`[data-testid="policy-input"] ul`)))
	require.Contains(t, text(t, owner, chromedp.CSS(`[data-testid="policy-input"]`)), "input.run.environment")
	require.NotContains(t, text(t, owner, chromedp.CSS(`main`)), "docs/")
	owner.do(t, "scroll to the policy input", chromedp.ScrollIntoView(chromedp.CSS(`[data-testid="policy-input"]`)))
	shot(owner, "policies")
	elementShot(t, owner, `[data-testid="policy-input"]`, filepath.Join(wordsShots, "policy-input.png"))

	// A viewer opens the review of a run waiting for a decision: the page says who
	// decides and why she does not.
	operatorHTTP := app.LoggedIn(t, operatorEmail)
	id := requestRunHTTP(t, app, operatorHTTP, url.Values{"template": {"bucket"}, "environment": {app.OrgEnvironmentID(t, "acme", "staging")},
		"workspace": {"words-refusal"}, "kind": {"apply"}, "inputs.name": {"words-refusal"}, "inputs.region": {"eu-west"}})
	waitForRunRow(t, app, id, runmodel.PendingApproval)
	viewer := startBrowser(t, chrome)
	signInAs(t, viewer, app, viewerEmail, viewerPassword, "Victor")
	viewer.do(t, "open the waiting run's review", chromedp.Navigate(app.URL+paths.RunReview(id)),
		chromedp.WaitVisible(chromedp.CSS(`[data-testid="why-not"]`)))
	require.Equal(t, "Your role (viewer) does not decide on runs: operators, admins and owners do.",
		text(t, viewer, chromedp.CSS(`[data-testid="why-not"]`)))
	require.NotContains(t, text(t, viewer, chromedp.CSS(`main`)), "provisioning.")
	viewer.do(t, "scroll to the refusal", chromedp.ScrollIntoView(chromedp.CSS(`[data-testid="why-not"]`)))
	shot(viewer, "refusal-viewer")
	elementShot(t, viewer, `[data-testid="why-not"]`, filepath.Join(wordsShots, "refusal-why-not.png"))
}
