//go:build !fast

// Live: needs a browser (chromium, driven by chromedp).

package e2e_test

import (
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"testing"

	"github.com/chromedp/chromedp"
	"github.com/stretchr/testify/require"

	"gantry/cmd/gantry/webtest"
	"gantry/runner"
	"gantry/runner/mock"
)

const (
	// Artifacts for a human; not assertions.
	waitingRunScreenshot = "/tmp/gantry-run-waiting-1280.png"
	executorsScreenshot  = "/tmp/gantry-executors-preparing-1280.png"
)

// builtRunner is the mock's behaviour under a live executor's name.
type builtRunner struct {
	runner.Runner
	name string
}

func (b builtRunner) Name() string    { return b.name }
func (b builtRunner) Simulated() bool { return false }

// TestRunWaitingForTheBuildInBrowser: the operator's run page, opened while the
// default executor is still being prepared, says the run waits for the OpenTofu build
// with a progress bar that moves by itself (SSE) as the build goes on; the admin's
// executors page shows the executor preparing and refreshes itself (htmx); once the
// build is done the run page follows the run to SUCCEEDED without a reload.
func TestRunWaitingForTheBuildInBrowser(t *testing.T) {
	chrome := chromePath(t)
	var mu sync.Mutex
	progress := runner.Preparation{What: "the OpenTofu build", Step: "compiling OpenTofu", Done: 163, Total: 1630}
	set := func(done int) {
		mu.Lock()
		progress.Done = done
		mu.Unlock()
	}
	deferred := runner.NewDeferred("tofu/oci", true, func() runner.Preparation {
		mu.Lock()
		defer mu.Unlock()
		return progress
	})
	app := webtest.StartWith(t, webtest.Options{Runner: deferred})
	c := app.LoggedIn(t, operatorEmail)
	development := app.OrgEnvironmentID(t, "acme", "development")
	form := url.Values{"_csrf": {app.CSRF(t, c)}, "template": {"bucket"}, "environment": {development}, "workspace": {"early"},
		"kind": {"apply"}, "inputs.name": {"early-bucket"}}
	resp := app.PostForm(t, c, "/requests", form)
	webtest.ReadBody(t, resp)
	require.Equal(t, http.StatusSeeOther, resp.StatusCode)
	runPath := resp.Header.Get("Location")
	require.Regexp(t, runURLPath, runPath)

	b := startBrowser(t, chrome)
	signInAs(t, b, app, operatorEmail, operatorPassword, "Olivia")
	b.do(t, "open the run page", chromedp.Navigate(app.URL+runPath),
		chromedp.WaitVisible(chromedp.CSS(`[data-testid="executor-wait"]`)))
	require.Equal(t, "QUEUED", shownRunState(t, b))
	wait := liveText(t, b, "executor-wait")
	require.Contains(t, wait, "Waiting for the OpenTofu build: 163 of 1630 packages (10 %)")
	require.Contains(t, wait, "· compiling OpenTofu")
	require.Equal(t, 10, run(t, b, "read the progress", chromedp.Evaluate[int](`document.querySelector('[data-testid="executor-wait"] progress')?.value ?? -1`)))
	loads := runPageLoads(b, app.URL+runPath)

	set(1141)
	waitForPage(t, b, "the progress to move by itself", `document.querySelector('[data-testid="executor-wait"] progress')?.value == 70`,
		"executor-wait")
	require.Contains(t, liveText(t, b, "executor-wait"), "Waiting for the OpenTofu build: 1141 of 1630 packages (70 %)")
	screenshotAt(t, b, waitingRunScreenshot, 1280, 800, false)

	admin := startBrowser(t, chrome)
	signInAs(t, admin, app, adminEmail, adminPassword, "Adam")
	admin.do(t, "open the executors page", chromedp.Navigate(app.URL+"/executors"),
		chromedp.WaitVisible(chromedp.CSS(`[data-testid="executor-preparing"]`)))
	require.Contains(t, liveText(t, admin, "executor-tofu/oci"), "Waiting for the OpenTofu build: 1141 of 1630 packages (70 %)")
	set(1467)
	// The page refreshes itself every 2 s (hx-trigger), well within liveBase.
	waitForPage(t, admin, "the executors page to refresh itself", `document.querySelector('[data-testid="executor-tofu/oci"] progress')?.value == 90`,
		"executor-tofu/oci")
	screenshotAt(t, admin, executorsScreenshot, 1280, 800, false)

	require.NoError(t, deferred.Resolve(builtRunner{Runner: mock.New(), name: "tofu/oci"}))
	waitForPage(t, b, "the run to succeed, live", `document.querySelector('[data-testid="run-state"]')?.dataset.state == "SUCCEEDED"`,
		"run-state")
	require.Zero(t, run(t, b, "look for the waiting notice", chromedp.Evaluate[int](`document.querySelectorAll('[data-testid="executor-wait"]').length`)))
	require.Equal(t, loads, runPageLoads(b, app.URL+runPath), "the run page updated in place")
	waitForPage(t, admin, "the executor to show healthy", `document.querySelector('[data-testid="executor-tofu/oci"]')?.textContent.includes("healthy")`,
		"executor-tofu/oci")
	require.False(t, strings.Contains(liveText(t, admin, "executors"), "preparing"))
	requireNoCSPViolations(t, b)
	requireNoCSPViolations(t, admin)
}

// liveText reads an element of a page the live stream updates from the document as it
// stands: the stream may swap the element out between finding and reading it, and a
// node swapped out reads as empty.
func liveText(t *testing.T, b *browser, testid string) string {
	t.Helper()
	return run(t, b, "read "+testid, chromedp.Evaluate[string](liveTextOf(testid)))
}

// liveTextOf is liveText's JavaScript expression.
func liveTextOf(testid string) string {
	return fmt.Sprintf(`document.querySelector('[data-testid=%q]')?.innerText.trim() ?? ""`, testid)
}
