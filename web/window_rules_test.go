package web_test

import (
	"context"
	"errors"
	"net/http"
	"net/url"
	"regexp"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"gantry/bench"
	"gantry/cmd/gantry/webtest"
	"gantry/models/breakglass"
	"gantry/models/errs"
	"gantry/models/run"
	"gantry/runner"
	"gantry/runner/mock"
)

// openWindowOn writes an open break-glass window on workspace ws directly: these tests
// are about what runs do while one is open, on the simulated executor, where the
// service refuses to open one (there is no live cloud to change).
func openWindowOn(t *testing.T, app *webtest.App, r run.Run) string {
	t.Helper()
	return openWindowFor(t, app, r, "usr-nobody")
}

// openWindowFor is openWindowOn with the window asked for by user requester, who may
// then use and end it.
func openWindowFor(t *testing.T, app *webtest.App, r run.Run, requester string) string {
	t.Helper()
	id := "bgw-rules" + r.ID[len("run-"):]
	require.NoError(t, app.DB.Exec(`INSERT INTO breakglass_windows (id, organization_id, environment_id, workspace_id, state, reason,
		duration_minutes, terms_digest, requested_by, requested_by_name, decision_deadline, opened_at, ends_at)
		VALUES (?, ?, ?, ?, 'OPEN', 'window rules test', 60, 'sha256:rules', ?, 'Nobody', now(), now(), now() + interval '1 hour')`,
		id, r.OrganizationID, r.EnvironmentID, r.WorkspaceID, requester).Error)
	return id
}

// windowAct posts a window action as c with form (its CSRF token added).
func windowAct(t *testing.T, app *webtest.App, c *http.Client, id, action string, form url.Values) (int, string) {
	t.Helper()
	if form == nil {
		form = url.Values{}
	}
	form.Set("_csrf", app.CSRF(t, c))
	resp := app.PostForm(t, c, "/breakglass/"+id+"/"+action, form)
	return resp.StatusCode, webtest.ReadBody(t, resp)
}

func windowOf(t testing.TB, app *webtest.App, id string) breakglass.Window {
	t.Helper()
	var w breakglass.Window
	require.NoError(t, app.DB.Where("id = ?", id).Take(&w).Error)
	return w
}

func userIDOf(t *testing.T, app *webtest.App, email string) string {
	t.Helper()
	var id string
	require.NoError(t, app.DB.Raw("SELECT id FROM users WHERE email = ?", email).Scan(&id).Error)
	return id
}

// tokenArea is where a window's page shows its credentials, once.
var tokenArea = regexp.MustCompile(`(?s)data-testid="window-token">([^<]+)</textarea>`)

// gatedPhases is the mock, except that a phase the test armed (the next plan, or the
// next apply) waits, once begun, until the test releases it: the run stays PLANNING or
// RUNNING for as long as the test needs, whatever the machine's pace. (A phase delayed
// by a fixed time was a window a busy machine could miss.)
type gatedPhases struct {
	runner.Runner
	mu    sync.Mutex
	armed map[string]*phaseGate // "plan" or "apply": the gate the next one waits at
}

// phaseGate holds one phase: entered receives its run's id once it waits; release lets
// it go on.
type phaseGate struct {
	entered chan string
	open    chan struct{}
	release func()
}

func newGatedPhases() *gatedPhases {
	return &gatedPhases{Runner: mock.New(), armed: map[string]*phaseGate{}}
}

// arm makes the next phase of kind ("plan" or "apply") to begin wait at the gate it
// returns; the test's end releases the gate at the latest.
func (g *gatedPhases) arm(t *testing.T, kind string) *phaseGate {
	gate := &phaseGate{entered: make(chan string, 1), open: make(chan struct{})}
	gate.release = sync.OnceFunc(func() { close(gate.open) })
	t.Cleanup(gate.release)
	g.mu.Lock()
	g.armed[kind] = gate
	g.mu.Unlock()
	return gate
}

// hold waits at the gate armed for kind, if any, taking it: the phase after goes on.
func (g *gatedPhases) hold(ctx context.Context, kind, runID string) error {
	g.mu.Lock()
	gate := g.armed[kind]
	delete(g.armed, kind)
	g.mu.Unlock()
	if gate == nil {
		return nil
	}
	gate.entered <- runID
	select {
	case <-gate.open:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (g *gatedPhases) Plan(ctx context.Context, req runner.PlanRequest) (runner.PlanResult, error) {
	if err := g.hold(ctx, "plan", req.RunID); err != nil {
		return runner.PlanResult{}, err
	}
	return g.Runner.Plan(ctx, req)
}

func (g *gatedPhases) Apply(ctx context.Context, req runner.ApplyRequest) (runner.ApplyResult, error) {
	if err := g.hold(ctx, "apply", req.RunID); err != nil {
		return runner.ApplyResult{}, err
	}
	return g.Runner.Apply(ctx, req)
}

// TestNothingAppliesWhileAWindowIsOpen: while a break-glass window is open on a
// workspace, approving a run of it is refused (CONFLICT, naming the window), a plan
// finishing then goes STALE instead of waiting for a decision, and an approved run
// reaching its apply EXPIRES, each saying why; opening a window (WindowOpened) turns a
// waiting run STALE and an approved one EXPIRED, and is refused while a run applies.
func TestNothingAppliesWhileAWindowIsOpen(t *testing.T) {
	t.Parallel()
	gated := newGatedPhases()
	app := webtest.StartWith(t, webtest.Options{Runner: gated})
	operator := app.LoggedIn(t, "operator@acme.test")
	admin := app.LoggedIn(t, "admin@acme.test")
	staging := app.OrgEnvironmentID(t, "acme", "staging")
	ctx := context.Background()

	// Approving is refused while the window is open.
	waiting := waitForState(t, app, app.RequestRun(t, operator, bucketRequest(staging, "eu-west")), run.PendingApproval)
	window := openWindowOn(t, app, waiting)
	resp := app.PostForm(t, admin, "/runs/"+waiting.ID+"/approve", decisionForm(t, app, admin, waiting))
	body := webtest.ReadBody(t, resp)
	require.Equal(t, http.StatusConflict, resp.StatusCode, body)
	require.Contains(t, body, "Break-glass window "+window+" is open on this workspace")
	require.NotContains(t, webtest.ReadBody(t, app.Get(t, admin, "/runs/"+waiting.ID+"/review")), `id="approve"`, "no approve button meanwhile")
	require.Equal(t, run.PendingApproval, waitForState(t, app, waiting.ID, run.PendingApproval).State)

	// A plan that finishes while it is open goes STALE: the plan is held while the
	// window opens.
	plan := gated.arm(t, "plan")
	otherID := app.RequestRun(t, operator, bucketRequest(staging, "us-east"))
	require.Equal(t, otherID, bench.Receive(t, "the plan of "+otherID+" to begin", time.Minute, plan.entered), "the plan held")
	other := waitForState(t, app, otherID, run.Planning)
	openWindowOn(t, app, other)
	plan.release()
	stale := waitForState(t, app, other.ID, run.Stale)
	require.Contains(t, stale.StateReason, "is open on this workspace")

	// An approved run reaching its apply expires, nothing applied; the window's opening
	// itself turns approved runs EXPIRED and waiting ones STALE.
	third := waitForState(t, app, app.RequestRun(t, operator, bucketRequest(staging, "eu-central")), run.PendingApproval)
	// Its workspace busy (the slot taken by another run), so the approved run waits for
	// its apply while the window opens; then free again.
	require.NoError(t, app.DB.Exec("UPDATE workspaces SET active_run_id = ? WHERE id = ?", waiting.ID, third.WorkspaceID).Error)
	approve(t, app, admin, third)
	require.Equal(t, run.Approved, waitForState(t, app, third.ID, run.Approved).State)
	window3 := openWindowOn(t, app, third)
	require.NoError(t, app.DB.Exec("UPDATE workspaces SET active_run_id = NULL WHERE id = ?", third.WorkspaceID).Error)
	expired := waitForState(t, app, third.ID, run.Expired)
	require.Contains(t, expired.StateReason, "break-glass window "+window3)
	require.Nil(t, expired.NewStateVersionID)

	fourth := waitForState(t, app, app.RequestRun(t, operator, bucketRequest(app.OrgEnvironmentID(t, "acme", "production"), "eu-west")), run.PendingApproval)
	require.NoError(t, app.System.Runs.DriftChecks.WindowOpened(ctx, fourth.OrganizationID, fourth.WorkspaceID, "bgw-test"))
	require.Contains(t, waitForState(t, app, fourth.ID, run.Stale).StateReason, "break-glass window bgw-test opened")

	// A window does not open while a run applies: the apply is held meanwhile.
	dev := app.OrgEnvironmentID(t, "acme", "development")
	apply := gated.arm(t, "apply")
	applyingID := app.RequestRun(t, operator, bucketRequest(dev, "eu-west"))
	require.Equal(t, applyingID, bench.Receive(t, "the apply of "+applyingID+" to begin", time.Minute, apply.entered), "the apply held")
	applying := waitForState(t, app, applyingID, run.Running)
	err := app.System.Runs.DriftChecks.WindowOpened(ctx, applying.OrganizationID, applying.WorkspaceID, "bgw-test")
	require.True(t, errors.Is(err, errs.ErrConflict), "%v", err)
	require.Contains(t, err.Error(), "applying")
	apply.release()
	waitForState(t, app, applying.ID, run.Succeeded)
}
