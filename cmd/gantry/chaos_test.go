package main

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"gantry/bench"
	"gantry/models/authz"
	runpkg "gantry/models/run"
	"gantry/runner/mock"
)

// TestChaos: runs submitted through the JSON API (tokens, idempotency keys) across two
// organizations and three environments while portals are SIGKILLed at chosen moments
// (planning, waiting, applying, verifying, deciding) and restarted. After every kill
// the safety invariants hold; at the end every run has settled where its environment
// sends it (development and approved staging SUCCEEDED, production PENDING_APPROVAL,
// or APPLY_INTERRUPTED and recovered by an admin) and nothing is left held.
//
// CI runs 20 runs and 5 kills; `go tool task chaos` runs 100 and 30
// (GANTRY_CHAOS_RUNS, GANTRY_CHAOS_KILLS; GANTRY_CHAOS_REPORT names a file for the
// report the closing note quotes).
func TestChaos(t *testing.T) {
	t.Parallel()
	runs, kills := envInt(t, "GANTRY_CHAOS_RUNS", 20), envInt(t, "GANTRY_CHAOS_KILLS", 5)
	newChaos(t).run(runs, kills)
}

// run drives runs through the portals while killing them kills times, then checks
// every invariant and reports.
func (c *chaos) run(runs, kills int) {
	started := time.Now()
	lanes := c.lanes(runs)
	// Lanes start spread over the kill period, so runs are in flight at every kill.
	period := time.Duration(kills) * 9 * time.Second
	var wg sync.WaitGroup
	for i, l := range lanes {
		wg.Add(1)
		go func() {
			defer wg.Done()
			// The chaos's own rhythm (lanes spread over the kills), not a wait for anything.
			time.Sleep(time.Duration(i) * period / time.Duration(len(lanes)))
			c.drive(l)
		}()
	}
	c.killAll(kills)
	wg.Wait()
	c.checkSafety("the end")
	c.checkSettled(lanes)
	c.report(lanes, time.Since(started))
}

// chaos is one chaos run: the database, the portals, the tokens and what happened.
type chaos struct {
	t      *testing.T
	r      *replicas
	fleet  *fleet
	api    *chaosAPI
	ledger string // the mock executor's applies ledger
	// cloudDir is the live sandbox cloud's data directory: its applies ledger is the one
	// to read ("" with the mock executor).
	cloudDir string
	work     string
	// label names the suite in its report; reportTo is the environment variable naming
	// the report's file.
	label, reportTo string
	lastReport      string
	orgs            []string
	tokens          map[string]map[string]string // org slug -> role -> token
	envIDs          map[string]map[string]string // org slug -> environment name -> id
	// deciding counts approvals in flight (a kill then is a kill while deciding).
	deciding atomic.Int32
	mu       sync.Mutex
	kills    []chaosKill
	problems []string
}

// chaosKill is one SIGKILL: whom, when by the database clock, and what was going on.
type chaosKill struct {
	Replica string
	At      time.Time
	Moment  string
}

// lane is a workspace's runs, requested one after the other.
type lane struct {
	Org, Env, Workspace string
	Runs                []*chaosRun
	Want                int
}

type chaosRun struct {
	ID, State string
	Recovered bool
}

func newChaos(t *testing.T) *chaos {
	r := newReplicas(t)
	dir := t.TempDir()
	c := &chaos{t: t, r: r, ledger: filepath.Join(dir, "applies.ledger"), work: filepath.Join(dir, "work"), label: "chaos (mock)", reportTo: "GANTRY_CHAOS_REPORT"}
	// Each phase takes a second, so kills land mid-phase.
	c.fleet = &fleet{r: r, live: map[string]*replica{}, args: []string{"--runner-delay=1s", "--mock-ledger=" + c.ledger, "--work-dir=" + c.work}}
	c.begin()
	return c
}

// begin issues the tokens, finds the environments and starts portals a and b.
func (c *chaos) begin() {
	t, r := c.t, c.r
	c.orgs = []string{"acme", "globex"}
	c.tokens, c.envIDs = map[string]map[string]string{}, map[string]map[string]string{}
	c.api = &chaosAPI{fleet: c.fleet, http: &http.Client{Timeout: 20 * time.Second}}
	for _, slug := range c.orgs {
		org := r.Orgs[slug]
		c.tokens[slug] = map[string]string{
			"operator": demoToken(t, r, slug+"-operator", org, authz.RoleOperator, "read", "plan", "apply"),
			"admin":    demoToken(t, r, slug+"-admin", org, authz.RoleAdmin, "read", "decide"),
		}
		c.envIDs[slug] = map[string]string{}
		for _, env := range []string{"development", "staging", "production"} {
			var id string
			require.NoError(t, r.DB.Raw("SELECT id FROM environments WHERE organization_id = ? AND name = ?", org, env).Scan(&id).Error)
			require.NotEmpty(t, id, "%s/%s", slug, env)
			c.envIDs[slug][env] = id
		}
	}
	c.fleet.start("a")
	c.fleet.start("b")
}

// applies reads the applies ledger, by plan digest: the run of each attempt at it. The
// live sandbox cloud keeps it with OpenTofu (apply tokens name their plan and attempt),
// the mock executor without.
func (c *chaos) applies() map[string][]string {
	if c.cloudDir == "" {
		a, err := mock.ReadLedger(c.ledger)
		require.NoError(c.t, err)
		return a
	}
	a, err := cloudLedger(c.cloudDir)
	require.NoError(c.t, err)
	return a
}

// lanes deals n runs into lanes: development lanes request two runs one after the
// other (the second updates what the first created), staging and production one.
func (c *chaos) lanes(n int) []*lane {
	var out []*lane
	for i := 0; n > 0; i++ {
		env := []string{"development", "staging", "production"}[i%3]
		l := &lane{Org: c.orgs[(i/3)%2], Env: env, Workspace: fmt.Sprintf("chaos-%d", i), Want: 1}
		if env == "development" && n > 1 {
			l.Want = 2
		}
		n -= l.Want
		out = append(out, l)
	}
	return out
}

func (c *chaos) problem(format string, args ...any) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.problems = append(c.problems, fmt.Sprintf(format, args...))
}

// drive requests a lane's runs and takes each where a person would: a staging run is
// approved by the admin, an interrupted apply is recovered by the admin.
func (c *chaos) drive(l *lane) {
	ctx := context.Background()
	for k := 0; k < l.Want; k++ {
		body := map[string]any{"template": "bucket", "environment_id": c.envIDs[l.Org][l.Env], "workspace": l.Workspace,
			"inputs": map[string]string{"name": l.Workspace, "retention_days": strconv.Itoa(30 + k), "region": "eu-west"}}
		status, out, err := c.api.change(ctx, c.tokens[l.Org]["operator"], http.MethodPost, "/api/v1/requests", body)
		if err != nil || status != http.StatusCreated {
			c.problem("request in %s/%s: %d %s %v", l.Org, l.Workspace, status, out, err)
			return
		}
		var created struct{ ID string }
		if err := json.Unmarshal(out, &created); err != nil {
			c.problem("request answer %s: %v", out, err)
			return
		}
		cr := &chaosRun{ID: created.ID}
		l.Runs = append(l.Runs, cr)
		cr.State = c.settle(l, cr.ID)
		if l.Env == "staging" && cr.State == string(runpkg.PendingApproval) {
			c.approve(l, cr.ID)
			cr.State = c.settle(l, cr.ID)
		}
		if cr.State == string(runpkg.ApplyInterrupted) {
			c.recover(l, cr)
		}
	}
}

// waitingIsSettled: production runs settle waiting for a decision nobody gives here.
var settled = map[string]bool{"SUCCEEDED": true, "FAILED": true, "REJECTED": true, "CANCELLED": true, "EXPIRED": true, "STALE": true,
	"PLANNED": true, "NO_CHANGES": true, "APPLY_INTERRUPTED": true, "POLICY_BLOCKED": true, "PENDING_APPROVAL": true}

// settle polls run id through the API until it waits for a decision or has ended, within a
// budget of 4 minutes of idle-machine time. It runs on a lane's goroutine: a problem,
// never a Fatal.
func (c *chaos) settle(l *lane, id string) string {
	ctx := context.Background()
	last := ""
	for budget := bench.NewBudget(4 * time.Minute); !budget.Spent(); {
		status, out, err := c.api.call(ctx, c.tokens[l.Org]["operator"], http.MethodGet, "/api/v1/runs/"+id, nil, "")
		if err == nil && status == http.StatusOK {
			var doc struct{ State string }
			if json.Unmarshal(out, &doc) == nil {
				last = doc.State
				if settled[last] {
					return last
				}
			}
		}
		time.Sleep(250 * time.Millisecond)
	}
	c.problem("run %s (%s/%s) never settled: last seen %s", id, l.Org, l.Env, last)
	return last
}

// approve approves the plan the review names, as the admin; a retry after a portal
// died under the first attempt may find the decision already taken.
func (c *chaos) approve(l *lane, id string) {
	ctx := context.Background()
	c.deciding.Add(1)
	defer c.deciding.Add(-1)
	token := c.tokens[l.Org]["admin"]
	for attempt := 0; attempt < 5; attempt++ {
		status, out, err := c.api.call(ctx, token, http.MethodGet, "/api/v1/runs/"+id+"/review", nil, "")
		if err != nil || status != http.StatusOK {
			c.problem("review of %s: %d %s %v", id, status, out, err)
			return
		}
		var review struct {
			Evidence map[string]any `json:"evidence"`
		}
		if err := json.Unmarshal(out, &review); err != nil {
			c.problem("review of %s: %v", id, err)
			return
		}
		status, out, err = c.api.change(ctx, token, http.MethodPost, "/api/v1/runs/"+id+"/approve", map[string]any{"evidence": review.Evidence})
		switch {
		case err != nil:
			c.problem("approving %s: %v", id, err)
			return
		case status == http.StatusOK || status == http.StatusCreated:
			return
		case status == http.StatusConflict:
			// Taken by an attempt whose answer was lost with its portal, or the evidence
			// moved: read the run again.
			if st := c.stateOf(id); st != string(runpkg.PendingApproval) {
				return
			}
		default:
			c.problem("approving %s: %d %s", id, status, out)
			return
		}
	}
}

// recover closes an interrupted apply as an admin does once the workspace is checked. It
// runs on a lane's goroutine: what goes wrong is a problem, never a Fatal.
func (c *chaos) recover(l *lane, cr *chaosRun) {
	var admin struct{ ID, Name string }
	if err := c.r.DB.Raw("SELECT id, name FROM users WHERE subject = ?", l.Org+"-admin").Scan(&admin).Error; err != nil {
		c.problem("reading %s's admin: %v", l.Org, err)
		return
	}
	ctx := authz.WithSubject(context.Background(), authz.Subject{UserID: admin.ID, Name: admin.Name, OrganizationID: c.r.Orgs[l.Org], Role: authz.RoleAdmin})
	r, err := c.r.System.Runs.Decisions.Recover(ctx, cr.ID, "chaos: the admin checked the workspace after the portal died mid-apply")
	if err != nil {
		c.problem("recovering %s: %v", cr.ID, err)
		return
	}
	cr.State, cr.Recovered = string(r.State), true
}

// stateOf reads a run's state ("" after reporting a problem); lanes call it.
func (c *chaos) stateOf(id string) string {
	var s string
	if err := c.r.DB.Raw("SELECT state FROM runs WHERE id = ?", id).Scan(&s).Error; err != nil {
		c.problem("reading the state of %s: %v", id, err)
	}
	return s
}

// moments are what a kill may interrupt; the killer aims at each in turn.
var moments = []string{"planning", "applying", "verifying", "waiting", "deciding"}

// killAll SIGKILLs n times: each kill aims at the next moment (up to 12 s of looking
// for it, else whatever is going on), then the safety invariants are checked and the
// portal restarted under its replica id.
func (c *chaos) killAll(n int) {
	for k := 0; k < n; k++ {
		// The kills' own rhythm (random moments), not waits for anything.
		time.Sleep(time.Duration(2000+rand.IntN(4000)) * time.Millisecond)
		want := moments[k%len(moments)]
		victim, moment := c.aim(want, bench.NewBudget(12*time.Second))
		var at time.Time
		require.NoError(c.t, c.r.DB.Raw("SELECT clock_timestamp()").Scan(&at).Error)
		c.fleet.kill(c.t, victim)
		c.mu.Lock()
		c.kills = append(c.kills, chaosKill{Replica: victim, At: at.UTC(), Moment: moment})
		c.mu.Unlock()
		c.checkSafety(fmt.Sprintf("kill %d (%s, %s)", k+1, victim, moment))
		time.Sleep(time.Duration(rand.IntN(1500)) * time.Millisecond)
		c.fleet.start(victim)
	}
}

// aim finds a portal to kill at moment want: one holding a lease in that phase, any
// while runs wait for a decision or an approval is in flight; once the budget is spent,
// any portal, and the moment is named by what it held.
func (c *chaos) aim(want string, budget *bench.Budget) (string, string) {
	phase := map[string]string{"planning": "plan", "applying": "apply", "verifying": "verify"}
	for {
		ids := c.fleet.ids()
		switch want {
		case "waiting":
			var n int64
			require.NoError(c.t, c.r.DB.Raw("SELECT count(*) FROM runs WHERE state = 'PENDING_APPROVAL'").Scan(&n).Error)
			if n > 0 {
				return ids[rand.IntN(len(ids))], want
			}
		case "deciding":
			if c.deciding.Load() > 0 {
				return ids[rand.IntN(len(ids))], want
			}
		default:
			var holders []string
			require.NoError(c.t, c.r.DB.Raw("SELECT DISTINCT holder FROM run_leases WHERE phase = ?", phase[want]).Scan(&holders).Error)
			for _, h := range holders {
				if slices.Contains(ids, h) {
					return h, want
				}
			}
		}
		if budget.Spent() {
			victim := ids[rand.IntN(len(ids))]
			var held []string
			require.NoError(c.t, c.r.DB.Raw("SELECT DISTINCT phase FROM run_leases WHERE holder = ?", victim).Scan(&held).Error)
			return victim, "idle (" + want + " not found; holding: " + strings.Join(held, ",") + ")"
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// checkSafety asserts what must hold at every moment: no plan digest applied twice, no
// run writing two state versions, serials strictly increasing with one lineage per
// workspace, and both organizations' audit chains intact.
func (c *chaos) checkSafety(when string) {
	t := c.t
	for digest, runs := range c.applies() {
		require.Len(t, runs, 1, "%s: plan digest %s applied more than once: %v", when, digest, runs)
	}
	var twice int64
	require.NoError(t, c.r.DB.Raw("SELECT count(*) FROM (SELECT run_id FROM state_versions WHERE run_id IS NOT NULL GROUP BY run_id HAVING count(*) > 1) x").Scan(&twice).Error)
	require.Zero(t, twice, "%s: a run wrote two state versions", when)
	var versions []struct {
		WorkspaceID, Lineage string
		Serial               int
	}
	require.NoError(t, c.r.DB.Raw("SELECT workspace_id, lineage, serial FROM state_versions ORDER BY workspace_id, created_at, id").Scan(&versions).Error)
	for i := 1; i < len(versions); i++ {
		prev, cur := versions[i-1], versions[i]
		if prev.WorkspaceID != cur.WorkspaceID {
			continue
		}
		require.Greater(t, cur.Serial, prev.Serial, "%s: serials of workspace %s", when, cur.WorkspaceID)
		require.Equal(t, prev.Lineage, cur.Lineage, "%s: lineage of workspace %s", when, cur.WorkspaceID)
	}
	for _, slug := range c.orgs {
		_, err := c.r.System.Audit.Verify(context.Background(), c.r.Orgs[slug])
		require.NoError(t, err, "%s: the audit chain of %s", when, slug)
	}
}

// checkSettled asserts where every run ended and that nothing is left held.
func (c *chaos) checkSettled(lanes []*lane) {
	t := c.t
	require.Empty(t, c.problems, "what went wrong while driving the runs")
	want := map[string]string{"development": "SUCCEEDED", "staging": "SUCCEEDED", "production": "PENDING_APPROVAL"}
	for _, l := range lanes {
		require.Len(t, l.Runs, l.Want, "lane %s/%s", l.Org, l.Workspace)
		for _, cr := range l.Runs {
			if cr.Recovered {
				require.Equal(t, "FAILED", cr.State, "an interrupted apply is closed by the admin's recovery")
				continue
			}
			require.Equal(t, want[l.Env], cr.State, "run %s in %s/%s", cr.ID, l.Org, l.Env)
		}
	}
	count := func(q string) int64 {
		var n int64
		require.NoError(t, c.r.DB.Raw(q).Scan(&n).Error)
		return n
	}
	require.Zero(t, count("SELECT count(*) FROM run_leases"), "no lease left")
	require.Zero(t, count("SELECT count(*) FROM workspaces WHERE active_run_id IS NOT NULL"), "no apply slot left held")
	require.Zero(t, count("SELECT count(*) FROM state_locks WHERE lock_id IS NOT NULL"), "no state lock left held")
	// No job a dead portal held is left running: the sweep hands back a phase job after a
	// lease and a short one after 75 s. (The audit jobs run for minutes and are left to
	// River's rescue; the next checkpoint covers a dead one.)
	bench.Eventually(t, "no job left running by a dead portal", 30*time.Second, func() (bool, any) {
		var running []string
		require.NoError(t, c.r.DB.Raw("SELECT kind || ' ' || args::text || ' attempt ' || attempt FROM river_job WHERE state = 'running' AND attempted_at < now() - interval '90 seconds' AND kind NOT IN ('audit.checkpoint', 'audit.export', 'notify.webhook')").Scan(&running).Error)
		return len(running) == 0, running
	}, bench.Poll(time.Second))
	// Every applied run is in the ledger exactly once; nothing else is.
	applies := c.applies()
	var applied []struct{ ID, ApprovedPlanDigest string }
	require.NoError(t, c.r.DB.Raw("SELECT id, approved_plan_digest FROM runs WHERE new_state_version_id IS NOT NULL").Scan(&applied).Error)
	for _, a := range applied {
		require.Equal(t, []string{a.ID}, applies[a.ApprovedPlanDigest], "run %s applied its approved plan once", a.ID)
	}
	// No orphaned scratch directory under the portals' work directory.
	jobs, _ := filepath.Glob(filepath.Join(c.work, "jobs", "*", "*"))
	require.Empty(t, jobs, "no job directory left behind")
	// No container left behind by a killed portal (its restart removed them).
	roots, _ := filepath.Glob(filepath.Join(c.work, "replicas", "*", "runc"))
	for _, root := range roots {
		out, err := exec.Command("runc", "--root", root, "list", "-q").CombinedOutput()
		require.NoError(t, err, "runc list: %s", out)
		require.Empty(t, strings.TrimSpace(string(out)), "no runc container left in %s", root)
	}
}

// report logs (and writes to $GANTRY_CHAOS_REPORT) runs, kills by moment, recoveries
// and the time from a kill to the takeover of each run it interrupted.
func (c *chaos) report(lanes []*lane, took time.Duration) {
	t := c.t
	var rows []struct{ Data string }
	require.NoError(t, c.r.DB.Raw("SELECT data::text AS data FROM audit_events WHERE action IN ('run.lease_expired', 'run.apply_interrupted')").Scan(&rows).Error)
	var recoveries []time.Duration
	for _, row := range rows {
		var ev struct {
			takeover
			Lease *takeover `json:"lease"`
		}
		require.NoError(t, json.Unmarshal([]byte(row.Data), &ev))
		if ev.Lease != nil {
			ev.takeover = *ev.Lease
		}
		if ev.DetectedAt.IsZero() {
			continue
		}
		// The kill that interrupted it: the holder's first kill after the lease's last
		// renewal (a later kill of the restarted replica did not hold this lease).
		var killedAt time.Time
		for _, k := range c.kills {
			if k.Replica == ev.Holder && !k.At.Before(ev.RenewedAt) && (killedAt.IsZero() || k.At.Before(killedAt)) {
				killedAt = k.At
			}
		}
		require.False(t, killedAt.IsZero(), "a takeover without a kill of its holder: %+v", ev.takeover)
		require.LessOrEqual(t, ev.DetectedAt.Sub(ev.RenewedAt), 30*time.Second, "taken over within 30 s of the last renewal: %+v", ev.takeover)
		require.True(t, ev.PreviousPassAt != nil && ev.PreviousPassAt.Before(ev.ExpiredAt), "taken over at the first sweeper pass after it expired: %+v", ev.takeover)
		recoveries = append(recoveries, ev.DetectedAt.Sub(killedAt))
	}
	slices.Sort(recoveries)
	pct := func(p float64) time.Duration {
		if len(recoveries) == 0 {
			return 0
		}
		return recoveries[min(len(recoveries)-1, int(p*float64(len(recoveries))))]
	}
	moments := map[string]int{}
	for _, k := range c.kills {
		moments[strings.SplitN(k.Moment, " ", 2)[0]]++
	}
	states := map[string]int{}
	total := 0
	for _, l := range lanes {
		for _, cr := range l.Runs {
			total++
			key := cr.State
			if cr.Recovered {
				key = "APPLY_INTERRUPTED (recovered)"
			}
			states[key]++
		}
	}
	lat := slices.Clone(c.api.Latencies)
	slices.Sort(lat)
	p99 := time.Duration(0)
	if len(lat) > 0 {
		p99 = lat[min(len(lat)-1, int(0.99*float64(len(lat))))]
	}
	report := fmt.Sprintf("%s: %d runs, %d kills %v, %d recoveries (takeovers), time from kill to takeover p50 %s p99 %s max %s; end states %v; %d API calls (p99 %s), %d retried; %s",
		c.label, total, len(c.kills), moments, len(recoveries), pct(0.5).Round(time.Millisecond), pct(0.99).Round(time.Millisecond), pct(1).Round(time.Millisecond),
		states, len(lat), p99.Round(time.Millisecond), c.api.Retries, took.Round(time.Second))
	t.Log(report)
	c.lastReport = report
	if path := os.Getenv(c.reportTo); path != "" {
		require.NoError(t, os.WriteFile(path, []byte(report+"\n"), 0o644))
	}
}

func envInt(t *testing.T, name string, def int) int {
	v := os.Getenv(name)
	if v == "" {
		return def
	}
	n, err := strconv.Atoi(v)
	require.NoError(t, err, name)
	return n
}
