package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"gantry/bench"
	"gantry/models/authz"
	"gantry/models/db"
	"gantry/models/db/dbtest"
	"gantry/models/db/pgcluster"
	runpkg "gantry/models/run"
	"gantry/runner/mock"
)

// TestPostgresRestarts: the database is restarted under a working portal, with a fast
// and with an immediate shutdown, while a run waits for its approval, while one plans
// and while one applies. The portal keeps answering (/healthz) and says it is not
// ready while the database is away (/readyz), reconnects, and every run ends where it
// would have: nothing lost, nothing applied twice. A private cluster: restarting it
// disturbs no other test.
func TestPostgresRestarts(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dir, err := pgcluster.MkdirTemp("gantry-pgrestart-")
	require.NoError(t, err)
	cluster, err := pgcluster.Start(ctx, pgcluster.Options{Dir: filepath.Join(dir, "pg")})
	require.NoError(t, err)
	t.Cleanup(func() { _ = cluster.Stop(); os.RemoveAll(dir) })
	require.NoError(t, cluster.EnsureDatabase(ctx, "gantry"))
	sqlDB, err := db.OpenSQL(cluster.URL("gantry"))
	require.NoError(t, err)
	require.NoError(t, db.Migrate(ctx, sqlDB))
	sqlDB.Close()
	r := newReplicasAt(t, cluster.URL("gantry"))
	ledger := filepath.Join(dir, "applies.ledger")
	// Each phase takes 3 s, so a restart lands inside it.
	portal := r.start("--replica-id=restarts", "--runner-delay=3s", "--mock-ledger="+ledger)
	c := &chaos{t: t, r: r, fleet: &fleet{r: r, live: map[string]*replica{"restarts": portal}}, ledger: ledger, orgs: []string{"acme", "globex"}}
	c.api = &chaosAPI{fleet: c.fleet, http: &http.Client{Timeout: 20 * time.Second}}
	org := r.Orgs["acme"]
	operator := demoToken(t, r, "acme-operator", org, authz.RoleOperator, "read", "plan", "apply")
	admin := demoToken(t, r, "acme-admin", org, authz.RoleAdmin, "read", "decide")
	envID := func(name string) string {
		var id string
		require.NoError(t, r.DB.Raw("SELECT id FROM environments WHERE organization_id = ? AND name = ?", org, name).Scan(&id).Error)
		return id
	}
	request := func(env, ws string) string {
		status, out, err := c.api.change(ctx, operator, http.MethodPost, "/api/v1/requests", map[string]any{"template": "bucket", "environment_id": envID(env),
			"workspace": ws, "inputs": map[string]string{"name": ws, "retention_days": "30", "region": "eu-west"}})
		require.NoError(t, err)
		require.Equal(t, http.StatusCreated, status, string(out))
		var created struct{ ID string }
		require.NoError(t, json.Unmarshal(out, &created))
		return created.ID
	}
	// state reads through the portal (retrying while the database is away).
	state := func(id string) string {
		status, out, err := c.api.call(ctx, operator, http.MethodGet, "/api/v1/runs/"+id, nil, "")
		require.NoError(t, err)
		require.Equal(t, http.StatusOK, status, string(out))
		var doc struct{ State string }
		require.NoError(t, json.Unmarshal(out, &doc))
		return doc.State
	}
	// Run changes wake the waits below: the listener dials the database again after a
	// restart, and that signals too (a change may have committed meanwhile).
	changes := r.changes()
	waitState := func(id string, want runpkg.State) {
		t.Helper()
		bench.Eventually(t, fmt.Sprintf("run %s to be %s", id, want), 2*time.Minute, func() (bool, any) {
			portal.alive(t, fmt.Sprintf("run %s to be %s", id, want))
			st := runpkg.State(state(id))
			if st != want && st.Terminal() {
				t.Fatalf("run %s ended %s, want %s:\n%s", id, st, want, portal.out)
			}
			return st == want, bench.Later(func() string { return fmt.Sprintf("%s; the portal's output:\n%s", st, portal.out) })
		}, bench.Wake(changes))
	}
	// waitLeased waits until the run holds the lease of phase: granted in the transaction
	// that moves it into the phase, which notifies. The phase lasts 3 s (--runner-delay),
	// so a run found in none of the states upTo (those up to the phase) has passed it
	// unseen: that fails at once.
	waitLeased := func(id, phase string, upTo ...runpkg.State) {
		t.Helper()
		bench.Eventually(t, fmt.Sprintf("run %s to hold a %s lease", id, phase), time.Minute, func() (bool, any) {
			portal.alive(t, fmt.Sprintf("run %s's %s lease", id, phase))
			var got struct {
				Leases int64
				State  runpkg.State
			}
			require.NoError(t, r.DB.Raw("SELECT (SELECT count(*) FROM run_leases WHERE run_id = ? AND phase = ?) AS leases, (SELECT state FROM runs WHERE id = ?) AS state",
				id, phase, id).Scan(&got).Error)
			if got.Leases == 0 && !slices.Contains(upTo, got.State) {
				t.Fatalf("run %s is %s: it passed its %s phase before the test saw the lease", id, got.State, phase)
			}
			return got.Leases == 1, fmt.Sprintf("%d leases, run %s", got.Leases, got.State)
		}, bench.Wake(changes))
	}
	// waitLogged waits until a live log chunk of the run's phase is stored (notified on
	// run.LogChannel): the phase runs in its worker.
	logs := dbtest.NotificationsURL(t, cluster.URL("gantry"), runpkg.LogChannel)
	waitLogged := func(id, phase string) {
		t.Helper()
		bench.Eventually(t, fmt.Sprintf("run %s's %s to log its first line", id, phase), time.Minute, func() (bool, any) {
			portal.alive(t, fmt.Sprintf("run %s's %s log", id, phase))
			var chunks int64
			require.NoError(t, r.DB.Raw("SELECT count(*) FROM run_log_chunks WHERE run_id = ? AND phase = ?", id, phase).Scan(&chunks).Error)
			return chunks > 0, bench.Later(func() string { return fmt.Sprintf("no %s log yet; run %s", phase, state(id)) })
		}, bench.Wake(logs))
	}
	probe := func(path string) int {
		status, err := getStatus(portal.URL + path)
		require.NoError(t, err, "the portal keeps answering while the database is away")
		return status
	}
	// restart restarts the database with mode, checking the portal's answers while it is
	// away. The pause (3 s, fixed: the window the database stays away, long enough to
	// ask) is sampled until the restart returns, however long stopping and starting take.
	restart := func(mode string) {
		t.Helper()
		done := make(chan error, 1)
		go func() { done <- cluster.Restart(ctx, mode, 3*time.Second) }()
		sawNotReady, returned := false, false
		var restarted error
	sample:
		for !sawNotReady {
			select {
			case restarted = <-done:
				returned = true
				break sample
			default:
			}
			if probe("/readyz") == http.StatusServiceUnavailable {
				sawNotReady = true
				require.Equal(t, http.StatusOK, probe("/healthz"), "alive while the database is away")
			}
			time.Sleep(25 * time.Millisecond) // the sampling step, not a wait for anything
		}
		require.True(t, sawNotReady, "/readyz says not ready while the database is away (%s)", mode)
		if !returned {
			restarted = bench.Receive(t, "the database to restart", time.Minute, done)
		}
		require.NoError(t, restarted)
		// Readiness sends no event: this polls.
		bench.Eventually(t, fmt.Sprintf("/readyz to answer 200 after the %s restart", mode), time.Minute, func() (bool, any) {
			portal.alive(t, "the portal to be ready again")
			status := probe("/readyz")
			return status == http.StatusOK, status
		}, bench.Poll(100*time.Millisecond))
	}

	for _, mode := range []string{"fast", "immediate"} {
		// A run waiting for its approval survives the restart and is approved after it.
		waiting := request("staging", "pg-waiting-"+mode)
		waitState(waiting, runpkg.PendingApproval)
		restart(mode)
		require.Equal(t, string(runpkg.PendingApproval), state(waiting))
		status, out, err := c.api.call(ctx, admin, http.MethodGet, "/api/v1/runs/"+waiting+"/review", nil, "")
		require.NoError(t, err)
		require.Equal(t, http.StatusOK, status, string(out))
		var review struct {
			Evidence map[string]any `json:"evidence"`
		}
		require.NoError(t, json.Unmarshal(out, &review))
		status, out, err = c.api.change(ctx, admin, http.MethodPost, "/api/v1/runs/"+waiting+"/approve", map[string]any{"evidence": review.Evidence})
		require.NoError(t, err)
		require.Equal(t, http.StatusOK, status, string(out))
		waitState(waiting, runpkg.Succeeded)

		// A run planning when the database goes away plans on and applies.
		planning := request("development", "pg-planning-"+mode)
		waitLeased(planning, "plan", runpkg.Queued, runpkg.Planning)
		restart(mode)
		waitState(planning, runpkg.Succeeded)

		// A run applying when the database goes away records its apply once. The restart
		// comes once the apply runs in its worker (its first live log line is stored), not
		// as soon as its lease is visible: a restart then could cut the worker's connection
		// before it read the commit that began the apply, and the run, begun with nobody
		// applying it, ends APPLY_INTERRUPTED when its lease expires (seen in CI under
		// load: a lost commit acknowledgement, which this test is not about).
		applying := request("development", "pg-applying-"+mode)
		waitLeased(applying, "apply", runpkg.Queued, runpkg.Planning, runpkg.Planned, runpkg.Approved, runpkg.Running)
		waitLogged(applying, "apply")
		restart(mode)
		waitState(applying, runpkg.Succeeded)
	}
	c.checkSafety("after the restarts")
	applies, err := mock.ReadLedger(ledger)
	require.NoError(t, err)
	require.Len(t, applies, 6, "six runs applied, each once")
	var runs, versions int64
	require.NoError(t, r.DB.Raw("SELECT count(*) FROM runs").Scan(&runs).Error)
	require.NoError(t, r.DB.Raw("SELECT count(*) FROM state_versions").Scan(&versions).Error)
	require.EqualValues(t, 6, runs, "no run lost or duplicated")
	require.EqualValues(t, 6, versions, "one state version per apply")
	portal.stop(t)
}
