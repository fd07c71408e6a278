package web_test

import (
	"bufio"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"gantry/cmd/gantry/webtest"
	"gantry/models/run"
	"gantry/runner"
	"gantry/runner/mock"
)

// liveStandIn is the mock's behaviour under a live executor's name: the executor a
// deferred runner resolves to once "built".
type liveStandIn struct {
	runner.Runner
	name string
}

func (l liveStandIn) Name() string    { return l.name }
func (l liveStandIn) Simulated() bool { return false }

// TestRunWaitsForTheOpenTofuBuild: while the default executor is still being prepared,
// a requested run stays QUEUED and its page says what it waits for, with the progress,
// which the live stream updates as the build moves on; the executors page shows the
// executor preparing (and refreshes itself); once ready, the run goes on by itself.
func TestRunWaitsForTheOpenTofuBuild(t *testing.T) {
	t.Parallel()
	var mu sync.Mutex
	progress := runner.Preparation{What: "the OpenTofu build", Step: "compiling OpenTofu", Done: 412, Total: 1630}
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
	operator := app.LoggedIn(t, "operator@acme.test")
	development := app.OrgEnvironmentID(t, "acme", "development")
	runID := app.RequestRun(t, operator, url.Values{"template": {"bucket"}, "environment": {development}, "workspace": {"early"},
		"kind": {"apply"}, "inputs.name": {"early-bucket"}})

	page := webtest.ReadBody(t, app.Get(t, operator, "/runs/"+runID))
	require.Contains(t, page, `data-testid="run-state" `+shownState(run.Queued))
	require.Contains(t, page, `data-testid="executor-wait"`)
	require.Contains(t, page, "Waiting for the OpenTofu build: 412 of 1630 packages (25 %)")
	require.Contains(t, page, "· compiling OpenTofu<")
	require.Contains(t, page, `<progress max="100" value="25" aria-label="Progress of the OpenTofu build">`)
	require.Contains(t, page, "The plan starts by itself once it is ready")

	// The live stream sends the new progress although the run itself did not move.
	var r run.Run
	require.NoError(t, app.DB.Where("id = ?", runID).Take(&r).Error)
	resp := app.Get(t, operator, fmt.Sprintf("/runs/%s/events?since=%d", runID, r.UpdatedAt.UnixNano()))
	defer resp.Body.Close()
	lines := make(chan string, 256)
	go func() {
		defer close(lines)
		sc := bufio.NewScanner(resp.Body)
		sc.Buffer(make([]byte, 1<<20), 1<<20)
		for sc.Scan() {
			lines <- sc.Text()
		}
	}()
	set(1304)
	waitLine := func(want string) {
		t.Helper()
		var last string
		receiveUntil(t, fmt.Sprintf("the stream to send %q", want), 15*time.Second, lines, func(l string) bool {
			last = l
			return strings.Contains(l, want)
		}, func() any { return fmt.Sprintf("last %q", last) })
	}
	waitLine("Waiting for the OpenTofu build: 1304 of 1630 packages (80 %)")

	admin := app.LoggedIn(t, "admin@acme.test")
	executors := webtest.ReadBody(t, app.Get(t, admin, "/executors"))
	require.Contains(t, executors, `data-testid="executor-preparing"`)
	require.Contains(t, executors, "Waiting for the OpenTofu build: 1304 of 1630 packages (80 %)")
	require.Contains(t, executors, `data-testid="executors-refresh"`)
	require.Contains(t, executors, `hx-trigger="every 2s"`)
	// An operator may not see the executors page at all.
	forbidden := app.Get(t, operator, "/executors")
	webtest.ReadBody(t, forbidden)
	require.Equal(t, http.StatusForbidden, forbidden.StatusCode)

	require.NoError(t, deferred.Resolve(liveStandIn{Runner: mock.New(), name: "tofu/oci"}))
	waitLine(`data-testid="run-state" ` + shownState(run.Succeeded))
	page = webtest.ReadBody(t, app.Get(t, operator, "/runs/"+runID))
	require.NotContains(t, page, `data-testid="executor-wait"`)
	executors = webtest.ReadBody(t, app.Get(t, admin, "/executors"))
	require.NotContains(t, executors, `data-testid="executors-refresh"`, "nothing left to refresh for")
	require.Contains(t, executors, `<span class="badge badge-on">healthy</span>`)
}
