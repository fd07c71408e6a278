//go:build !fast

// Live: needs live OpenTofu (bin/tofu, built from tools/tofu) and gantry-phase built from source.

package kube_test

// The phase protocol end to end without a cluster: every phase's gantry-phase runs as a
// local process (localLauncher) against a real portal with real OpenTofu and the sandbox
// cloud.

import (
	"context"
	"maps"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"gantry/bench"
	"gantry/models/db/dbtest"
	"gantry/models/run"
	"gantry/runner"
	"gantry/runner/kube"
	"gantry/runner/tofu"
)

// phaseWait is the budget (idle-machine time, bench.Eventually) of a wait for a live phase.
const phaseWait = 3 * time.Minute

func startLocal(t *testing.T, opts envOptions) (*env, *localLauncher) {
	t.Helper()
	var l *localLauncher
	opts.launcher = func(t testing.TB, tc tofu.Toolchain, root string) kube.Launcher {
		l = newLocalLauncher(t, tc, root)
		return l
	}
	return start(t, opts), l
}

// TestPhasesThroughTheEndpoint: a run is planned, approved, applied and verified, each
// phase by gantry-phase fetching its inputs from the phase endpoint and uploading its
// outcome; the live log reaches the run as the phase runs; every phase had its own
// endpoint token and Secret files, none in its environment, and no session outlives its
// phase.
func TestPhasesThroughTheEndpoint(t *testing.T) {
	t.Parallel()
	e, l := startLocal(t, envOptions{})
	operator := e.LoggedIn(t, "operator@acme.test")
	admin := e.LoggedIn(t, "admin@acme.test")
	staging := e.OrgEnvironmentID(t, "acme", "staging")

	r := e.App.WaitForRun(t, e.App.RequestRun(t, operator, postgresInputs(staging, "orders-db", run.KindApply)), run.PendingApproval, phaseWait)
	require.Equal(t, kube.Name, r.Runner)
	require.False(t, r.Simulated)
	require.Equal(t, 3, r.PlanSummary.Create, e.App.RunLogs(t, r))
	approve(t, e.App, admin, r)
	r = e.App.WaitForRun(t, r.ID, run.Succeeded, phaseWait)
	require.Equal(t, 1, e.cloudObjects(t, "database"))
	require.Contains(t, string(r.Outputs), "orders.db.sandbox.internal:5432")
	logs := e.App.RunLogs(t, r)
	require.Contains(t, logs, "Plan: 3 to add, 0 to change, 0 to destroy.")
	require.Regexp(t, `(?m)^\$ tofu apply .*plan\.bin$`, logs)
	require.Contains(t, logs, "Apply complete! Resources: 3 added")
	for _, phase := range []string{"plan", "apply", "verify"} {
		require.Positive(t, logChunks(t, e.App, r.ID, phase), "the %s's live log was stored as it came", phase)
	}
	require.Len(t, e.applies(t, r), 1)

	specs := l.launched()
	require.Equal(t, []string{kube.PhasePlan, kube.PhaseApply, kube.PhaseVerify}, phasesOf(specs))
	tokens := map[string]bool{}
	for _, s := range specs {
		require.Equal(t, r.ID, s.RunID)
		for k, v := range s.Env {
			require.NotContains(t, []string{string(s.Secrets[kube.SecretStatePassword]), string(s.Secrets[kube.SecretCloudToken]),
				string(s.Secrets[kube.SecretEndpointToken])}, v, "%s=%s in the environment is a secret", k, v)
		}
		names := slices.Sorted(maps.Keys(s.Secrets))
		require.Equal(t, []string{kube.SecretCloudToken, kube.SecretEndpointToken, kube.SecretStatePassword, kube.SecretStateUsername}, names, s.Phase)
		token := string(s.Secrets[kube.SecretEndpointToken])
		require.False(t, tokens[token], "every phase has its own endpoint token")
		tokens[token] = true
		// The phase is over: its token opens nothing any more.
		req, err := http.NewRequest(http.MethodGet, s.Env[kube.EnvPhaseURL]+"/config", nil)
		require.NoError(t, err)
		req.Header.Set("Authorization", "Bearer "+token)
		resp, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		resp.Body.Close()
		require.Equal(t, http.StatusNotFound, resp.StatusCode)
	}
	require.Zero(t, e.Portal.Sessions())
}

func phasesOf(specs []kube.PodSpec) []string {
	var out []string
	for _, s := range specs {
		out = append(out, s.Phase)
	}
	return out
}

// slowWrites answers every change of a cloud object late (after it was made).
func slowWrites(delay time.Duration) func(http.Handler) http.Handler {
	wrap, _ := writeSeen(delay)
	return wrap
}

// writeSeen is slowWrites that also closes written once the cloud has made its first
// change: a test that kills an apply "mid-apply" waits for it, so the apply had a side
// effect when it was killed, whatever the machine's pace (tofu's "Creating..." comes before
// the request).
func writeSeen(delay time.Duration) (wrap func(http.Handler) http.Handler, written <-chan struct{}) {
	ch := make(chan struct{})
	var once sync.Once
	return func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			next.ServeHTTP(w, r)
			if r.Method != http.MethodGet && strings.HasPrefix(r.URL.Path, "/v1/") {
				once.Do(func() { close(ch) })
				time.Sleep(delay) // the slow cloud under test, not a wait
			}
		})
	}, ch
}

// interruptedForGood checks what an apply killed from outside leaves, with the lease
// sweeper paused (so the job's next attempt is the only one that can act): the run
// APPLY_INTERRUPTED by that attempt ("stopped mid-apply"), every apply job of the run
// finalized (no attempt can come any more: "never again" holds for good, not for a
// window), and the plan attempted exactly once (it was killed after its first write).
func interruptedForGood(t *testing.T, e *env, r run.Run) run.Run {
	t.Helper()
	r = e.App.WaitForRun(t, r.ID, run.ApplyInterrupted, phaseWait)
	require.Contains(t, r.StateReason, "stopped mid-apply")
	bench.Eventually(t, "every apply job of run "+r.ID+" to be finalized", phaseWait, func() (bool, any) {
		var open []string
		require.NoError(t, e.DB.Raw("SELECT state FROM river_job WHERE kind = 'run.apply' AND args->>'run_id' = ? AND finalized_at IS NULL", r.ID).Scan(&open).Error)
		return len(open) == 0, open
	}, bench.Poll(100*time.Millisecond))
	require.NoError(t, e.DB.Where("id = ?", r.ID).Take(&r).Error)
	require.Equal(t, run.ApplyInterrupted, r.State)
	require.Len(t, e.applies(t, r), 1, "the plan was attempted once")
	return r
}

// TestPodKilledMidApplyIsInterrupted: gantry-phase (and its tofu) killed while the apply
// creates resources ends the run APPLY_INTERRUPTED, through the lease as for a dead
// portal, and the plan is never applied again; a plan whose pod is killed is planned
// again by a fresh pod.
func TestPodKilledMidApplyIsInterrupted(t *testing.T) {
	t.Parallel()
	cloud, written := writeSeen(2 * time.Second)
	e, l := startLocal(t, envOptions{cloud: cloud})
	l.killOn = map[string]string{kube.PhasePlan: "$ tofu plan", kube.PhaseApply: "Creating..."}
	l.killAfter = map[string]<-chan struct{}{kube.PhaseApply: written}
	dbtest.HoldAdvisoryLock(t, e.DB, runner.SweepLockKey)
	operator := e.LoggedIn(t, "operator@acme.test")
	admin := e.LoggedIn(t, "admin@acme.test")
	staging := e.OrgEnvironmentID(t, "acme", "staging")

	r := e.App.WaitForRun(t, e.App.RequestRun(t, operator, postgresInputs(staging, "orders-db", run.KindApply)), run.PendingApproval, phaseWait)
	require.Equal(t, []string{kube.PhasePlan, kube.PhasePlan}, phasesOf(l.launched()), "the killed plan was planned again")
	approve(t, e.App, admin, r)
	interruptedForGood(t, e, r)
	require.Equal(t, []string{kube.PhasePlan, kube.PhasePlan, kube.PhaseApply}, phasesOf(l.launched()), "one apply pod, never another")
	require.Zero(t, e.Portal.Sessions())
}

// TestProtocolFailureFailsThePhase: a pod whose endpoint token is not its Job's (here:
// another phase's) is refused its inputs; gantry-phase says why in its termination
// message and the plan fails with it.
func TestProtocolFailureFailsThePhase(t *testing.T) {
	t.Parallel()
	var mu sync.Mutex
	var firstRun, earlier string // the first run, and its plan's endpoint token
	e := start(t, envOptions{launcher: func(t testing.TB, tc tofu.Toolchain, root string) kube.Launcher {
		return swapToken{Launcher: newLocalLauncher(t, tc, root), swap: func(spec kube.PodSpec) string {
			mu.Lock()
			defer mu.Unlock()
			own := string(spec.Secrets[kube.SecretEndpointToken])
			switch {
			case firstRun == "":
				firstRun, earlier = spec.RunID, own
			case spec.RunID != firstRun:
				return earlier
			}
			return own
		}}
	}})
	operator := e.LoggedIn(t, "operator@acme.test")
	dev := e.OrgEnvironmentID(t, "acme", "development")
	e.App.WaitForRun(t, e.App.RequestRun(t, operator, bucketInputs(dev, "logs", "30")), run.Succeeded, phaseWait)
	second := e.App.RequestRun(t, operator, bucketInputs(dev, "other-logs", "30"))
	r := e.App.WaitForRun(t, second, run.Failed, phaseWait)
	require.Contains(t, r.StateReason, "gantry-phase failed: reading the phase's description")
	require.Contains(t, r.StateReason, "403")
	require.Zero(t, e.Portal.Sessions())
}

// swapToken hands the pod another endpoint token than its own.
type swapToken struct {
	kube.Launcher
	swap func(kube.PodSpec) string
}

func (s swapToken) Launch(ctx context.Context, spec kube.PodSpec) (kube.Pod, error) {
	secrets := map[string][]byte{}
	for k, v := range spec.Secrets {
		secrets[k] = v
	}
	secrets[kube.SecretEndpointToken] = []byte(s.swap(spec))
	spec.Secrets = secrets
	return s.Launcher.Launch(ctx, spec)
}

// TestTokenRefreshedThroughTheEndpoint: workload tokens live 4 s and the cloud answers
// each change 3 s late, so the apply outlives its first token several times; the pod asks
// the endpoint for fresh ones, which are masked in the stored logs.
func TestTokenRefreshedThroughTheEndpoint(t *testing.T) {
	t.Parallel()
	var seen tokenLog
	e, _ := startLocal(t, envOptions{tokenLifetime: 4 * time.Second, cloud: func(h http.Handler) http.Handler {
		return seen.wrap(slowWrites(3 * time.Second)(h))
	}})
	operator := e.LoggedIn(t, "operator@acme.test")
	admin := e.LoggedIn(t, "admin@acme.test")
	staging := e.OrgEnvironmentID(t, "acme", "staging")
	r := e.App.WaitForRun(t, e.App.RequestRun(t, operator, postgresInputs(staging, "orders-db", run.KindApply)), run.PendingApproval, phaseWait)
	approve(t, e.App, admin, r)
	r = e.App.WaitForRun(t, r.ID, run.Succeeded, phaseWait)
	logs := e.App.RunLogs(t, r)
	require.Contains(t, logs, "the workload token was refreshed")
	tokens := seen.distinct()
	require.Greater(t, len(tokens), 2, "the apply's changes came with fresh tokens")
	for _, tok := range tokens {
		require.NotContains(t, logs, tok)
	}
}

// tokenLog records the bearer tokens of the cloud's writes.
type tokenLog struct {
	mu   sync.Mutex
	seen []string
}

func (l *tokenLog) wrap(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodGet && strings.HasPrefix(r.URL.Path, "/v1/") {
			l.mu.Lock()
			l.seen = append(l.seen, strings.TrimPrefix(r.Header.Get("Authorization"), "Bearer "))
			l.mu.Unlock()
		}
		next.ServeHTTP(w, r)
	})
}

func (l *tokenLog) distinct() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	s := slices.Clone(l.seen)
	slices.Sort(s)
	return slices.Compact(s)
}
