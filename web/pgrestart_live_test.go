//go:build !fast

// Live: needs live OpenTofu (bin/tofu, built from tools/tofu).

package web_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"gantry/bench"
	"gantry/cmd/gantry/webtest"
	"gantry/models/db/pgcluster"
	"gantry/models/run"
	"gantry/sandbox/client"
)

// cloudGate holds the answer to the sandbox cloud's next change (a create, update or
// delete), once armed, until the test releases it: the cloud has made the change (while
// the database, which its token check may consult, is still up), the apply is inside
// tofu with its provider waiting for the answer, and it goes on to store its state only
// when the test says.
type cloudGate struct {
	mu      sync.Mutex
	armed   chan struct{}
	entered chan string // the held change ("POST /v1/bucket")
}

func newCloudGate() *cloudGate { return &cloudGate{entered: make(chan string, 1)} }

// arm makes the next change wait until release is called.
func (g *cloudGate) arm(t *testing.T) (release func()) {
	ch := make(chan struct{})
	g.mu.Lock()
	g.armed = ch
	g.mu.Unlock()
	release = sync.OnceFunc(func() { close(ch) })
	t.Cleanup(release)
	return release
}

func (g *cloudGate) wrap(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		next.ServeHTTP(w, r)
		if r.Method != http.MethodGet && strings.HasPrefix(r.URL.Path, "/v1/") {
			g.mu.Lock()
			ch := g.armed
			g.armed = nil
			g.mu.Unlock()
			if ch != nil {
				g.entered <- r.Method + " " + r.URL.Path
				select {
				case <-ch:
				case <-r.Context().Done():
				}
			}
		}
	})
}

// portalLog collects the portal's JSON log (its access log among it); wrote signals
// after each write (signals coalesce), the event a wait for a log line wakes on.
type portalLog struct {
	mu    sync.Mutex
	buf   bytes.Buffer
	wrote chan struct{}
}

func newPortalLog() *portalLog { return &portalLog{wrote: make(chan struct{}, 1)} }

func (l *portalLog) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	n, err := l.buf.Write(p)
	select {
	case l.wrote <- struct{}{}:
	default: // a signal is already pending
	}
	return n, err
}

// refused counts the requests to path, or under it, that the access log shows answered
// 503.
func (l *portalLog) refused(path string) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	n := 0
	sc := bufio.NewScanner(bytes.NewReader(l.buf.Bytes()))
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		var line struct {
			Msg, Path string
			Status    int
		}
		if json.Unmarshal(sc.Bytes(), &line) == nil && line.Msg == "request" && (line.Path == path || strings.HasPrefix(line.Path, path+"/")) &&
			line.Status == http.StatusServiceUnavailable {
			n++
		}
	}
	return n
}

// TestPostgresRestartDuringALiveApply: the database restarts (a fast shutdown, then an
// immediate one: a crash) while real OpenTofu applies: a bucket is created, then updated,
// in a development environment (self-service: no approval to wait for). Each time the
// sandbox cloud holds the provider's change until the database is down, so the apply is
// inside tofu when the database goes; tofu then stores its state while the database is
// away (the state backend answers 503, the access log shows it), and the database comes
// back only after that. Meanwhile /healthz answers and /readyz says not ready. Each run
// ends SUCCEEDED with one state version (same lineage, serial moving up), the state lock
// free, the cloud holding the one bucket with the second run's retention, and the audit
// chain intact. A private cluster: restarting it disturbs no other test.
func TestPostgresRestartDuringALiveApply(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	dir, err := pgcluster.MkdirTemp("gantry-pglive-")
	require.NoError(t, err)
	pgDir := filepath.Join(dir, "pg")
	cluster, err := pgcluster.Start(ctx, pgcluster.Options{Dir: pgDir})
	require.NoError(t, err)
	t.Cleanup(func() { _ = cluster.Stop(); os.RemoveAll(dir) })
	require.NoError(t, cluster.EnsureDatabase(ctx, "gantry"))

	gate := newCloudGate()
	logs := newPortalLog()
	app := startLiveWith(t, liveOptions{DatabaseURL: cluster.URL("gantry"), Log: logs, Cloud: gate.wrap})
	operator := app.LoggedIn(t, "operator@acme.test")
	dev := app.OrgEnvironmentID(t, "acme", "development")
	probe := func(path string) int {
		resp, err := http.Get(app.URL + path)
		require.NoError(t, err, "the portal keeps answering while the database is away")
		resp.Body.Close()
		return resp.StatusCode
	}

	// outage stops the database with mode and keeps it down until tofu, storing the
	// apply's state, has been refused (503) by the state backend, then starts it again on
	// its port. Restart's pause is only an upper bound: its context ends it.
	outage := func(mode, statePath string, release func()) {
		t.Helper()
		before := logs.refused(statePath)
		restartCtx, cancel := context.WithCancel(ctx)
		defer cancel()
		done := make(chan error, 1)
		// The pause is fixed, not a budget: it is only an upper bound (the cancel below ends
		// it once the test has seen what it waits for), and it never elapses.
		go func() { done <- cluster.Restart(restartCtx, mode, 5*time.Minute) }()
		// Readiness and the server's pid file have no event: they are polled.
		bench.Eventually(t, fmt.Sprintf("/readyz to say not ready while the database is away (%s)", mode), time.Minute, func() (bool, any) {
			status := probe("/readyz")
			return status == http.StatusServiceUnavailable, status
		}, bench.Poll(25*time.Millisecond))
		require.Equal(t, http.StatusOK, probe("/healthz"), "alive while the database is away")
		release()
		bench.Eventually(t, "tofu to go on storing the apply's state while the database is away, and be told 503", 2*time.Minute, func() (bool, any) {
			n := logs.refused(statePath)
			return n > before, fmt.Sprintf("%d refusals logged", n)
		}, bench.Wake(logs.wrote))
		require.Equal(t, http.StatusServiceUnavailable, probe("/readyz"), "still away")
		require.Equal(t, http.StatusOK, probe("/healthz"))
		cancel()
		<-done // context.Canceled in its pause, or a stop cut short: either way the server is going down
		bench.Eventually(t, "the server to be down", time.Minute, func() (bool, any) {
			_, err := os.Stat(filepath.Join(pgDir, "postmaster.pid"))
			return os.IsNotExist(err), err
		}, bench.Poll(25*time.Millisecond))
		cluster, err = pgcluster.Start(ctx, pgcluster.Options{Dir: pgDir, Port: cluster.Port()})
		require.NoError(t, err)
		bench.Eventually(t, fmt.Sprintf("/readyz to say ready again after the %s restart", mode), time.Minute, func() (bool, any) {
			status := probe("/readyz")
			return status == http.StatusOK, status
		}, bench.Poll(100*time.Millisecond))
	}

	var runs []run.Run
	for i, step := range []struct{ mode, retention, change string }{{"fast", "30", "POST /v1/bucket"}, {"immediate", "60", "PUT /v1/bucket/"}} {
		release := gate.arm(t)
		id := app.App.RequestRun(t, operator, url.Values{"template": {"bucket"}, "environment": {dev}, "workspace": {"pg-restart"},
			"kind": {"apply"}, "inputs.name": {"pg-restart-bucket"}, "inputs.retention_days": {step.retention}})
		var r run.Run
		change := receiveUntil(t, "the apply to reach the cloud", 3*time.Minute, gate.entered, func(string) bool { return true }, func() any {
			if err := app.DB.Where("id = ?", id).Take(&r).Error; err != nil {
				return err
			}
			return fmt.Sprintf("run is %s: %s\n%s", r.State, r.StateReason, phaseLogs(t, app.App, r))
		})
		require.True(t, strings.HasPrefix(change, step.change), change)
		require.NoError(t, app.DB.Where("id = ?", id).Take(&r).Error)
		require.Equal(t, run.Running, r.State, "the apply is inside tofu")

		// Woken by the run's changes (the portal's listener reconnects after the restart
		// and signals every subscriber then, as notices may have been missed).
		changed, stop := app.Server.Changes.Subscribe(r.OrganizationID, id)
		outage(step.mode, "/state/"+r.WorkspaceID, release)
		bench.Eventually(t, "run "+id+" to end", 3*time.Minute, func() (bool, any) {
			// The test's own pool may hold a connection the restart broke: ask again.
			if err := app.DB.Where("id = ?", id).Take(&r).Error; err != nil {
				return false, err
			}
			return r.State.Terminal(), r.State
		}, bench.Wake(changed))
		stop()
		require.Equal(t, run.Succeeded, r.State, "%s: %s\n%s", r.State, r.StateReason, phaseLogs(t, app.App, r))
		var held int64
		require.NoError(t, app.DB.Raw("SELECT count(*) FROM state_locks WHERE workspace_id = ? AND lock_id IS NOT NULL", r.WorkspaceID).Scan(&held).Error)
		require.Zero(t, held, "the state lock is free after run %d", i+1)
		runs = append(runs, r)
	}

	require.Equal(t, runs[0].WorkspaceID, runs[1].WorkspaceID)
	var versions []struct {
		Serial  int64
		Lineage string
		RunID   string
	}
	require.NoError(t, app.DB.Raw("SELECT serial, lineage, run_id FROM state_versions WHERE workspace_id = ? ORDER BY serial",
		runs[0].WorkspaceID).Scan(&versions).Error)
	require.Len(t, versions, 2, "one state version per apply")
	require.Equal(t, runs[0].ID, versions[0].RunID)
	require.Equal(t, runs[1].ID, versions[1].RunID)
	require.Greater(t, versions[1].Serial, versions[0].Serial)
	require.Equal(t, versions[0].Lineage, versions[1].Lineage, "the lineage is unchanged")
	for _, r := range runs {
		require.NotNil(t, r.NewStateVersionID, "run %s recorded its version", r.ID)
	}

	require.Equal(t, 1, app.cloudObjects(t, "bucket"), "the cloud holds the bucket once")
	cloudAdmin, err := client.New(app.cloudURL, webtest.CloudAdminToken)
	require.NoError(t, err)
	buckets, err := cloudAdmin.AdminList(ctx, "bucket")
	require.NoError(t, err)
	require.Len(t, buckets, 1)
	require.EqualValues(t, 60, buckets[0].Attributes["retention_days"], "the second apply updated it in place")
	require.EqualValues(t, 2, buckets[0].Generation, "created once, updated once")

	n, err := app.System.Audit.Verify(ctx, app.Orgs["acme"])
	require.NoError(t, err, "the audit chain verifies")
	require.Positive(t, n)
}
