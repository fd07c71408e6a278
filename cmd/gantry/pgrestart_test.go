package main

import (
	"context"
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"gantry/models/authz"
	"gantry/models/db"
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
	waitState := func(id string, want ...runpkg.State) {
		t.Helper()
		require.Eventually(t, func() bool {
			st := state(id)
			for _, w := range want {
				if st == string(w) {
					return true
				}
			}
			return false
		}, 2*time.Minute, 100*time.Millisecond, "run %s never reached %v (now %s):\n%s", id, want, state(id), portal.out)
	}
	leased := func(id, phase string) bool {
		var n int64
		require.NoError(t, r.DB.Raw("SELECT count(*) FROM run_leases WHERE run_id = ? AND phase = ?", id, phase).Scan(&n).Error)
		return n == 1
	}
	probe := func(path string) int {
		resp, err := http.Get(portal.URL + path)
		require.NoError(t, err, "the portal keeps answering while the database is away")
		resp.Body.Close()
		return resp.StatusCode
	}
	// restart restarts the database with mode, checking the portal's answers while it is
	// away (the pause is long enough to ask).
	restart := func(mode string) {
		t.Helper()
		done := make(chan error, 1)
		go func() { done <- cluster.Restart(ctx, mode, 3*time.Second) }()
		sawNotReady := false
		for i := 0; i < 200 && !sawNotReady; i++ {
			if probe("/readyz") == http.StatusServiceUnavailable {
				sawNotReady = true
				require.Equal(t, http.StatusOK, probe("/healthz"), "alive while the database is away")
			}
			time.Sleep(25 * time.Millisecond)
		}
		require.True(t, sawNotReady, "/readyz says not ready while the database is away (%s)", mode)
		require.NoError(t, <-done)
		require.Eventually(t, func() bool { return probe("/readyz") == http.StatusOK }, time.Minute, 100*time.Millisecond, "ready again after the %s restart", mode)
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
		require.Eventually(t, func() bool { return leased(planning, "plan") }, time.Minute, 20*time.Millisecond)
		restart(mode)
		waitState(planning, runpkg.Succeeded)

		// A run applying when the database goes away records its apply once.
		applying := request("development", "pg-applying-"+mode)
		require.Eventually(t, func() bool { return leased(applying, "apply") }, time.Minute, 20*time.Millisecond)
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
