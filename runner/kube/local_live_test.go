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

	"gantry/models/run"
	"gantry/runner/kube"
	"gantry/runner/tofu"
)

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
	return func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			next.ServeHTTP(w, r)
			if r.Method != http.MethodGet && strings.HasPrefix(r.URL.Path, "/v1/") {
				time.Sleep(delay)
			}
		})
	}
}

// TestPodKilledMidApplyIsInterrupted: gantry-phase (and its tofu) killed while the apply
// creates resources ends the run APPLY_INTERRUPTED, through the lease as for a dead
// portal, and the plan is never applied again; a plan whose pod is killed is planned
// again by a fresh pod.
func TestPodKilledMidApplyIsInterrupted(t *testing.T) {
	t.Parallel()
	e, l := startLocal(t, envOptions{cloud: slowWrites(2 * time.Second)})
	l.killOn = map[string]string{kube.PhasePlan: "$ tofu plan", kube.PhaseApply: "Creating..."}
	operator := e.LoggedIn(t, "operator@acme.test")
	admin := e.LoggedIn(t, "admin@acme.test")
	staging := e.OrgEnvironmentID(t, "acme", "staging")

	r := e.App.WaitForRun(t, e.App.RequestRun(t, operator, postgresInputs(staging, "orders-db", run.KindApply)), run.PendingApproval, phaseWait)
	require.Equal(t, []string{kube.PhasePlan, kube.PhasePlan}, phasesOf(l.launched()), "the killed plan was planned again")
	approve(t, e.App, admin, r)
	r = e.App.WaitForRun(t, r.ID, run.ApplyInterrupted, phaseWait)
	// The job's next attempt (BeginApply) or the sweeper, whichever comes first after the
	// worker released the lease, interrupts it.
	require.Regexp(t, `stopped (mid-apply|renewing its lease)`, r.StateReason)
	// Long enough for any retry to have applied again.
	time.Sleep(5 * time.Second)
	require.NoError(t, e.DB.Where("id = ?", r.ID).Take(&r).Error)
	require.Equal(t, run.ApplyInterrupted, r.State)
	require.Equal(t, []string{kube.PhasePlan, kube.PhasePlan, kube.PhaseApply}, phasesOf(l.launched()), "one apply pod, never another")
	require.LessOrEqual(t, len(e.applies(t, r)), 1, "the plan was attempted at most once")
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
	deadline := time.Now().Add(phaseWait)
	var r run.Run
	for {
		require.NoError(t, e.DB.Where("id = ?", second).Take(&r).Error)
		if r.State.Terminal() || time.Now().After(deadline) {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	require.Equal(t, run.Failed, r.State, r.StateReason)
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
