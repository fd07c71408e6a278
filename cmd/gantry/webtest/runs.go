package webtest

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"gantry/bench"
	"gantry/models/run"
)

// RunPath matches a run page's path (the Location a request form redirects to).
var RunPath = regexp.MustCompile(`^/runs/(run-[a-z0-9]+)$`)

// RequestRun submits the request form as c and returns the new run's id.
func (a *App) RequestRun(t testing.TB, c *http.Client, form url.Values) string {
	t.Helper()
	form.Set("_csrf", a.CSRF(t, c))
	resp := a.PostForm(t, c, "/requests", form)
	body := ReadBody(t, resp)
	require.Equal(t, http.StatusSeeOther, resp.StatusCode, body)
	m := RunPath.FindStringSubmatch(resp.Header.Get("Location"))
	require.NotNil(t, m, resp.Header.Get("Location"))
	return m[1]
}

// WaitForRun waits until the run is in want, woken by the run's change notifications (the
// product notifies at commit), and fails with the run's logs when it ends elsewhere or does
// not get there within base of idle-machine time (bench.Eventually: base × how busy the
// machine is, re-measured while it waits).
func (a *App) WaitForRun(t testing.TB, runID string, want run.State, base time.Duration) run.Run {
	t.Helper()
	var r run.Run
	require.NoError(t, a.DB.Where("id = ?", runID).Take(&r).Error)
	wake, stop := a.Server.Changes.Subscribe(r.OrganizationID, runID)
	defer stop()
	bench.Eventually(t, fmt.Sprintf("run %s to be %s", runID, want), base, func() (bool, any) {
		require.NoError(t, a.DB.Where("id = ?", runID).Take(&r).Error)
		if r.State != want && r.State.Terminal() {
			t.Fatalf("run %s ended %s, want %s: %s%s", runID, r.State, want, r.StateReason, a.RunLogs(t, r))
		}
		return r.State == want, runSeen(r)
	}, bench.Wake(wake))
	return r
}

// runSeen is how a wait reports the run it last saw.
func runSeen(r run.Run) string {
	if r.StateReason == "" {
		return string(r.State)
	}
	return fmt.Sprintf("%s (%s)", r.State, r.StateReason)
}

// RunLogs are a run's stored plan, apply and verify logs, for failure messages.
func (a *App) RunLogs(t testing.TB, r run.Run) string {
	t.Helper()
	ctx, cancel := bench.Context(context.Background(), 10*time.Second)
	defer cancel()
	var b strings.Builder
	for _, l := range []struct {
		name string
		id   *string
	}{{"plan", r.PlanLogArtifactID}, {"apply", r.ApplyLogArtifactID}, {"verify", r.VerifyLogArtifactID}} {
		if l.id == nil {
			continue
		}
		data, _, err := a.System.Artifacts.Get(ctx, r.OrganizationID, *l.id)
		if err != nil {
			fmt.Fprintf(&b, "\n--- %s log: %v\n", l.name, err)
			continue
		}
		fmt.Fprintf(&b, "\n--- %s log:\n%s", l.name, data)
	}
	return b.String()
}

// StopQueue stops the portal's job queue, waiting for its workers to finish the jobs they
// run: a test that holds locks no job may wait on, or wants an approved run to wait for
// its apply, stops it first.
func (a *App) StopQueue(t testing.TB) {
	t.Helper()
	ctx, cancel := bench.Context(context.Background(), 10*time.Second)
	defer cancel()
	require.NoError(t, a.System.Queue.Stop(ctx), "stopping the job queue (%v)", context.Cause(ctx))
}
