//go:build !fast

// Live: needs a browser (chromium, driven by chromedp).

package e2e_test

import (
	"context"
	"fmt"
	"io"
	"net/url"
	"os"
	"sync/atomic"
	"testing"

	"github.com/chromedp/chromedp"
	"github.com/stretchr/testify/require"

	"gantry/bench"
	"gantry/cmd/gantry/webtest"
	runmodel "gantry/models/run"
	"gantry/runner"
	"gantry/runner/mock"
	"gantry/views/paths"
)

// heldPhases is the mock, except that its next plan and its next apply, once armed,
// write a line to the live log and then hold the phase open until the test lets it go:
// each phase lasts as long as the test needs to look at it, no clock involved.
type heldPhases struct {
	runner.Runner
	plan, apply heldPhase
}

// heldPhase is one phase to hold: armed, the channel closed once it holds, and the one
// the test closes to let it go.
type heldPhase struct {
	armed            atomic.Bool
	holding, release chan struct{}
}

func newHeldPhase() heldPhase {
	return heldPhase{holding: make(chan struct{}), release: make(chan struct{})}
}

// hold writes its line and holds, when armed.
func (h *heldPhase) hold(ctx context.Context, log io.Writer, phase string) error {
	if !h.armed.CompareAndSwap(true, false) {
		return nil
	}
	fmt.Fprintf(runner.LogTo(log), "Gantry test: this %s is held open by the test\n", phase)
	close(h.holding)
	select {
	case <-h.release:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (h *heldPhases) Plan(ctx context.Context, req runner.PlanRequest) (runner.PlanResult, error) {
	if err := h.plan.hold(ctx, req.Log, "plan"); err != nil {
		return runner.PlanResult{}, err
	}
	return h.Runner.Plan(ctx, req)
}

func (h *heldPhases) Apply(ctx context.Context, req runner.ApplyRequest) (runner.ApplyResult, error) {
	if err := h.apply.hold(ctx, req.Log, "apply"); err != nil {
		return runner.ApplyResult{}, err
	}
	return h.Runner.Apply(ctx, req)
}

// TestLiveLogStartsOnTheFirstScreen: on a laptop's 1366×768 screen, a person who opens a
// run while it plans, and stays while it applies, sees the running phase's live log
// start without scrolling: the log comes right after the run's state and controls,
// above the gate timeline, in the page's order (what a screen reader and the keyboard
// follow too); the timeline follows it. Once the run ends the log gives way to the
// stored one among the details.
func TestLiveLogStartsOnTheFirstScreen(t *testing.T) {
	chrome := chromePath(t)
	held := &heldPhases{Runner: mock.New(), plan: newHeldPhase(), apply: newHeldPhase()}
	app := webtest.StartWith(t, webtest.Options{Runner: held})
	operator := app.LoggedIn(t, operatorEmail)
	dev := app.OrgEnvironmentID(t, "acme", "development")
	held.plan.armed.Store(true)
	held.apply.armed.Store(true)
	runID := requestRunHTTP(t, app, operator, url.Values{"template": {"bucket"}, "environment": {dev}, "workspace": {"fold-check"},
		"kind": {"apply"}, "inputs.name": {"fold-check"}, "inputs.region": {"eu-central"}, "reason": {"Exports for the quarterly report"}})
	bench.Receive(t, "the plan to start and hold", liveBase, held.plan.holding)

	b := startBrowser(t, chrome)
	signInAs(t, b, app, operatorEmail, operatorPassword, "Olivia")
	b.do(t, "a laptop's 1366×768 screen", chromedp.EmulateViewport(1366, 768))
	b.do(t, "open the planning run", chromedp.Navigate(app.URL+paths.Run(runID)),
		chromedp.WaitVisible(chromedp.CSS(`[data-testid="live-log"][data-phase="plan"]`)))
	waitForText(t, b, "the held plan's line", `[data-testid="live-log"]`, `s => s.includes("this plan is held open")`, liveBase)
	requireLogOnFirstScreen(t, b, "plan")
	shot(t, b, "/tmp/shots37/smaller/live-log-planning-1366x768.png")
	screenshotAt(t, b, "/tmp/shots37/smaller/live-log-planning-390.png", 390, 844, true)
	b.do(t, "back to the laptop's screen", chromedp.EmulateViewport(1366, 768))

	// The apply (self-service in development) starts by itself; the page follows it.
	close(held.plan.release)
	bench.Receive(t, "the apply to start and hold", liveBase, held.apply.holding)
	b.do(t, "wait for the apply's live log", chromedp.WaitVisible(chromedp.CSS(`[data-testid="live-log"][data-phase="apply"]`)))
	waitForText(t, b, "the held apply's line", `[data-testid="live-log"]`, `s => s.includes("this apply is held open")`, liveBase)
	requireLogOnFirstScreen(t, b, "apply")
	requireAccessible(t, b, "an applying run's page")
	shot(t, b, "/tmp/shots37/smaller/live-log-applying-1366x768.png")

	close(held.apply.release)
	waitForRunRow(t, app, runID, runmodel.Succeeded)
	b.do(t, "wait for the live log to give way to the stored one", chromedp.WaitNotPresent(chromedp.CSS(`[data-testid="live-log"]`)),
		chromedp.WaitVisible(chromedp.CSS(`#run-details details.log summary`)))
	requireNoCSPViolations(t, b)
}

// requireLogOnFirstScreen: with the page scrolled to the top, the live log's heading
// and its first line are inside the window, and the gate timeline comes after it.
func requireLogOnFirstScreen(t *testing.T, b *browser, phase string) {
	t.Helper()
	m := run(t, b, "measure the live log", chromedp.Evaluate[struct {
		Scroll, Window, Heading, Log, LineHeight float64
		TimelineAfter                            bool
	}](`(() => {
		window.scrollTo(0, 0);
		const log = document.getElementById("live-log-text");
		const timeline = document.querySelector('[data-testid="timeline"]');
		return {scroll: window.scrollY, window: window.innerHeight,
			heading: document.getElementById("live-log-title").getBoundingClientRect().top,
			log: log.getBoundingClientRect().top, lineHeight: parseFloat(getComputedStyle(log).lineHeight) || 20,
			timelineAfter: !!(log.compareDocumentPosition(timeline) & Node.DOCUMENT_POSITION_FOLLOWING)};
	})()`))
	t.Logf("%s: live log heading at %.0f px, its first line at %.0f px, of a %.0f px window", phase, m.Heading, m.Log, m.Window)
	require.Zero(t, m.Scroll)
	require.Less(t, m.Heading, m.Window, "the %s log's heading is on the first screen", phase)
	require.Less(t, m.Log+2*m.LineHeight, m.Window, "the %s log's first line is on the first screen", phase)
	require.True(t, m.TimelineAfter, "the timeline follows the live log")
}

// shot saves what the window shows (not the whole page): the first screen.
func shot(t *testing.T, b *browser, path string) {
	t.Helper()
	png := run(t, b, "take a screenshot of the window", chromedp.CaptureScreenshot())
	require.NoError(t, os.WriteFile(path, png, 0o644))
	t.Logf("screenshot of the first screen: %s", path)
}
