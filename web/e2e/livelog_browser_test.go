//go:build !fast

// Live: needs a browser (chromium, driven by chromedp).

package e2e_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/url"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/chromedp/cdproto/network"
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
const liveLogScreenshot = "/tmp/gantry-live-log.png"

// gatedPlan is the mock, except that once armed, its next plan writes a line of its own
// to the live log and then holds the phase open, writing each line the test says, until
// the test lets it go: the plan lasts as long as the test needs, no clock involved.
type gatedPlan struct {
	runner.Runner
	armed   atomic.Bool
	holding chan struct{} // closed when the held plan has written its first line
	say     chan string
	release chan struct{}
}

func (g *gatedPlan) Plan(ctx context.Context, req runner.PlanRequest) (runner.PlanResult, error) {
	if g.armed.CompareAndSwap(true, false) {
		out := runner.LogTo(req.Log)
		fmt.Fprint(out, "Gantry test: this plan is held open by the test\n")
		close(g.holding)
	hold:
		for {
			select {
			case line := <-g.say:
				fmt.Fprint(out, line)
			case <-g.release:
				break hold
			case <-ctx.Done():
				return runner.PlanResult{}, ctx.Err()
			}
		}
	}
	return g.Runner.Plan(ctx, req)
}

// TestChangeWithLiveLogInBrowser: a requester opens an applied workspace and chooses
// Change; the request form comes filled in with the environment, workspace and inputs
// of its last applied run. She changes one input and submits, lands on the new run's
// page and watches it there, never reloaded: the plan step current and its log lines
// appearing as the phase writes them (the page's one stream: the run's, which carries
// the navigation's count too), then, the phase let go, the timeline moving on to
// SUCCEEDED with the plan's whole log in place of the live one.
func TestChangeWithLiveLogInBrowser(t *testing.T) {
	chrome := chromePath(t)
	// say holds a line: the test's send never waits for a plan that is gone (the line
	// then never shows, and waitForText says so); the next is sent once the line showed.
	gate := &gatedPlan{Runner: mock.New(), holding: make(chan struct{}), say: make(chan string, 1), release: make(chan struct{})}
	app := webtest.StartWith(t, webtest.Options{Runner: gate})
	operatorHTTP := app.LoggedIn(t, operatorEmail)
	dev := app.OrgEnvironmentID(t, "acme", "development")
	applied := waitForRunRow(t, app, requestRunHTTP(t, app, operatorHTTP, url.Values{"template": {"bucket"}, "environment": {dev},
		"workspace": {"live-exports"}, "kind": {"apply"}, "inputs.name": {"live-exports"}, "inputs.retention_days": {"14"},
		"inputs.region": {"eu-central"}}), runmodel.Succeeded)

	b := startBrowser(t, chrome)
	signInAs(t, b, app, operatorEmail, operatorPassword, "Olivia")
	b.do(t, "open the workspace", chromedp.Navigate(app.URL+paths.Workspace(applied.WorkspaceID)),
		chromedp.WaitVisible(chromedp.ID("change-workspace")))
	b.do(t, "choose Change", chromedp.Click(chromedp.ID("change-workspace"), chromedp.NodeVisible),
		chromedp.WaitVisible(chromedp.ID("submit-request")))
	require.Equal(t, dev, value(t, b, chromedp.ID("environment")), "the workspace's environment")
	require.Equal(t, "live-exports", value(t, b, chromedp.ID("workspace")), "the workspace")
	require.Equal(t, "live-exports", value(t, b, chromedp.ID("input-name")), "the last applied run's inputs")
	require.Equal(t, "14", value(t, b, chromedp.ID("input-retention_days")))
	require.Equal(t, "eu-central", value(t, b, chromedp.ID("input-region")))

	gate.armed.Store(true)
	retype(t, b, "input-retention_days", "30")
	b.do(t, "submit the change", chromedp.Evaluate[chromedp.Void](`document.getElementById("submit-request").click()`),
		chromedp.WaitVisible(chromedp.CSS(`[data-testid="run-state"]`)))
	runURL := location(t, b)
	u, err := url.Parse(runURL)
	require.NoError(t, err)
	m := runURLPath.FindStringSubmatch(u.Path)
	require.NotNil(t, m, "after submitting, the browser should be on a run page, not %s", runURL)
	runID := m[1]
	require.NotEqual(t, applied.ID, runID)
	bench.Receive(t, "the change's plan to start and hold", liveBase, gate.holding)
	run(t, b, "mark the page", chromedp.Evaluate[chromedp.Void](`window.gantryE2ENoReload = true`))
	loads := runPageLoads(b, runURL)

	// Mid-plan: the plan step is current and the log streams in.
	waitForRunState(t, b, "PLANNING")
	require.Equal(t, "current", stage(t, b, "Plan")["status"])
	waitForText(t, b, "the held plan's first line", `[data-testid="live-log"]`,
		`s => s.includes("this plan is held open by the test")`, liveBase)
	for _, line := range []string{"Refreshing the test's view of the bucket...\n", "Still planning, as the test asks [1 line]\n"} {
		gate.say <- line
		waitForText(t, b, "a line written while the phase runs", `[data-testid="live-log"]`,
			fmt.Sprintf(`s => s.includes(%q)`, strings.TrimSpace(line)), liveBase)
	}
	seqs := run(t, b, "read the chunks shown", chromedp.Evaluate[[]int](
		`[...document.querySelectorAll('[data-testid="live-log"] span[data-seq]')].map(s => +s.dataset.seq)`))
	require.NotEmpty(t, seqs)
	for i, s := range seqs {
		require.Equal(t, i+1, s, "each chunk once, in order: %v", seqs)
	}
	require.Equal(t, "live", liveText(t, b, "live-badge"))
	streams := run(t, b, "read the page's streams", chromedp.Evaluate[[]string](
		`[...document.querySelectorAll("[sse-connect]")].map(e => e.tagName.toLowerCase() + " " + e.getAttribute("sse-connect"))`))
	require.Len(t, streams, 1, "one stream per tab: %v", streams)
	require.True(t, strings.HasPrefix(streams[0], "body /runs/"+runID+"/events?since="), "the run's stream, on the body: %v", streams)
	responses := b.events.responseList()
	page := -1
	for i, r := range responses {
		if r.url == runURL && r.kind == string(network.ResourceTypeDocument) {
			page = i
		}
	}
	require.GreaterOrEqual(t, page, 0, "the run page's load was seen")
	for _, r := range responses[page:] {
		require.NotContains(t, r.url, paths.InboxEvents(), "the run page opened the inbox stream too")
	}
	screenshotAt(t, b, liveLogScreenshot, 1280, 800, false)
	b.do(t, "reset the viewport", chromedp.ResetViewport())

	// Let the plan go: the run moves on by itself, in place.
	close(gate.release)
	waitForRunState(t, b, "SUCCEEDED")
	require.Equal(t, "done", stage(t, b, "Plan")["status"])
	b.do(t, "wait for the live log to give way to the stored one", chromedp.WaitNotPresent(chromedp.CSS(`[data-testid="live-log"]`)))
	b.do(t, "open the plan log", chromedp.Click(chromedp.CSS(`details.log summary`), chromedp.NodeVisible),
		chromedp.WaitVisible(chromedp.ID("plan-log")))
	require.Contains(t, text(t, b, chromedp.ID("plan-log")), "SIMULATED", "the plan's whole log, as stored")
	require.True(t, run(t, b, "read the mark", chromedp.Evaluate[bool](`window.gantryE2ENoReload === true`)),
		"the run page was reloaded; it should have updated in place")
	require.Equal(t, loads, runPageLoads(b, runURL), "the run page was loaded again; documents seen: %v", b.events.documentList())
	final := waitForRunRow(t, app, runID, runmodel.Succeeded)
	var inputs map[string]any
	require.NoError(t, json.Unmarshal(final.Inputs, &inputs))
	require.Equal(t, map[string]any{"name": "live-exports", "retention_days": 30.0, "region": "eu-central", "versioning": true}, inputs,
		"the change carried the last applied inputs, with the one changed")
	requireNoCSPViolations(t, b)
}
