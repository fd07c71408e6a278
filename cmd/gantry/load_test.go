package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"gantry/models/authz"
	"gantry/runner/mock"
)

// TestLoadConcurrentRequests: requests submitted at once through the JSON API
// (tokens, idempotency keys) to two portals with the mock executor, across two
// organizations and their development and production environments. Every answer is a
// success, every run reaches its environment's state (development SUCCEEDED, production
// PENDING_APPROVAL), and the throughput and request latency are reported. CI sends 60;
// `go tool task chaos` sends 200 (GANTRY_LOAD_RUNS; GANTRY_LOAD_REPORT names a file for
// the report).
func TestLoadConcurrentRequests(t *testing.T) {
	t.Parallel()
	n := envInt(t, "GANTRY_LOAD_RUNS", 60)
	r := newReplicas(t)
	ledger := t.TempDir() + "/applies.ledger"
	f := &fleet{r: r, live: map[string]*replica{}, args: []string{"--mock-ledger=" + ledger}}
	f.start("load-a")
	f.start("load-b")
	api := &chaosAPI{fleet: f, http: &http.Client{Timeout: 60 * time.Second}}
	type target struct{ org, env, envID, token string }
	var targets []target
	for _, slug := range []string{"acme", "globex"} {
		token := demoToken(t, r, slug+"-operator", r.Orgs[slug], authz.RoleOperator, "read", "plan", "apply")
		for _, env := range []string{"development", "production"} {
			var id string
			require.NoError(t, r.DB.Raw("SELECT id FROM environments WHERE organization_id = ? AND name = ?", r.Orgs[slug], env).Scan(&id).Error)
			targets = append(targets, target{slug, env, id, token})
		}
	}
	ctx := context.Background()
	type submitted struct {
		id  string
		tgt target
	}
	runs := make([]submitted, n)
	var wg sync.WaitGroup
	var mu sync.Mutex
	var failures []string
	start := time.Now()
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			tgt := targets[i%len(targets)]
			ws := fmt.Sprintf("load-%d", i)
			status, out, err := api.change(ctx, tgt.token, http.MethodPost, "/api/v1/requests", map[string]any{"template": "bucket",
				"environment_id": tgt.envID, "workspace": ws, "inputs": map[string]string{"name": ws, "retention_days": "30", "region": "eu-west"}})
			var created struct{ ID string }
			if err != nil || status != http.StatusCreated || json.Unmarshal(out, &created) != nil {
				mu.Lock()
				failures = append(failures, fmt.Sprintf("%d: %d %s %v", i, status, out, err))
				mu.Unlock()
				return
			}
			runs[i] = submitted{created.ID, tgt}
		}()
	}
	wg.Wait()
	submittedIn := time.Since(start)
	require.Empty(t, failures, "every request answered 201")

	want := map[string]string{"development": "SUCCEEDED", "production": "PENDING_APPROVAL"}
	states := func() map[string]string {
		var rows []struct{ ID, State string }
		require.NoError(t, r.DB.Raw("SELECT id, state FROM runs").Scan(&rows).Error)
		out := map[string]string{}
		for _, row := range rows {
			out[row.ID] = row.State
		}
		return out
	}
	var last map[string]string
	require.Eventually(t, func() bool {
		last = states()
		for _, s := range runs {
			if last[s.id] != want[s.tgt.env] {
				return false
			}
		}
		return true
	}, 10*time.Minute, 250*time.Millisecond, "not every run reached its state")
	settledIn := time.Since(start)
	require.Len(t, last, n, "one run per request")
	applies, err := ledgerCount(ledger)
	require.NoError(t, err)
	require.Equal(t, n/2, applies, "each development run applied once")

	lat := slices.Clone(api.Latencies)
	slices.Sort(lat)
	p := func(q float64) time.Duration {
		return lat[min(len(lat)-1, int(q*float64(len(lat))))].Round(time.Millisecond)
	}
	report := fmt.Sprintf("load: %d concurrent requests (mock executor, 2 portals): all answered 201 in %s (%.1f requests/s; latency p50 %s p99 %s, %d retried); all settled in %s (%.1f runs/s)",
		n, submittedIn.Round(time.Millisecond), float64(n)/submittedIn.Seconds(), p(0.5), p(0.99), api.Retries, settledIn.Round(time.Millisecond), float64(n)/settledIn.Seconds())
	t.Log(report)
	if path := os.Getenv("GANTRY_LOAD_REPORT"); path != "" {
		require.NoError(t, os.WriteFile(path, []byte(report+"\n"), 0o644))
	}
	for _, p := range f.live {
		p.stop(t)
	}
}

// ledgerCount counts the applies in a mock ledger, failing on a digest applied twice.
func ledgerCount(path string) (int, error) {
	applies, err := mock.ReadLedger(path)
	if err != nil {
		return 0, err
	}
	n := 0
	for digest, runs := range applies {
		if len(runs) != 1 {
			return 0, fmt.Errorf("plan digest %s applied %s times", digest, strconv.Itoa(len(runs)))
		}
		n++
	}
	return n, nil
}
