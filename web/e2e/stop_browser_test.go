//go:build !fast

// Live: needs a browser (chromium, driven by chromedp).

package e2e_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/stretchr/testify/require"

	"gantry/bench"
	"gantry/cmd/gantry/webtest"
	"gantry/models/authz"
	"gantry/models/idempotency"
	runmodel "gantry/models/run"
	"gantry/runner"
	"gantry/runner/mock"
	"gantry/views/paths"
)

// heldApply is the mock, except that its apply writes its resources and then runs
// until it is interrupted (its context ends), as tofu does at SIGINT: it returns the
// state it wrote and says so in its log.
type heldApply struct {
	runner.Runner
	started chan struct{}
}

func (h heldApply) Apply(ctx context.Context, req runner.ApplyRequest) (runner.ApplyResult, error) {
	res, err := h.Runner.Apply(ctx, req)
	if err != nil {
		return res, err
	}
	fmt.Fprint(runner.LogTo(req.Log), "Gantry test: this apply runs until it is interrupted\n")
	close(h.started)
	<-ctx.Done()
	res.Log = append(res.Log, "\nInterrupt received.\n"...)
	return res, errors.New("the apply was interrupted")
}

// TestStopApplyInBrowser: while a run applies, its page offers "Stop the apply…" to
// its requester (an operator who could approve it) and not to a viewer; the
// confirmation page says what stopping does, refuses a missing reason at its field and
// keeps what was typed; confirmed with a reason, the run page reads APPLY_INTERRUPTED
// with the ending APPLY_CANCELLED and the reason.
func TestStopApplyInBrowser(t *testing.T) {
	chrome := chromePath(t)
	held := heldApply{Runner: mock.New(), started: make(chan struct{})}
	app := webtest.StartWith(t, webtest.Options{Runner: held})
	operator := app.LoggedIn(t, operatorEmail)
	id := requestRunHTTP(t, app, operator, url.Values{"template": {"bucket"}, "environment": {app.OrgEnvironmentID(t, "acme", "development")},
		"workspace": {"stop-logs"}, "kind": {"apply"}, "inputs.name": {"stop-logs"}, "inputs.retention_days": {"30"}, "inputs.region": {"eu-central"}})
	bench.Receive(t, "the apply to run", time.Minute, held.started)
	waitForRunRow(t, app, id, runmodel.Running)

	// Through the API: without the confirmation, or with too short a reason, refused
	// at its field (422), the run still applying.
	tok := app.Token(t, app.NewMember(t, "acme", "Otto Ops", authz.RoleOperator, false), "plan", "decide")
	for body, field := range map[string]string{`{"reason":"the wrong bucket region was requested"}`: "confirm", `{"reason":"oops","confirm":true}`: "reason"} {
		resp := app.APIKeyed(t, tok, idempotency.NewKey(), http.MethodPost, "/api/v1/runs/"+id+"/cancel", body)
		problem := webtest.ReadBody(t, resp)
		require.Equal(t, http.StatusUnprocessableEntity, resp.StatusCode, problem)
		require.Contains(t, problem, `"`+field+`"`)
	}
	require.Equal(t, runmodel.Running, waitForRunRow(t, app, id, runmodel.Running).State)

	viewer := startBrowser(t, chrome)
	signInAs(t, viewer, app, "viewer@acme.test", "viewer-acme", "Victor")
	viewer.do(t, "open the run as a viewer", chromedp.Navigate(app.URL+paths.Run(id)), chromedp.WaitVisible(`[data-testid="run-state"]`))
	require.Zero(t, count(t, viewer, "#cancel-run"), "a viewer is not offered what she may not do")

	b := startBrowser(t, chrome)
	signInAs(t, b, app, operatorEmail, operatorPassword, "Olivia")
	b.do(t, "open the applying run", chromedp.Navigate(app.URL+paths.Run(id)), chromedp.WaitVisible(chromedp.ID("cancel-run")))
	require.Equal(t, "Stop the apply…", text(t, b, chromedp.ID("cancel-run")))
	screenshotAt(t, b, decisionShot(t, "running"), 1280, 900, false)

	b.do(t, "open the confirmation", chromedp.Click(chromedp.ID("cancel-run")), chromedp.WaitVisible(chromedp.ID("cancel-reason")))
	require.Contains(t, text(t, b, chromedp.CSS("main")), "The run then ends "+runmodel.ApplyInterrupted.Words())
	b.do(t, "stop with too short a reason", chromedp.SendKeys(chromedp.ID("cancel-reason"), "oops"),
		chromedp.Click(chromedp.ID("confirm-cancel")), chromedp.WaitVisible(chromedp.ID("cancel-reason-error")))
	require.Equal(t, "oops", value(t, b, chromedp.ID("cancel-reason")), "what was typed is kept")
	require.Equal(t, runmodel.Running, waitForRunRow(t, app, id, runmodel.Running).State, "a refused stop changes nothing")
	screenshotAt(t, b, decisionShot(t, "confirm"), 1280, 900, false)

	b.do(t, "stop with a reason", chromedp.Clear(chromedp.ID("cancel-reason")), chromedp.SendKeys(chromedp.ID("cancel-reason"), "the wrong bucket region was requested"),
		chromedp.Click(chromedp.ID("confirm-cancel")), chromedp.WaitVisible(`[data-testid="run-ending"]`))
	require.Equal(t, "APPLY_INTERRUPTED", shownRunState(t, b))
	require.Equal(t, "APPLY_CANCELLED", attribute(t, b, chromedp.CSS(`[data-testid="run-ending"]`), "data-ending"))
	require.Contains(t, text(t, b, chromedp.CSS("main")), "the wrong bucket region was requested")
	require.Zero(t, count(t, b, "#cancel-run"), "nothing more to stop")
	stopped := app.WaitStopped(t, id, time.Minute)
	require.NotNil(t, stopped.NewStateVersionID)
	screenshotAt(t, b, decisionShot(t, "stopped"), 1280, 900, false)
}
