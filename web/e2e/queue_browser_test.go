//go:build !fast

// Live: needs a browser (chromium, driven by chromedp).

package e2e_test

import (
	"net/url"
	"testing"

	"github.com/chromedp/chromedp"
	"github.com/stretchr/testify/require"

	"gantry/bench"
	"gantry/cmd/gantry/webtest"
	runmodel "gantry/models/run"
	"gantry/runner/mock"
	"gantry/runner/runnertest"
	"gantry/views/paths"
)

// Artifacts for a human; not assertions.
const queueScreenshot = "/tmp/gantry-apply-queue.png"

// TestApplyQueueInBrowser: a requester opens her approved run while an earlier run of
// the workspace is still planning: the page says it waits to apply, next in line,
// behind that run (linked) and what it is doing. When the earlier plan comes to wait
// for a decision, the page says by itself (never reloaded, the run itself unchanged)
// that nothing holds the workspace now; then the run applies, in place.
func TestApplyQueueInBrowser(t *testing.T) {
	chrome := chromePath(t)
	// The earlier run's plan and my apply's attempts hold still while the test looks.
	phases, attempts := runnertest.NewPhases(mock.New()), runnertest.NewAttempts()
	app := webtest.StartWith(t, webtest.Options{Runner: phases, ApplyHooks: attempts.Hooks()})
	operatorHTTP := app.LoggedIn(t, operatorEmail)
	adminHTTP := app.LoggedIn(t, adminEmail)
	staging := app.OrgEnvironmentID(t, "acme", "staging")
	form := func() url.Values {
		return url.Values{"template": {"bucket"}, "environment": {staging}, "workspace": {"queue-exports"}, "kind": {"apply"},
			"inputs.name": {"queue-exports"}, "inputs.retention_days": {"14"}, "inputs.region": {"eu-central"}}
	}
	plan := phases.Hold(t, "", "plan")
	earlier := requestRunHTTP(t, app, operatorHTTP, form())
	bench.Receive(t, "the earlier run's plan to begin and hold", liveBase, plan.Entered)
	mine := waitForRunRow(t, app, requestRunHTTP(t, app, operatorHTTP, form()), runmodel.PendingApproval)
	approveHTTP(t, app, adminHTTP, mine)
	bench.Receive(t, "my apply to find the workspace busy", liveBase, attempts.Busy(mine.ID))
	first := waitForRunRow(t, app, earlier, runmodel.Planning)

	b := startBrowser(t, chrome)
	signInAs(t, b, app, operatorEmail, operatorPassword, "Olivia")
	runURL := app.URL + paths.Run(mine.ID)
	b.do(t, "open my approved run", chromedp.Navigate(runURL), chromedp.WaitVisible(chromedp.CSS(`[data-testid="apply-queue"]`)))
	waitForRunState(t, b, "APPROVED")
	require.Equal(t, "Waiting to apply: next in line", text(t, b, chromedp.CSS(`[data-testid="queue-place"]`)))
	require.Equal(t, "run "+first.Label(), text(t, b, chromedp.CSS(`[data-testid="queue-holder"]`)))
	require.Equal(t, paths.Run(first.ID), attribute(t, b, chromedp.CSS(`[data-testid="queue-holder"]`), "href"))
	require.Equal(t, "planning", text(t, b, chromedp.CSS(`[data-testid="queue-holder-phase"]`)))
	requireAccessible(t, b, "a run waiting to apply")
	screenshotAt(t, b, queueScreenshot, 1280, 800, false)
	b.do(t, "reset the viewport", chromedp.ResetViewport())
	run(t, b, "mark the page", chromedp.Evaluate[chromedp.Void](`window.gantryE2ENoReload = true`))
	loads := runPageLoads(b, runURL)

	// My next attempt waits: my run does not change while the earlier one moves on.
	attempt := attempts.HoldNext(t, mine.ID)
	bench.Receive(t, "my next apply attempt to wait", liveBase, attempt.Entered)
	plan.Release()
	waitForRunRow(t, app, earlier, runmodel.PendingApproval)
	waitForText(t, b, "the queue line to say nothing holds the workspace", `[data-testid="queue-place"]`,
		`s => s === "Next to apply"`, liveBase)
	require.Equal(t, "APPROVED", shownRunState(t, b), "my run itself did not move")

	attempt.Release()
	waitForRunState(t, b, "SUCCEEDED")
	b.do(t, "wait for the queue line to go", chromedp.WaitNotPresent(chromedp.CSS(`[data-testid="apply-queue"]`)))
	require.True(t, run(t, b, "read the mark", chromedp.Evaluate[bool](`window.gantryE2ENoReload === true`)),
		"the run page was reloaded; it should have updated in place")
	require.Equal(t, loads, runPageLoads(b, runURL), "the run page was loaded again")
	requireNoCSPViolations(t, b)
}
