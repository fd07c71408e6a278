//go:build !fast

// Live: needs a browser (chromium, driven by chromedp).

package e2e_test

import (
	"context"
	"errors"
	"net/url"
	"sync"
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

// Artifacts for a human; not assertions.
const queueScreenshot = "/tmp/gantry-apply-queue.png"

// gate holds one phase or attempt: entered closes once it waits, release lets it go.
type gate struct {
	entered chan struct{}
	open    chan struct{}
	release func()
}

func newGate(t *testing.T) *gate {
	g := &gate{entered: make(chan struct{}), open: make(chan struct{})}
	g.release = sync.OnceFunc(func() { close(g.open) })
	t.Cleanup(g.release)
	return g
}

func (g *gate) wait(ctx context.Context) error {
	close(g.entered)
	select {
	case <-g.open:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// queueScene is the mock, except that an armed gate holds the next plan, and the apply
// job's hooks tell when a run's apply found its workspace busy and hold a run's next
// attempt before it begins: the queue holds still for as long as the test looks.
type queueScene struct {
	runner.Runner
	mu       sync.Mutex
	nextPlan *gate
	attempts map[string]*gate         // by run: its next apply attempt waits here
	busy     map[string]chan struct{} // by run: its apply found the workspace busy
}

func (s *queueScene) Plan(ctx context.Context, req runner.PlanRequest) (runner.PlanResult, error) {
	s.mu.Lock()
	g := s.nextPlan
	s.nextPlan = nil
	s.mu.Unlock()
	if g != nil {
		if err := g.wait(ctx); err != nil {
			return runner.PlanResult{}, err
		}
	}
	return s.Runner.Plan(ctx, req)
}

func (s *queueScene) holdNextPlan(t *testing.T) *gate {
	g := newGate(t)
	s.mu.Lock()
	s.nextPlan = g
	s.mu.Unlock()
	return g
}

func (s *queueScene) holdNextAttempt(t *testing.T, runID string) *gate {
	g := newGate(t)
	s.mu.Lock()
	s.attempts[runID] = g
	s.mu.Unlock()
	return g
}

func (s *queueScene) busyOf(runID string) chan struct{} {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.busy[runID] == nil {
		s.busy[runID] = make(chan struct{}, 1)
	}
	return s.busy[runID]
}

func (s *queueScene) hooks() runner.ApplyHooks {
	return runner.ApplyHooks{
		Begin: func(ctx context.Context, runID string, _ int) {
			s.mu.Lock()
			g := s.attempts[runID]
			delete(s.attempts, runID)
			s.mu.Unlock()
			if g != nil {
				_ = g.wait(ctx)
			}
		},
		Begun: func(runID string, _ int, _ runmodel.State, err error) {
			if errors.Is(err, runmodel.ErrWorkspaceBusy) {
				select {
				case s.busyOf(runID) <- struct{}{}:
				default:
				}
			}
		},
	}
}

// TestApplyQueueInBrowser: a requester opens her approved run while an earlier run of
// the workspace is still planning: the page says it waits to apply, next in line,
// behind that run (linked) and what it is doing. When the earlier plan comes to wait
// for a decision, the page says by itself (never reloaded, the run itself unchanged)
// that nothing holds the workspace now; then the run applies, in place.
func TestApplyQueueInBrowser(t *testing.T) {
	chrome := chromePath(t)
	scene := &queueScene{Runner: mock.New(), attempts: map[string]*gate{}, busy: map[string]chan struct{}{}}
	app := webtest.StartWith(t, webtest.Options{Runner: scene, ApplyHooks: scene.hooks()})
	operatorHTTP := app.LoggedIn(t, operatorEmail)
	adminHTTP := app.LoggedIn(t, adminEmail)
	staging := app.OrgEnvironmentID(t, "acme", "staging")
	form := func() url.Values {
		return url.Values{"template": {"bucket"}, "environment": {staging}, "workspace": {"queue-exports"}, "kind": {"apply"},
			"inputs.name": {"queue-exports"}, "inputs.retention_days": {"14"}, "inputs.region": {"eu-central"}}
	}
	plan := scene.holdNextPlan(t)
	earlier := requestRunHTTP(t, app, operatorHTTP, form())
	bench.Receive(t, "the earlier run's plan to begin and hold", liveBase, plan.entered)
	mine := waitForRunRow(t, app, requestRunHTTP(t, app, operatorHTTP, form()), runmodel.PendingApproval)
	approveHTTP(t, app, adminHTTP, mine)
	bench.Receive(t, "my apply to find the workspace busy", liveBase, scene.busyOf(mine.ID))
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
	screenshotAt(t, b, queueScreenshot, 1280, 800, false)
	b.do(t, "reset the viewport", chromedp.ResetViewport())
	run(t, b, "mark the page", chromedp.Evaluate[chromedp.Void](`window.gantryE2ENoReload = true`))
	loads := runPageLoads(b, runURL)

	// My next attempt waits: my run does not change while the earlier one moves on.
	attempt := scene.holdNextAttempt(t, mine.ID)
	bench.Receive(t, "my next apply attempt to wait", liveBase, attempt.entered)
	plan.release()
	waitForRunRow(t, app, earlier, runmodel.PendingApproval)
	waitForText(t, b, "the queue line to say nothing holds the workspace", `[data-testid="queue-place"]`,
		`s => s === "Next to apply"`, liveBase)
	require.Equal(t, "APPROVED", text(t, b, chromedp.CSS(`[data-testid="run-state"]`)), "my run itself did not move")

	attempt.release()
	waitForRunState(t, b, "SUCCEEDED")
	b.do(t, "wait for the queue line to go", chromedp.WaitNotPresent(chromedp.CSS(`[data-testid="apply-queue"]`)))
	require.True(t, run(t, b, "read the mark", chromedp.Evaluate[bool](`window.gantryE2ENoReload === true`)),
		"the run page was reloaded; it should have updated in place")
	require.Equal(t, loads, runPageLoads(b, runURL), "the run page was loaded again")
	requireNoCSPViolations(t, b)
}
