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

	"gantry/bench"
	"gantry/models/authz"
	runpkg "gantry/models/run"
	"gantry/runner/mock"
	"gantry/sandbox/cloud"
)

// cloudLedger reads the sandbox cloud's applies ledger in dataDir as the mock's reads:
// by plan digest, the run of each attempt.
func cloudLedger(dataDir string) (map[string][]string, error) {
	a, err := cloud.ReadApplies(dataDir)
	if err != nil {
		return nil, err
	}
	out := map[string][]string{}
	for _, p := range a.Plans {
		for _, at := range p.Attempts {
			out[p.PlanDigest] = append(out[p.PlanDigest], at.Run)
		}
	}
	return out, nil
}

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
	load(t, f, n, "mock executor", func() (int, error) { return ledgerCount(mock.ReadLedger(ledger)) }, "GANTRY_LOAD_REPORT")
}

// load starts two portals of f, submits n requests at once, waits for every run to
// reach its environment's state, checks with applied (the number of plans applied, an
// error for one applied twice) that each development run applied once, and reports.
func load(t *testing.T, f *fleet, n int, label string, applied func() (int, error), reportEnv string) {
	r := f.r
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

	want := map[string]runpkg.State{"development": runpkg.Succeeded, "production": runpkg.PendingApproval}
	states := func() map[string]runpkg.State {
		var rows []struct {
			ID    string
			State runpkg.State
		}
		require.NoError(t, r.DB.Raw("SELECT id, state FROM runs").Scan(&rows).Error)
		out := map[string]runpkg.State{}
		for _, row := range rows {
			out[row.ID] = row.State
		}
		return out
	}
	// Woken by run changes; a run that ends elsewhere, or a portal that exits, fails at
	// once.
	var last map[string]runpkg.State
	bench.Eventually(t, "every run to reach its environment's state", 10*time.Minute, func() (bool, any) {
		for _, p := range f.live {
			p.alive(t, "the runs to settle")
		}
		last = states()
		var behind []string
		for _, s := range runs {
			got := last[s.id]
			if got == want[s.tgt.env] {
				continue
			}
			if got.Terminal() {
				t.Fatalf("run %s (%s) ended %s, want %s", s.id, s.tgt.env, got, want[s.tgt.env])
			}
			behind = append(behind, fmt.Sprintf("%s %s", s.id, got))
		}
		return len(behind) == 0, fmt.Sprintf("%d runs not there yet, first %v", len(behind), behind[:min(len(behind), 5)])
	}, bench.Wake(r.changes()))
	settledIn := time.Since(start)
	require.Len(t, last, n, "one run per request")
	applies, err := applied()
	require.NoError(t, err)
	require.Equal(t, n/2, applies, "each development run applied once")

	lat := slices.Clone(api.Latencies)
	slices.Sort(lat)
	p := func(q float64) time.Duration {
		return lat[min(len(lat)-1, int(q*float64(len(lat))))].Round(time.Millisecond)
	}
	report := fmt.Sprintf("load: %d concurrent requests (%s, 2 portals): all answered 201 in %s (%.1f requests/s; latency p50 %s p99 %s, %d retried); all settled in %s (%.1f runs/s)",
		n, label, submittedIn.Round(time.Millisecond), float64(n)/submittedIn.Seconds(), p(0.5), p(0.99), api.Retries, settledIn.Round(time.Millisecond), float64(n)/settledIn.Seconds())
	t.Log(report)
	if path := os.Getenv(reportEnv); path != "" {
		require.NoError(t, os.WriteFile(path, []byte(report+"\n"), 0o644))
	}
	for _, p := range f.live {
		p.stop(t)
	}
}

// ledgerCount counts the plans applied in a ledger (the runs of each attempt by plan
// digest), failing on a digest applied twice.
func ledgerCount(applies map[string][]string, err error) (int, error) {
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
