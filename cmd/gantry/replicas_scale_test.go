//go:build !fast

// Live: needs live OpenTofu (bin/tofu, built from tools/tofu): the default executor is tofu/process.

package main

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"gantry/bench"
	"gantry/models/idempotency"
	runpkg "gantry/models/run"
)

// TestReplicasScale: three `gantry serve` processes on one PostgreSQL share the River
// queue while one of them is SIGKILLed mid-plan (DESIGN §6 leases, §10 scale-out).
// Runs are submitted round-robin over the replicas' own addresses through the JSON API
// (two organizations, API tokens, an idempotency key per request kept across its
// retries), half in development (SUCCEEDED by themselves), half in production
// (PENDING_APPROVAL, approved with the admin's token, then SUCCEEDED). Once a third have
// settled, a replica holding a plan's lease is killed and not restarted until every run
// has settled: the other two take its leases over (a plan or verification is run again
// and counted; an apply it held would end APPLY_INTERRUPTED, never applied again, and be
// recovered by the admin) and finish everything. Then it is restarted, and removes what
// its dead jobs left. At the end:
//   - every run is where its environment sends it, and every apply was executed once:
//     the sandbox cloud counts applies per plan digest (live OpenTofu), as the mock's
//     ledger does with GANTRY_REPLICAS_EXECUTOR=mock;
//   - every job ran once, in effects: each run's plan began once plus once per counted
//     takeover, its apply once, and no run has two apply jobs (River's own attempts,
//     which a dead replica, the sweeper and errors multiply, are counted by kind and
//     reason in the report);
//   - periodic jobs ran on the elected leader only: the drift dispatch (every 2 s here)
//     was inserted once per interval, where three leaders would have inserted three
//     times as many;
//   - the chaos suite's invariants (serials, lineages, audit chains, nothing held).
//
// CI runs 12 runs with live OpenTofu (tofu/process); `go tool task chaos:replicas` runs
// 100 (GANTRY_REPLICAS_RUNS, GANTRY_REPLICAS_INFLIGHT, GANTRY_REPLICAS_EXECUTOR:
// tofu/process, tofu/oci or mock; GANTRY_REPLICAS_REPORT names a file for the report).
func TestReplicasScale(t *testing.T) {
	t.Parallel()
	n := envInt(t, "GANTRY_REPLICAS_RUNS", 12)
	newScale(t, cmp.Or(os.Getenv("GANTRY_REPLICAS_EXECUTOR"), "tofu/process")).run(n)
}

// dispatchEvery is the drift dispatch's interval in this test: short, so that a
// dispatch per replica would show.
const dispatchEvery = 2 * time.Second

// scale is a chaos run with three replicas and one kill.
type scale struct {
	*chaos
	executor string
	ids      []string          // the replicas, in round-robin order
	clients  map[string]string // River client id -> replica id
	victim   string
	held     map[string]int // what the victim held when killed: leases by phase
	// leaders are the River leaders seen, in order (client ids).
	leadersMu sync.Mutex
	leaders   []string
}

func newScale(t *testing.T, executor string) *scale {
	r := newReplicas(t)
	dir := t.TempDir()
	c := &chaos{t: t, r: r, work: filepath.Join(dir, "work"), label: "as the chaos suite counts"}
	c.fleet = &fleet{r: r, live: map[string]*replica{}}
	if executor == "mock" {
		c.ledger = filepath.Join(dir, "applies.ledger")
		c.fleet.args = []string{"--runner-delay=1s", "--mock-ledger=" + c.ledger, "--work-dir=" + c.work}
	} else {
		c.cloudDir = filepath.Join(dir, "cloud")
		c.fleet.args = liveArgs(t, c.fleet, executor, c.cloudDir, c.work)
	}
	c.fleet.args = append(c.fleet.args, "--drift-dispatch-every="+dispatchEvery.String())
	c.begin() // tokens, environments, replicas a and b
	c.fleet.start("c")
	// A busy machine (2 cores, live OpenTofu) answers slowly: a client waits longer than
	// the chaos suite's before it calls a portal dead.
	c.api.http.Timeout, c.api.patience = time.Minute, 5*time.Minute
	s := &scale{chaos: c, executor: executor, ids: []string{"a", "b", "c"}, clients: map[string]string{}}
	for _, id := range s.ids {
		s.noteClient(id)
	}
	return s
}

// noteClient reads the River client id of replica id (as it started last) from its log:
// River names a job's workers (attempted_by) and the leader by it.
func (s *scale) noteClient(id string) {
	p := s.fleet.live[id]
	bench.Eventually(s.t, "replica "+id+" to log its River client id", 30*time.Second, func() (bool, any) {
		out := p.out.String()
		for _, line := range strings.Split(out, "\n") {
			var l struct {
				Msg      string `json:"msg"`
				ClientID string `json:"client_id"`
			}
			if json.Unmarshal([]byte(line), &l) == nil && l.Msg == "River client started" && l.ClientID != "" {
				s.clients[l.ClientID] = id
				return true, nil
			}
		}
		return false, "its log:\n" + out
	}, bench.Poll(50*time.Millisecond))
}

// watchLeaders records every River leader seen until ctx ends.
func (s *scale) watchLeaders(ctx context.Context) {
	for ctx.Err() == nil {
		var leader string
		if s.r.DB.Raw("SELECT coalesce(max(leader_id), '') FROM river_leader").Scan(&leader).Error == nil && leader != "" {
			s.leadersMu.Lock()
			if len(s.leaders) == 0 || s.leaders[len(s.leaders)-1] != leader {
				s.leaders = append(s.leaders, leader)
			}
			s.leadersMu.Unlock()
		}
		select {
		case <-ctx.Done():
		case <-time.After(250 * time.Millisecond):
		}
	}
}

// run submits n runs, kills a replica once a third have settled, and checks and
// reports once all have.
func (s *scale) run(n int) {
	t := s.t
	watch, stopWatch := context.WithCancel(context.Background())
	defer stopWatch()
	go s.watchLeaders(watch)

	urls := make([]string, len(s.ids))
	for i, id := range s.ids {
		urls[i] = s.fleet.live[id].URL
	}
	lanes := make([]*lane, n)
	for i := range lanes {
		env := []string{"development", "production"}[i%2]
		lanes[i] = &lane{Org: s.orgs[(i/2)%2], Env: env, Workspace: fmt.Sprintf("scale-%d", i), Want: 1}
	}
	// At most inflight runs at once (GANTRY_REPLICAS_INFLIGHT, 12 by default: four per
	// replica, more only queues on two cores), so that plans still start after the kill.
	window := make(chan struct{}, max(1, min(envInt(t, "GANTRY_REPLICAS_INFLIGHT", 12), n/2)))
	var wg sync.WaitGroup
	var done atomic.Int32
	settledOne := make(chan struct{}, 1)
	started := time.Now()
	go func() {
		for i, l := range lanes {
			window <- struct{}{}
			wg.Add(1)
			go func() {
				defer wg.Done()
				s.drive(urls[i%len(urls)], l)
				done.Add(1)
				select {
				case settledOne <- struct{}{}:
				default:
				}
				<-window
			}()
		}
	}()
	// The budgets bound a hang, not a pace: the runs' own waits report a slow run.
	settledRuns := func(want int) func() (bool, any) {
		return func() (bool, any) { return int(done.Load()) >= want, fmt.Sprintf("%d of %d settled", done.Load(), n) }
	}
	bench.Eventually(t, "a third of the runs to settle", 30*time.Minute, settledRuns(max(1, n/3)), bench.Wake(settledOne))
	killedAt := s.kill()
	bench.Eventually(t, "every run to settle", 60*time.Minute, settledRuns(n), bench.Wake(settledOne))
	wg.Wait()
	took := time.Since(started)
	afterKill := time.Since(killedAt)
	stopWatch()

	s.checkSafety("the end")
	s.checkSettled(lanes)
	jobs, again := s.checkJobs(lanes)
	dispatches := s.checkLeaders()
	// The victim comes back once everything settled, and removes what its dead jobs
	// left (its scratch directories, its containers): nobody else needed it gone.
	s.fleet.start(s.victim)
	s.noteClient(s.victim)
	s.checkLeftovers()

	s.reportTo = ""
	s.report(lanes, took)
	retries := map[string]int64{}
	for _, phase := range []string{"plan", "verify"} {
		retries[phase] = s.count("SELECT count(*) FROM audit_events WHERE action = 'run.lease_expired' AND data->>'phase' = ?", phase)
	}
	interrupted := s.count("SELECT count(*) FROM audit_events WHERE action = 'run.apply_interrupted'")
	var leaders []string
	s.leadersMu.Lock()
	for _, l := range s.leaders {
		leaders = append(leaders, s.clients[l])
	}
	s.leadersMu.Unlock()
	applied, err := ledgerCount(s.applies(), nil)
	require.NoError(t, err)
	report := fmt.Sprintf("replicas: %d runs over 3 portals (%s) in %s, %.1f runs/min; replica %s SIGKILLed (%s) holding %v, not restarted until all settled (%s after the kill); "+
		"%d plan retries, %d verification retries, %d applies interrupted; %d plan digests applied, each once; jobs completed by replica %v, attempted again %+v; River leaders %v, %d drift dispatches; %s",
		n, s.executor, took.Round(time.Second), float64(n)/took.Minutes(), s.victim, s.kills[0].Moment, s.held, afterKill.Round(time.Second),
		retries["plan"], retries["verify"], interrupted, applied, jobs, again, leaders, dispatches, s.lastReport)
	t.Log(report)
	if path := os.Getenv("GANTRY_REPLICAS_REPORT"); path != "" {
		require.NoError(t, os.WriteFile(path, []byte(report+"\n"), 0o644))
	}
}

// drive requests a lane's run at the replica at url and takes it where a person would:
// a production run is approved by the admin, an interrupted apply recovered.
func (s *scale) drive(url string, l *lane) {
	ctx := context.Background()
	body := map[string]any{"template": "bucket", "environment_id": s.envIDs[l.Org][l.Env], "workspace": l.Workspace,
		"inputs": map[string]string{"name": l.Workspace, "retention_days": "30", "region": "eu-west"}}
	status, out, err := s.api.callAt(ctx, url, s.tokens[l.Org]["operator"], http.MethodPost, "/api/v1/requests", body, idempotency.NewKey())
	var created struct{ ID string }
	if err != nil || status != http.StatusCreated || json.Unmarshal(out, &created) != nil {
		s.problem("request in %s/%s at %s: %d %s %v", l.Org, l.Workspace, url, status, out, err)
		return
	}
	cr := &chaosRun{ID: created.ID}
	l.Runs = append(l.Runs, cr)
	cr.State = s.settle(l, cr.ID)
	if l.Env == "production" && cr.State == string(runpkg.PendingApproval) {
		s.approve(l, cr.ID)
		cr.State = s.settle(l, cr.ID)
	}
	if cr.State == string(runpkg.ApplyInterrupted) {
		s.recover(l, cr)
	}
}

// settle polls run id through the API until it waits for a decision or has ended, as
// chaos.settle does, every second (a hundred runs polled faster would load the portals
// more than their work does) and within a budget of 20 minutes of idle-machine time (a
// hang, not a timing assertion). It runs on a lane's goroutine: a problem, never a Fatal.
func (s *scale) settle(l *lane, id string) string {
	last := ""
	for budget := bench.NewBudget(20 * time.Minute); !budget.Spent(); time.Sleep(time.Second) {
		status, out, err := s.api.call(context.Background(), s.tokens[l.Org]["operator"], http.MethodGet, "/api/v1/runs/"+id, nil, "")
		var doc struct{ State string }
		if err == nil && status == http.StatusOK && json.Unmarshal(out, &doc) == nil {
			if last = doc.State; settled[last] {
				return last
			}
		}
	}
	s.problem("run %s (%s/%s) never settled: last seen %s", id, l.Org, l.Env, last)
	return last
}

// kill SIGKILLs a replica holding a plan's lease: preferably one holding no apply's
// (then nothing is interrupted for good), looked for up to 30 s, else as chaos.aim
// finds one. It returns when, by the test's clock.
func (s *scale) kill() time.Time {
	t := s.t
	victim, moment := "", ""
	for budget := bench.NewBudget(30 * time.Second); victim == "" && !budget.Spent(); time.Sleep(20 * time.Millisecond) {
		var holders []string
		require.NoError(t, s.r.DB.Raw(`SELECT DISTINCT holder FROM run_leases WHERE phase = 'plan'
			AND holder NOT IN (SELECT holder FROM run_leases WHERE phase = 'apply')`).Scan(&holders).Error)
		if len(holders) > 0 {
			victim, moment = holders[0], "planning"
		}
	}
	if victim == "" {
		victim, moment = s.aim("planning", bench.NewBudget(60*time.Second))
	}
	var held []struct {
		Phase string
		N     int
	}
	require.NoError(t, s.r.DB.Raw("SELECT phase, count(*) AS n FROM run_leases WHERE holder = ? GROUP BY phase", victim).Scan(&held).Error)
	s.held = map[string]int{}
	for _, h := range held {
		s.held[h.Phase] = h.N
	}
	var at time.Time
	require.NoError(t, s.r.DB.Raw("SELECT clock_timestamp()").Scan(&at).Error)
	s.fleet.kill(t, victim)
	killedAt := time.Now()
	s.mu.Lock()
	s.victim = victim
	s.kills = append(s.kills, chaosKill{Replica: victim, At: at.UTC(), Moment: moment})
	s.mu.Unlock()
	t.Logf("killed replica %s (%s) holding %v", victim, moment, s.held)
	s.checkSafety("the kill")
	return killedAt
}

func (s *scale) count(q string, args ...any) int64 {
	var n int64
	require.NoError(s.t, s.r.DB.Raw(q, args...).Scan(&n).Error)
	return n
}

// checkSettled asserts where every run ended, that the victim alone interrupted applies
// and that nothing is left held.
func (s *scale) checkSettled(lanes []*lane) {
	t := s.t
	require.Empty(t, s.problems, "what went wrong while driving the runs")
	var interrupted []struct{ TargetID, Holder string }
	require.NoError(t, s.r.DB.Raw("SELECT target_id, data->'lease'->>'holder' AS holder FROM audit_events WHERE action = 'run.apply_interrupted'").Scan(&interrupted).Error)
	byKill := map[string]bool{}
	for _, i := range interrupted {
		require.Equal(t, s.victim, i.Holder, "run %s: only the killed replica's applies are interrupted", i.TargetID)
		byKill[i.TargetID] = true
	}
	for _, l := range lanes {
		require.Len(t, l.Runs, 1, "lane %s/%s", l.Org, l.Workspace)
		cr := l.Runs[0]
		if cr.Recovered {
			require.True(t, byKill[cr.ID], "run %s was interrupted by the kill", cr.ID)
			require.Equal(t, "FAILED", cr.State, "an interrupted apply is closed by the admin's recovery")
			continue
		}
		require.Equal(t, "SUCCEEDED", cr.State, "run %s in %s/%s", cr.ID, l.Org, l.Env)
		if l.Env == "production" {
			require.EqualValues(t, 1, s.count("SELECT count(*) FROM audit_events WHERE target_id = ? AND action = 'run.pending_approval'", cr.ID), "run %s waited for a decision", cr.ID)
			require.EqualValues(t, 1, s.count("SELECT count(*) FROM audit_events WHERE target_id = ? AND action = 'run.approved'", cr.ID), "run %s approved once", cr.ID)
		}
	}
	require.Zero(t, s.count("SELECT count(*) FROM run_leases"), "no lease left")
	require.Zero(t, s.count("SELECT count(*) FROM workspaces WHERE active_run_id IS NOT NULL"), "no apply slot left held")
	require.Zero(t, s.count("SELECT count(*) FROM state_locks WHERE lock_id IS NOT NULL"), "no state lock left held")
	// Every applied run is in the applies ledger once, under the plan digest approved.
	applies := s.applies()
	var applied []struct{ ID, ApprovedPlanDigest string }
	require.NoError(t, s.r.DB.Raw("SELECT id, approved_plan_digest FROM runs WHERE new_state_version_id IS NOT NULL").Scan(&applied).Error)
	require.Len(t, applied, len(lanes)-len(byKill), "every run not interrupted was applied")
	for _, a := range applied {
		require.Equal(t, []string{a.ID}, applies[a.ApprovedPlanDigest], "run %s applied its approved plan once", a.ID)
	}
}

// attempts counts the earlier attempts of jobs attempted again, by job kind and why.
type attempts struct {
	// Dead: fetched by the killed replica. HandedBack: the sweeper handed the job back to
	// the queue (runner/lease.go: a phase job running longer than a lease without one),
	// which under load includes jobs whose phase had ended while River had not yet
	// recorded their completion (its completer is asynchronous): the attempt that follows
	// finds the run past its phase and does nothing. TakenOver: a dead worker's job the
	// sweeper closed when it took its lease over (a fresh job carries on). Failed: an
	// attempt that ended in an error River retried.
	Dead, HandedBack, TakenOver, Failed map[string]int
}

// rescued is the error the sweeper records on a job it hands back (runner/lease.go).
const rescued = "its portal stopped before the job began"

// checkJobs asserts that every job ran once, in effects: every run's plan began once
// plus once per takeover of its plan (plan revisions), its apply once ("run.running",
// and the applies ledger checked by checkSettled), and no run has two apply jobs. River
// may attempt a job more than once (a dead replica's, one handed back, an error), which
// is counted. It returns the jobs completed by each replica and the earlier attempts.
func (s *scale) checkJobs(lanes []*lane) (map[string]int, attempts) {
	t := s.t
	// No job the dead portal held is left running: the sweep takes over a leased phase
	// (cancelling its job), hands back a phase job that never began after a lease and a
	// short one after 75 s, and closes a phase job whose run moved on without River
	// recording its completion (the portal died in between) after a lease. The audit jobs
	// and webhook deliveries are left to River's rescue by design.
	bench.Eventually(t, "no job left running by the dead portal", 2*time.Minute, func() (bool, any) {
		var running []string
		require.NoError(t, s.r.DB.Raw(`SELECT j.kind || ' ' || j.args::text || ' by ' || array_to_string(j.attempted_by, ',') || ' since ' || j.attempted_at::text
			|| coalesce(' (run ' || r.state || ')', '')
			FROM river_job j LEFT JOIN runs r ON r.id = j.args->>'run_id'
			WHERE j.state = 'running' AND j.kind NOT IN ('audit.checkpoint', 'audit.export', 'notify.webhook')`).Scan(&running).Error)
		return len(running) == 0, running
	}, bench.Poll(time.Second))
	var jobs []struct {
		ID                  int64
		Kind, State         string
		AttemptedBy, Errors string
	}
	require.NoError(t, s.r.DB.Raw(`SELECT id, kind, state, array_to_string(attempted_by, ',') AS attempted_by,
		coalesce(array_to_json(errors)::text, '[]') AS errors FROM river_job`).Scan(&jobs).Error)
	worked := map[string]int{}
	again := attempts{Dead: map[string]int{}, HandedBack: map[string]int{}, TakenOver: map[string]int{}, Failed: map[string]int{}}
	for _, j := range jobs {
		var by []string
		if j.AttemptedBy != "" {
			by = strings.Split(j.AttemptedBy, ",")
		}
		var errs []struct {
			Error string `json:"error"`
		}
		require.NoError(t, json.Unmarshal([]byte(j.Errors), &errs))
		for _, c := range by {
			require.Contains(t, s.clients, c, "job %d (%s) worked by a client of no replica", j.ID, j.Kind)
		}
		for _, c := range by[:max(0, len(by)-1)] {
			if s.clients[c] == s.victim {
				again.Dead[j.Kind]++
			}
		}
		for _, e := range errs {
			switch {
			case e.Error == rescued:
				again.HandedBack[j.Kind]++
			case strings.HasPrefix(e.Error, "lease taken over: "): // runner.Enqueuer.Abandon
				again.TakenOver[j.Kind]++
			default:
				again.Failed[j.Kind]++
			}
		}
		if j.State == "completed" && len(by) > 0 {
			worked[s.clients[by[len(by)-1]]]++
		}
	}
	require.Zero(t, s.count("SELECT count(*) FROM (SELECT args->>'run_id' FROM river_job WHERE kind = 'run.apply' GROUP BY 1 HAVING count(*) > 1) x"), "no run has two apply jobs")
	for _, l := range lanes {
		id := l.Runs[0].ID
		takeovers := s.count("SELECT count(*) FROM audit_events WHERE target_id = ? AND action = 'run.lease_expired' AND data->>'phase' = 'plan'", id)
		require.Equal(t, 1+takeovers, s.count("SELECT plan_revision FROM runs WHERE id = ?", id), "run %s planned once, and again once per takeover of its plan", id)
		require.EqualValues(t, 1, s.count("SELECT count(*) FROM audit_events WHERE target_id = ? AND action = 'run.running'", id), "run %s began its apply once", id)
	}
	for _, id := range s.ids {
		require.Positive(t, worked[id], "replica %s worked jobs: the replicas share the queue (%v)", id, worked)
	}
	return worked, again
}

// checkLeaders asserts that periodic jobs ran on the leader only: one drift dispatch
// per interval over the time they were inserted (plus one at the start of each leader's
// term and some slack), where three leaders would have inserted three times as many.
// It returns the number of dispatches.
func (s *scale) checkLeaders() int64 {
	t := s.t
	var d struct {
		N    int64
		Span float64
	}
	require.NoError(t, s.r.DB.Raw("SELECT count(*) AS n, coalesce(extract(epoch FROM max(created_at) - min(created_at)), 0) AS span FROM river_job WHERE kind = 'drift.dispatch'").Scan(&d).Error)
	s.leadersMu.Lock()
	terms := len(s.leaders)
	leaders := slices.Clone(s.leaders)
	s.leadersMu.Unlock()
	require.Positive(t, terms, "a leader was elected")
	for _, l := range leaders {
		require.Contains(t, s.clients, l, "the leader is a replica")
	}
	span := time.Duration(d.Span * float64(time.Second))
	require.Positive(t, d.N)
	require.LessOrEqual(t, d.N, int64(span/dispatchEvery)+int64(terms)+3, "%d drift dispatches in %s with %d leader terms %v: the leader's alone", d.N, span, terms, leaders)
	return d.N
}

// checkLeftovers asserts that the restarted victim removed its dead jobs' scratch
// directories and containers.
func (s *scale) checkLeftovers() {
	t := s.t
	bench.Eventually(t, "the restarted victim to remove its dead jobs' directories", 30*time.Second, func() (bool, any) {
		left, _ := filepath.Glob(filepath.Join(s.work, "jobs", "*", "*"))
		return len(left) == 0, left
	}, bench.Poll(100*time.Millisecond))
	roots, _ := filepath.Glob(filepath.Join(s.work, "replicas", "*", "runc"))
	for _, root := range roots {
		out, err := exec.Command("runc", "--root", root, "list", "-q").CombinedOutput()
		require.NoError(t, err, "runc list: %s", out)
		require.Empty(t, strings.TrimSpace(string(out)), "no runc container left in %s", root)
	}
}
