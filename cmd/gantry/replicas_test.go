package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"gorm.io/gorm"

	"gantry/bench"
	catalogfiles "gantry/catalog"
	"gantry/cmd/gantry/assemble"
	"gantry/models/authz"
	"gantry/models/db"
	"gantry/models/db/dbtest"
	"gantry/models/demo"
	"gantry/models/keyring"
	runpkg "gantry/models/run"
	"gantry/runner/mock"
)

// The replicas harness: several `gantry serve` processes (this test binary, see
// TestMain) on one database, as a deployment with replicas runs them. The reliability
// and scale-out tests start theirs with it.

// replicas is a database with its demo data and the portals serving it.
type replicas struct {
	t       *testing.T
	DSN     string
	DB      *gorm.DB
	Orgs    map[string]string
	KeySpec string
	Issuer  string
	// System is an in-process Gantry on the same database whose queue never starts:
	// tests make requests through its services and leave the work to the portals.
	System  *assemble.Portal
	Portals []*replica
	// runChanges signals at every run change committed in the database (changes).
	runChanges <-chan struct{}
}

// replica is one portal process.
type replica struct {
	*process
	URL string
	// MetricsURL is where its /metrics are served (an address of their own).
	MetricsURL string
}

// newReplicas prepares a fresh database with the demo data and an OpenID Provider.
func newReplicas(t *testing.T) *replicas { return newReplicasAt(t, dbtest.NewURL(t)) }

// newReplicasAt is newReplicas on the (empty) database at dsn.
func newReplicasAt(t *testing.T, dsn string) *replicas {
	t.Helper()
	ctx := context.Background()
	r := &replicas{t: t, DSN: dsn, KeySpec: keyring.NewKeySpec("replicas-1")}
	var err error
	r.DB, err = db.Open(ctx, r.DSN)
	require.NoError(t, err)
	t.Cleanup(func() {
		if s, err := r.DB.DB(); err == nil {
			s.Close()
		}
	})
	r.Issuer = startTestIssuer(t)
	r.Orgs, err = demo.Seed(ctx, r.DB, r.Issuer)
	require.NoError(t, err)
	keys, err := keyring.Parse(r.KeySpec)
	require.NoError(t, err)
	r.System, err = assemble.Build(ctx, assemble.Config{DB: r.DB, DSN: r.DSN, Keys: keys, CatalogFS: catalogfiles.FS, Runner: mock.New(),
		BaseURL: "http://127.0.0.1:1", Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	require.NoError(t, err)
	t.Cleanup(r.System.Close)
	return r
}

// start starts one more portal with args and waits until it serves.
func (r *replicas) start(args ...string) *replica {
	t := r.t
	t.Helper()
	env := []string{"GANTRY_DATABASE_URL=" + r.DSN, "GANTRY_KEYS=" + r.KeySpec, "GANTRY_OIDC_ISSUER=" + r.Issuer,
		"GANTRY_OIDC_CLIENT_ID=gantry", "GANTRY_OIDC_CLIENT_SECRET=s", "GANTRY_BASE_URL=http://127.0.0.1:1", "GANTRY_ADDR=127.0.0.1:0"}
	p := &replica{process: startPortal(t, env, args...)}
	output := bench.Later(func() string { return "its output:\n" + p.out.String() })
	// The line is an event: the buffer signals at every write.
	bench.Eventually(t, `the portal to log "gantry serving"`, 60*time.Second, func() (bool, any) {
		p.alive(t, "the portal to serve")
		for _, line := range strings.Split(p.out.String(), "\n") {
			var l struct {
				Msg         string `json:"msg"`
				Addr        string `json:"addr"`
				MetricsAddr string `json:"metrics_addr"`
			}
			if json.Unmarshal([]byte(line), &l) == nil && l.Msg == "gantry serving" {
				p.URL, p.MetricsURL = "http://"+l.Addr, "http://"+l.MetricsAddr+"/metrics"
				return true, nil
			}
		}
		return false, output
	}, bench.Wake(p.out.Wrote()))
	// Ready once its database answers within the probe's time (a busy machine may take
	// a moment). Readiness sends no event: this polls.
	bench.Eventually(t, "the portal's /readyz to answer 200", 30*time.Second, func() (bool, any) {
		p.alive(t, "the portal to be ready")
		status, err := getStatus(p.URL + "/readyz")
		if err != nil {
			return false, bench.Later(func() string { return fmt.Sprintf("%v; %s", err, output) })
		}
		return status == http.StatusOK, bench.Later(func() string { return fmt.Sprintf("%d; %s", status, output) })
	}, bench.Poll(100*time.Millisecond))
	r.Portals = append(r.Portals, p)
	return p
}

// getStatus GETs address and returns the status; a budget bounds the request, so a
// probe that hangs cannot outlast the wait it serves.
func getStatus(address string) (int, error) {
	ctx, cancel := bench.Context(context.Background(), 10*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, address, nil)
	if err != nil {
		return 0, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, err
	}
	resp.Body.Close()
	return resp.StatusCode, nil
}

// stop ends a portal gracefully: it drains its requests (10 s at most) and stops its
// queue (20 s at most), so a minute of idle-machine time is plenty.
func (p *replica) stop(t *testing.T) {
	t.Helper()
	require.NoError(t, p.cmd.Process.Signal(syscall.SIGTERM))
	require.NoError(t, p.waitExit(t, time.Minute), "graceful stop:\n%s", p.out)
}

// changes signals at every run change committed in the harness's database (LISTEN
// gantry_run_changes, notified at commit by whichever portal made the change, with the
// run's lease, audit events and next jobs in the same transaction): the event the
// replica tests wait on. One listener per harness, made at first use on the test's
// goroutine.
func (r *replicas) changes() <-chan struct{} {
	if r.runChanges == nil {
		r.runChanges = dbtest.NotificationsURL(r.t, r.DSN, runpkg.ChangesChannel)
	}
	return r.runChanges
}

// waitRun waits until run id is in want, within base of idle-machine time, woken by run
// changes. A run that ends in another state fails at once, and so does the exit of one
// of the working portals (those whose work the wait is for).
func (r *replicas) waitRun(id string, want runpkg.State, base time.Duration, working ...*replica) runpkg.Run {
	t := r.t
	t.Helper()
	wake := r.changes()
	what := fmt.Sprintf("run %s to be %s", id, want)
	var got runpkg.Run
	bench.Eventually(t, what, base, func() (bool, any) {
		for _, p := range working {
			p.alive(t, what)
		}
		require.NoError(t, r.DB.Where("id = ?", id).Take(&got).Error)
		if got.State != want && got.State.Terminal() {
			t.Fatalf("run %s ended %s (%s), want %s:%s", id, got.State, got.StateReason, want, outputs(working))
		}
		seen := got
		return got.State == want, bench.Later(func() string {
			return fmt.Sprintf("%s (%s)%s", seen.State, seen.StateReason, outputs(working))
		})
	}, bench.Wake(wake))
	return got
}

// outputs are the portals' outputs, for a failure message.
func outputs(portals []*replica) string {
	var b strings.Builder
	for _, p := range portals {
		fmt.Fprintf(&b, "\n--- portal %s:\n%s", p.URL, p.out)
	}
	return b.String()
}

// syncBuffer is an output buffer the process writes while the test reads it; every
// write signals Wrote, so a test waiting for a line wakes when one may have come.
type syncBuffer struct {
	mu    sync.Mutex
	buf   bytes.Buffer
	wrote chan struct{}
}

func newSyncBuffer() *syncBuffer { return &syncBuffer{wrote: make(chan struct{}, 1)} }

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	n, err := b.buf.Write(p)
	b.mu.Unlock()
	// Coalescing: one signal pending at most; the waiter reads the whole buffer again.
	select {
	case b.wrote <- struct{}{}:
	default:
	}
	return n, err
}

// Wrote signals after writes (one waiter at a time: a second one may miss a signal
// and wake at its next poll instead).
func (b *syncBuffer) Wrote() <-chan struct{} { return b.wrote }

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// TestDriftCheckRunsOnceAcrossReplicas: with three portals on one database, the drift
// schedule's dispatch runs on the leader only, and a workspace due a check gets one
// drift check run, however many dispatches see it due (DESIGN §9, §10).
func TestDriftCheckRunsOnceAcrossReplicas(t *testing.T) {
	t.Parallel()
	r := newReplicas(t)
	ctx := context.Background()
	const every = 2 * time.Second
	first := r.start("--drift-dispatch-every=" + every.String())
	second := r.start("--drift-dispatch-every=" + every.String())
	third := r.start("--drift-dispatch-every=" + every.String())

	// An applied workspace in development (self-service there), worked by the portals.
	var operator, dev string
	require.NoError(t, r.DB.Raw("SELECT id FROM users WHERE subject = 'acme-operator'").Scan(&operator).Error)
	require.NoError(t, r.DB.Raw("SELECT id FROM environments WHERE organization_id = ? AND name = 'development'", r.Orgs["acme"]).Scan(&dev).Error)
	subject := authz.Subject{UserID: operator, Name: "Olivia", OrganizationID: r.Orgs["acme"], Role: authz.RoleOperator}
	applied, err := r.System.Runs.Requests.Request(authz.WithSubject(ctx, subject), runpkg.Request{EnvironmentID: dev, Workspace: "replicas", Template: "bucket",
		Kind: runpkg.KindApply, Inputs: map[string]string{"name": "replicas-bucket"}})
	require.NoError(t, err)
	portals := []*replica{first, second, third}
	r.waitRun(applied.ID, runpkg.Succeeded, 60*time.Second, portals...)
	count := func(q string, args ...any) int64 {
		var n int64
		require.NoError(t, r.DB.Raw(q, args...).Scan(&n).Error)
		return n
	}
	dispatchesBefore := count("SELECT count(*) FROM river_job WHERE kind = 'drift.dispatch'")

	// Development checks every 5 minutes from now on, and the workspace was applied an
	// hour ago: it is due.
	require.NoError(t, r.DB.Exec("UPDATE environments SET drift_interval_minutes = 5 WHERE id = ?", dev).Error)
	require.NoError(t, r.DB.Exec("UPDATE runs SET finished_at = now() - interval '1 hour' WHERE id = ?", applied.ID).Error)
	started := time.Now()
	var check string
	// A run's creation notifies run changes too.
	bench.Eventually(t, "a drift check run of the workspace", 30*time.Second, func() (bool, any) {
		for _, p := range portals {
			p.alive(t, "a drift check run")
		}
		require.NoError(t, r.DB.Raw("SELECT coalesce(max(id), '') FROM runs WHERE workspace_id = ? AND kind = 'drift_check'", applied.WorkspaceID).Scan(&check).Error)
		return check != "", bench.Later(func() string { return "none" + outputs(portals) })
	}, bench.Wake(r.changes()))
	r.waitRun(check, runpkg.NoChanges, 30*time.Second, portals...)
	// Several more dispatches see the workspace (its check is recent now): nothing more.
	// The barrier that they had their chance (it was a sleep of four periods, fewer of
	// which ran on a busy machine): three dispatch jobs began after the check finished,
	// and completed. River records a job's end without a notification: this polls.
	bench.Eventually(t, "three drift dispatches to begin after the check finished and complete", 30*time.Second, func() (bool, any) {
		n := count(`SELECT count(*) FROM river_job WHERE kind = 'drift.dispatch' AND state = 'completed'
			AND attempted_at > (SELECT finished_at FROM runs WHERE id = ?)`, check)
		return n >= 3, fmt.Sprintf("%d such dispatches", n)
	}, bench.Poll(100*time.Millisecond))
	elapsed := time.Since(started)

	require.EqualValues(t, 1, count("SELECT count(*) FROM runs WHERE workspace_id = ? AND kind = 'drift_check'", applied.WorkspaceID),
		"one drift check for three portals")
	require.EqualValues(t, 1, count("SELECT count(*) FROM river_job WHERE kind = 'drift.check' AND args->>'workspace_id' = ?", applied.WorkspaceID),
		"one check job: the dispatch runs on the leader, and a slot's job is unique")
	require.EqualValues(t, 1, count("SELECT count(*) FROM audit_events WHERE target_id = ? AND action = 'run.queued'", check))
	// Only the leader dispatches: at most one dispatch per interval since the start (and
	// the one it runs on start), where three leaders would have inserted three times as many.
	dispatches := count("SELECT count(*) FROM river_job WHERE kind = 'drift.dispatch'") - dispatchesBefore
	require.Positive(t, dispatches)
	require.LessOrEqual(t, dispatches, int64(elapsed/every)+3, "dispatches in %s: the leader's alone", elapsed)

	// Runs by state come from the database: every replica reports the same, whichever
	// worked the run.
	gauges := func(p *replica) []string {
		resp, err := http.Get(p.MetricsURL)
		require.NoError(t, err)
		defer resp.Body.Close()
		require.Equal(t, http.StatusOK, resp.StatusCode)
		body, err := io.ReadAll(resp.Body)
		require.NoError(t, err)
		var lines []string
		for _, l := range strings.Split(string(body), "\n") {
			if strings.HasPrefix(l, "gantry_runs{") {
				lines = append(lines, l)
			}
		}
		return lines
	}
	runs := gauges(first)
	require.Contains(t, runs, `gantry_runs{environment="development",organization="acme",state="SUCCEEDED"} 1`)
	require.Contains(t, runs, `gantry_runs{environment="development",organization="acme",state="NO_CHANGES"} 1`, "the drift check")
	require.Equal(t, runs, gauges(second), "the same on every replica")
	require.Equal(t, runs, gauges(third), "the same on every replica")

	first.stop(t)
	second.stop(t)
	third.stop(t)
}
