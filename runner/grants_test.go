package runner_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"gantry/bench"
	"gantry/models/identity"
	"gantry/models/run"
	"gantry/runner"
	"gantry/runner/mock"
)

// phaseToken is the workload token one phase was handed; closing release lets the
// phase go on.
type phaseToken struct {
	phase   string
	token   string
	release chan struct{}
}

// heldPhases is the mock seen as a live executor would be (not simulated, so every
// phase gets its credentials: a workload token from Gantry's issuer), holding each
// phase once begun until the test lets it go, and handing the test the phase's token.
type heldPhases struct {
	runner.Runner
	tokens chan phaseToken
	mu     sync.Mutex
	held   []chan struct{}
}

func newHeldPhases(t *testing.T) *heldPhases {
	h := &heldPhases{Runner: mock.New(), tokens: make(chan phaseToken, 3)}
	// Whatever the test left held goes on as it ends (before the queue stops).
	t.Cleanup(func() {
		h.mu.Lock()
		defer h.mu.Unlock()
		for _, c := range h.held {
			select {
			case <-c:
			default:
				close(c)
			}
		}
	})
	return h
}

func (h *heldPhases) Simulated() bool { return false }

func (h *heldPhases) hold(ctx context.Context, phase, token string) error {
	pt := phaseToken{phase: phase, token: token, release: make(chan struct{})}
	h.mu.Lock()
	h.held = append(h.held, pt.release)
	h.mu.Unlock()
	h.tokens <- pt
	select {
	case <-pt.release:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (h *heldPhases) Plan(ctx context.Context, req runner.PlanRequest) (runner.PlanResult, error) {
	if err := h.hold(ctx, "plan", req.Credentials.CloudToken); err != nil {
		return runner.PlanResult{}, err
	}
	return h.Runner.Plan(ctx, req)
}

func (h *heldPhases) Apply(ctx context.Context, req runner.ApplyRequest) (runner.ApplyResult, error) {
	if err := h.hold(ctx, "apply", req.Credentials.CloudToken); err != nil {
		return runner.ApplyResult{}, err
	}
	return h.Runner.Apply(ctx, req)
}

func (h *heldPhases) Verify(ctx context.Context, req runner.VerifyRequest) (runner.VerifyResult, error) {
	if err := h.hold(ctx, "verify", req.Credentials.CloudToken); err != nil {
		return runner.VerifyResult{}, err
	}
	return h.Runner.Verify(ctx, req)
}

// next waits for the next phase to begin and returns it, holding.
func (h *heldPhases) next(t *testing.T, phase string) phaseToken {
	t.Helper()
	got := bench.Receive(t, "the "+phase+" to begin", 20*time.Second, h.tokens)
	require.Equal(t, phase, got.phase)
	require.NotEmpty(t, got.token, "the %s got a workload token", phase)
	return got
}

// release lets a held phase go on.
func (h *heldPhases) release(p phaseToken) {
	h.mu.Lock()
	defer h.mu.Unlock()
	close(p.release)
}

// active asks Gantry's issuer, as a cloud does, whether token is live.
func (h *harness) active(token string) identity.Introspection {
	h.t.Helper()
	got, err := h.sys.Identity.Introspect(context.Background(), token)
	require.NoError(h.t, err)
	return got
}

// TestPhaseTokensEndWithTheirPhase: a job's workload token is live only while its run is
// in the token's phase under a live lease of it (an apply's under exactly the lease its
// token names), asked of the database at every question: a plan's token ends when its
// run is cancelled; an apply's when its lease is released (as a worker that returns
// without finishing leaves it), for an earlier attempt at once, and when the run leaves
// RUNNING; a verification's when the run is done.
func TestPhaseTokensEndWithTheirPhase(t *testing.T) {
	t.Parallel()
	held := newHeldPhases(t)
	// Heartbeats far apart: nothing renews a released lease while the test looks.
	h := newHarness(t, harnessOpts{runner: held, leases: runner.LeaseConfig{Heartbeat: time.Minute, TTL: 2 * time.Minute}})
	h.start()

	// A plan, cancelled.
	cancelled := h.requestBucket("development", "grants-cancelled", "grants-cancelled", run.KindApply)
	plan := held.next(t, "plan")
	got := h.active(plan.token)
	require.True(t, got.Active, "a planning run's plan token")
	require.Equal(t, cancelled.ID, got.Run)
	require.Equal(t, identity.PhasePlan, got.Phase)
	_, err := h.sys.Runs.Decisions.Cancel(h.as("operator"), cancelled.ID, run.Cancellation{Reason: "grant test: cancelled while planning"})
	require.NoError(t, err)
	require.False(t, h.active(plan.token).Active, "the plan token of a cancelled run")
	held.release(plan) // the stopped plan records nothing

	// An apply: planned, decided, applying.
	r := h.requestBucket("development", "grants-applied", "grants-applied", run.KindApply)
	plan = held.next(t, "plan")
	require.True(t, h.active(plan.token).Active)
	held.release(plan)
	r = h.waitFor(r.ID, run.PendingApproval, run.Approved, run.Running)
	require.False(t, h.active(plan.token).Active, "the plan token once the run is past PLANNING")
	if r.State == run.PendingApproval {
		_, err = h.sys.Runs.Decisions.Approve(h.as("admin"), r.ID, run.Approval{Evidence: run.EvidenceOf(r)})
		require.NoError(t, err)
	}
	apply := held.next(t, "apply")
	got = h.active(apply.token)
	require.True(t, got.Active, "a running apply's token")
	var lease int64
	require.NoError(t, h.db.Raw("SELECT token FROM run_leases WHERE run_id = ? AND phase = 'apply'", r.ID).Scan(&lease).Error)
	require.Equal(t, lease, got.Lease, "the token names the apply's lease")
	// Another attempt at the same plan (another lease) is not live beside it.
	r = h.waitFor(r.ID, run.Running)
	earlier, _, err := h.sys.Identity.Mint(context.Background(), identity.Claims{OrganizationID: r.OrganizationID, EnvironmentID: r.EnvironmentID,
		WorkspaceID: r.WorkspaceID, RunID: r.ID, Phase: identity.PhaseApply, PlanDigest: r.PlanDigest, Lease: lease - 1})
	require.NoError(t, err)
	require.False(t, h.active(earlier).Active, "an apply token of another lease")
	// Released, the lease expires now: the token with it.
	l := run.Lease{RunID: r.ID, Phase: run.JobApply, Token: lease}
	require.NoError(t, h.sys.Runs.Jobs.ReleaseLease(context.Background(), l))
	require.False(t, h.active(apply.token).Active, "an apply token whose lease was released")
	require.NoError(t, h.sys.Runs.Jobs.RenewLease(context.Background(), l, time.Minute))
	require.True(t, h.active(apply.token).Active, "renewed by its living worker, the lease is live again")

	// The apply finishes: the run leaves RUNNING, and the apply token is over.
	held.release(apply)
	verify := held.next(t, "verify")
	require.False(t, h.active(apply.token).Active, "the apply token once the run left RUNNING")
	got = h.active(verify.token)
	require.True(t, got.Active, "a verifying run's verify token")
	require.Equal(t, identity.PhaseVerify, got.Phase)
	held.release(verify)
	h.waitFor(r.ID, run.Succeeded)
	require.False(t, h.active(verify.token).Active, "the verify token of a finished run")
}
