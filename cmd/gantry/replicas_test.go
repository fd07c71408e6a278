package main

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"gorm.io/gorm"

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
}

// replica is one portal process.
type replica struct {
	cmd *exec.Cmd
	out *syncBuffer
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
	cmd, out := startPortal(t, env, args...)
	p := &replica{cmd: cmd, out: out}
	require.Eventually(t, func() bool {
		for _, line := range strings.Split(out.String(), "\n") {
			var l struct {
				Msg         string `json:"msg"`
				Addr        string `json:"addr"`
				MetricsAddr string `json:"metrics_addr"`
			}
			if json.Unmarshal([]byte(line), &l) == nil && l.Msg == "gantry serving" {
				p.URL, p.MetricsURL = "http://"+l.Addr, "http://"+l.MetricsAddr+"/metrics"
				return true
			}
		}
		return false
	}, 60*time.Second, 50*time.Millisecond, "portal never served:\n%s", out)
	// Ready once its database answers within the probe's time (a busy machine may take
	// a moment).
	require.Eventually(t, func() bool {
		resp, err := http.Get(p.URL + "/readyz")
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK
	}, 30*time.Second, 100*time.Millisecond, "portal never ready:\n%s", out)
	r.Portals = append(r.Portals, p)
	return p
}

// stop ends a portal gracefully.
func (p *replica) stop(t *testing.T) {
	t.Helper()
	require.NoError(t, p.cmd.Process.Signal(syscall.SIGTERM))
	require.NoError(t, p.cmd.Wait(), "graceful stop:\n%s", p.out)
}

// syncBuffer is an output buffer the process writes while the test reads it.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

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
	applied, err := r.System.Runs.Request(authz.WithSubject(ctx, subject), runpkg.Request{EnvironmentID: dev, Workspace: "replicas", Template: "bucket",
		Kind: runpkg.KindApply, Inputs: map[string]string{"name": "replicas-bucket"}})
	require.NoError(t, err)
	state := func(id string) runpkg.State {
		var s runpkg.State
		require.NoError(t, r.DB.Raw("SELECT state FROM runs WHERE id = ?", id).Scan(&s).Error)
		return s
	}
	require.Eventually(t, func() bool { return state(applied.ID) == runpkg.Succeeded }, 60*time.Second, 50*time.Millisecond,
		"the portals never applied it:\n%s\n%s\n%s", first.out, second.out, third.out)
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
	require.Eventually(t, func() bool {
		return r.DB.Raw("SELECT id FROM runs WHERE workspace_id = ? AND kind = 'drift_check'", applied.WorkspaceID).Scan(&check).Error == nil && check != ""
	}, 30*time.Second, 50*time.Millisecond, "no drift check was scheduled:\n%s\n%s\n%s", first.out, second.out, third.out)
	require.Eventually(t, func() bool { return state(check) == runpkg.NoChanges }, 30*time.Second, 50*time.Millisecond)
	// Several more dispatches see the workspace (its check is recent now): nothing more.
	time.Sleep(4 * every)
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
