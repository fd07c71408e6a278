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

// WaitForRun waits (at most timeout) until the run is in want, and fails with the run's
// logs when it ends elsewhere or does not get there in time.
func (a *App) WaitForRun(t testing.TB, runID string, want run.State, timeout time.Duration) run.Run {
	t.Helper()
	deadline := time.Now().Add(timeout)
	var r run.Run
	for {
		require.NoError(t, a.DB.Where("id = ?", runID).Take(&r).Error)
		if r.State == want {
			return r
		}
		if r.State.Terminal() {
			t.Fatalf("run %s ended %s, want %s: %s%s", runID, r.State, want, r.StateReason, a.RunLogs(t, r))
		}
		if time.Now().After(deadline) {
			t.Fatalf("run %s is still %s after %s, want %s: %s%s", runID, r.State, timeout, want, r.StateReason, a.RunLogs(t, r))
		}
		time.Sleep(25 * time.Millisecond)
	}
}

// RunLogs are a run's stored plan, apply and verify logs, for failure messages.
func (a *App) RunLogs(t testing.TB, r run.Run) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
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
