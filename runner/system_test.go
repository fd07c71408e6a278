package runner_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"gorm.io/gorm"

	"gantry/bench"
	catalogfiles "gantry/catalog"
	"gantry/cmd/gantry/assemble"
	"gantry/models/artifact"
	"gantry/models/authz"
	"gantry/models/db"
	"gantry/models/db/dbtest"
	"gantry/models/demo"
	"gantry/models/errs"
	"gantry/models/keyring"
	"gantry/models/run"
	"gantry/runner"
	"gantry/runner/mock"
)

func TestMain(m *testing.M) { os.Exit(dbtest.Main(m)) }

// harness is the run machinery on a fresh database with the demo data.
type harness struct {
	t      testing.TB
	db     *gorm.DB
	sys    *assemble.Portal
	orgID  string
	users  map[string]authz.Subject // by role
	envs   map[string]string        // name -> id
	keys   *keyring.Keyring
	spec   string // keys' specification (a test may rotate to a new key)
	cancel context.CancelFunc
	// changes signals at every run change notification (the event waitFor waits on).
	changes <-chan struct{}
}

type harnessOpts struct {
	runner       runner.Runner
	onApplyStart func(string, time.Time)
	applyHooks   runner.ApplyHooks
	rescueAfter  time.Duration
	leases       runner.LeaseConfig
}

func newHarness(t testing.TB, opts harnessOpts) *harness {
	t.Helper()
	ctx := context.Background()
	dsn := dbtest.NewURL(t)
	gdb, err := db.Open(ctx, dsn)
	require.NoError(t, err)
	t.Cleanup(func() {
		if s, err := gdb.DB(); err == nil {
			s.Close()
		}
	})
	orgs, err := demo.Seed(ctx, gdb, "https://idp.test")
	require.NoError(t, err)
	h := &harness{t: t, db: gdb, orgID: orgs["acme"], users: map[string]authz.Subject{}, envs: map[string]string{},
		changes: dbtest.NotificationsURL(t, dsn, run.ChangesChannel)}
	for _, u := range demo.Users() {
		if u.OrgSlug != "acme" {
			continue
		}
		var id string
		require.NoError(t, gdb.Raw("SELECT id FROM users WHERE subject = ?", u.Subject).Scan(&id).Error)
		h.users[string(u.Role)] = authz.Subject{UserID: id, Name: u.Name, OrganizationID: h.orgID, Role: u.Role}
	}
	var envs []struct{ ID, Name string }
	require.NoError(t, gdb.Raw("SELECT id, name FROM environments WHERE organization_id = ?", h.orgID).Scan(&envs).Error)
	for _, e := range envs {
		h.envs[e.Name] = e.ID
	}
	if opts.runner == nil {
		opts.runner = mock.New()
	}
	h.spec = keyring.NewKeySpec("test-1")
	h.keys, err = keyring.Parse(h.spec)
	require.NoError(t, err)
	h.sys, err = assemble.Build(ctx, assemble.Config{DB: gdb, DSN: dsn, Keys: h.keys, CatalogFS: catalogfiles.FS,
		Runner: opts.runner, BaseURL: "http://gantry.test", Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
		OnApplyStart: opts.onApplyStart, ApplyHooks: opts.applyHooks, RescueStuckJobsAfter: opts.rescueAfter, Leases: opts.leases})
	require.NoError(t, err)
	t.Cleanup(h.stop)
	return h
}

func (h *harness) start() {
	ctx, cancel := context.WithCancel(context.Background())
	h.cancel = cancel
	require.NoError(h.t, h.sys.Queue.Start(ctx))
}

func (h *harness) stop() {
	if h.cancel != nil {
		ctx, cancel := bench.Context(context.Background(), 10*time.Second)
		defer cancel()
		_ = h.sys.Queue.Stop(ctx)
		h.cancel()
		h.cancel = nil
	}
}

func (h *harness) as(role string) context.Context {
	return authz.WithSubject(context.Background(), h.users[role])
}

func (h *harness) requestBucket(env, ws, name string, kind run.Kind) run.Run {
	h.t.Helper()
	r, err := h.sys.Runs.Requests.Request(h.as("operator"), run.Request{EnvironmentID: h.envs[env], Workspace: ws, Template: "bucket",
		Kind: kind, Inputs: map[string]string{"name": name}})
	require.NoError(h.t, err)
	return r
}

// waitFor waits for the run to reach one of want, woken by run change notifications, and
// fails with its River jobs when it does not within 20 s of idle-machine time.
func (h *harness) waitFor(id string, want ...run.State) run.Run {
	h.t.Helper()
	var r run.Run
	bench.Eventually(h.t, fmt.Sprintf("run %s to be one of %v", id, want), 20*time.Second, func() (bool, any) {
		require.NoError(h.t, h.db.Where("id = ?", id).Take(&r).Error)
		seen := r
		return slices.Contains(want, r.State), bench.Later(func() string {
			var jobs []struct {
				Kind, State string
				Errors      string
			}
			h.db.Raw("SELECT kind, state, coalesce(errors::text, '') AS errors FROM river_job WHERE args->>'run_id' = ?", id).Scan(&jobs)
			return fmt.Sprintf("%s (%s); jobs: %+v", seen.State, seen.StateReason, jobs)
		})
	}, bench.Wake(h.changes))
	return r
}

func (h *harness) stateVersions(workspaceID string) int64 {
	var n int64
	require.NoError(h.t, h.db.Table("state_versions").Where("workspace_id = ?", workspaceID).Count(&n).Error)
	return n
}

// TestAlteredPlanIsRefused: the plan changes between approval and apply (its recorded
// digest, or the stored plan file itself): the worker ends the run FAILED and applies
// nothing.
func TestAlteredPlanIsRefused(t *testing.T) {
	t.Parallel()
	for _, tamper := range []string{"digest", "plan file"} {
		t.Run(tamper, func(t *testing.T) {
			t.Parallel()
			h := newHarness(t, harnessOpts{})
			h.start()
			r := h.requestBucket("staging", "evidence", "evidence-bucket", run.KindApply)
			r = h.waitFor(r.ID, run.PendingApproval)
			h.stop() // the apply must not start before the tampering

			_, err := h.sys.Runs.Decisions.Approve(h.as("admin"), r.ID, run.Approval{Evidence: run.EvidenceOf(r)})
			require.NoError(t, err)
			switch tamper {
			case "digest":
				require.NoError(t, h.db.Exec("UPDATE runs SET plan_digest = 'sha256:0000000000000000' WHERE id = ?", r.ID).Error)
			case "plan file":
				other, err := h.sys.Artifacts.Put(context.Background(), r.OrganizationID, r.WorkspaceID, artifact.PlanFile, []byte(`{"simulated":true,"changes":[]}`))
				require.NoError(t, err)
				require.NoError(t, h.db.Exec("UPDATE runs SET plan_artifact_id = ? WHERE id = ?", other.ID, r.ID).Error)
			}
			h.start()
			r = h.waitFor(r.ID, run.Failed, run.Succeeded)
			require.Equal(t, run.Failed, r.State)
			require.Contains(t, r.StateReason, "plan digest mismatch")
			require.Contains(t, r.StateReason, "nothing was applied")
			require.Zero(t, h.stateVersions(r.WorkspaceID), "nothing may be applied")
		})
	}
}

// overlaps counts how many applies and verifications run at once, and the most ever.
type overlaps struct {
	runner.Runner
	mu        sync.Mutex
	now, most int
}

func (o *overlaps) enter() {
	o.mu.Lock()
	o.now++
	o.most = max(o.most, o.now)
	o.mu.Unlock()
}

func (o *overlaps) leave() {
	o.mu.Lock()
	o.now--
	o.mu.Unlock()
}

func (o *overlaps) Apply(ctx context.Context, req runner.ApplyRequest) (runner.ApplyResult, error) {
	o.enter()
	defer o.leave()
	return o.Runner.Apply(ctx, req)
}

func (o *overlaps) Verify(ctx context.Context, req runner.VerifyRequest) (runner.VerifyResult, error) {
	o.enter()
	defer o.leave()
	return o.Runner.Verify(ctx, req)
}

// TestOneApplyAtATimePerWorkspace: runs of one workspace apply one at a time, in order.
// The runner itself counts the applies and verifications in flight (a sampling of the
// runs' states could miss a short overlap).
func TestOneApplyAtATimePerWorkspace(t *testing.T) {
	t.Parallel()
	var mu sync.Mutex
	var order []string
	counted := &overlaps{Runner: runner.Delayed(mock.New(), 150*time.Millisecond)}
	h := newHarness(t, harnessOpts{runner: counted, onApplyStart: func(id string, _ time.Time) {
		mu.Lock()
		order = append(order, id)
		mu.Unlock()
	}})
	h.start()
	first := h.requestBucket("development", "shared", "shared-one", run.KindApply)
	second := h.requestBucket("development", "shared", "shared-one", run.KindApply)
	a := h.waitFor(first.ID, run.Succeeded, run.Failed)
	b := h.waitFor(second.ID, run.Succeeded, run.Failed, run.Stale, run.NoChanges)
	counted.mu.Lock()
	most := counted.most
	counted.mu.Unlock()
	require.Equal(t, 1, most, "two runs of one workspace applied or verified at once")
	require.Equal(t, run.Succeeded, a.State)
	// Both were planned against the empty state; the second may not apply over the first.
	require.Equal(t, run.Stale, b.State, b.StateReason)
	require.Equal(t, []string{first.ID}, order)
}

func TestCancelAndRejectRecordNoApproval(t *testing.T) {
	t.Parallel()
	h := newHarness(t, harnessOpts{})
	h.start()
	r := h.waitFor(h.requestBucket("staging", "decide", "decide-bucket", run.KindApply).ID, run.PendingApproval)
	_, err := h.sys.Runs.Decisions.Reject(h.as("admin"), r.ID, run.EvidenceOf(r), " ")
	v, ok := errs.AsValidation(err)
	require.True(t, ok, "a rejection needs a reason: %v", err)
	require.Contains(t, v.Fields, "reason")
	rejected, err := h.sys.Runs.Decisions.Reject(h.as("admin"), r.ID, run.EvidenceOf(r), "wrong region for this data")
	require.NoError(t, err)
	require.Equal(t, run.Rejected, rejected.State)
	require.Nil(t, rejected.ApprovedBy)
	_, err = h.sys.Runs.Decisions.Approve(h.as("owner"), r.ID, run.Approval{Evidence: run.EvidenceOf(r)})
	require.ErrorIs(t, err, run.ErrInvalidTransition, "a rejected run cannot be approved")

	c := h.waitFor(h.requestBucket("staging", "decide2", "decide-two", run.KindApply).ID, run.PendingApproval)
	_, err = h.sys.Runs.Decisions.Cancel(h.as("viewer"), c.ID, run.Cancellation{Reason: ""})
	require.Error(t, err)
	cancelled, err := h.sys.Runs.Decisions.Cancel(h.as("operator"), c.ID, run.Cancellation{Reason: "no longer needed"})
	require.NoError(t, err)
	require.Equal(t, run.Cancelled, cancelled.State)
	require.NotNil(t, cancelled.FinishedAt)
}

// TestExpiry: a decision window or approval validity that ran out (by the database
// clock) ends the run EXPIRED; an expired run can never be approved.
func TestExpiry(t *testing.T) {
	t.Parallel()
	h := newHarness(t, harnessOpts{})
	h.start()
	r := h.waitFor(h.requestBucket("staging", "late", "late-bucket", run.KindApply).ID, run.PendingApproval)
	require.NoError(t, h.db.Exec("UPDATE runs SET decision_deadline = now() - interval '1 second' WHERE id = ?", r.ID).Error)
	_, err := h.sys.Runs.Decisions.ExpireIfDue(context.Background(), r.ID, run.PendingApproval)
	require.NoError(t, err)
	r = h.waitFor(r.ID, run.Expired)
	_, err = h.sys.Runs.Decisions.Approve(h.as("admin"), r.ID, run.Approval{Evidence: run.EvidenceOf(r)})
	require.ErrorIs(t, err, errs.ErrApprovalExpired)

	// Not yet due: nothing happens.
	r2 := h.waitFor(h.requestBucket("staging", "early", "early-bucket", run.KindApply).ID, run.PendingApproval)
	_, err = h.sys.Runs.Decisions.ExpireIfDue(context.Background(), r2.ID, run.PendingApproval)
	require.ErrorIs(t, err, run.ErrSkip)

	// An approval whose validity ran out before the apply started expires instead of applying.
	h.stop()
	_, err = h.sys.Runs.Decisions.Approve(h.as("admin"), r2.ID, run.Approval{Evidence: run.EvidenceOf(r2)})
	require.NoError(t, err)
	require.NoError(t, h.db.Exec("UPDATE runs SET approval_expires_at = now() - interval '1 second' WHERE id = ?", r2.ID).Error)
	h.start()
	r2 = h.waitFor(r2.ID, run.Expired)
	require.Zero(t, h.stateVersions(r2.WorkspaceID))
}

// TestInterruptedApplyIsNeverReapplied: a run found RUNNING when its apply job starts
// (its worker died mid-apply) becomes APPLY_INTERRUPTED and keeps the workspace fenced.
func TestInterruptedApplyIsNeverReapplied(t *testing.T) {
	t.Parallel()
	h := newHarness(t, harnessOpts{})
	h.start()
	r := h.waitFor(h.requestBucket("staging", "crash", "crash-bucket", run.KindApply).ID, run.PendingApproval)
	h.stop()
	_, err := h.sys.Runs.Decisions.Approve(h.as("admin"), r.ID, run.Approval{Evidence: run.EvidenceOf(r)})
	require.NoError(t, err)
	// Simulate the dead worker: it had moved the run to RUNNING and taken the slot.
	require.NoError(t, h.db.Exec("UPDATE runs SET state = 'RUNNING' WHERE id = ?", r.ID).Error)
	require.NoError(t, h.db.Exec("UPDATE workspaces SET active_run_id = ? WHERE id = ?", r.ID, r.WorkspaceID).Error)
	_, err = h.sys.Runs.Applies.BeginApply(context.Background(), r.ID, byHand)
	require.ErrorIs(t, err, run.ErrSkip)
	r = h.waitFor(r.ID, run.ApplyInterrupted)
	require.Zero(t, h.stateVersions(r.WorkspaceID))
	var active *string
	require.NoError(t, h.db.Raw("SELECT active_run_id FROM workspaces WHERE id = ?", r.WorkspaceID).Scan(&active).Error)
	require.NotNil(t, active, "the workspace stays fenced until an admin recovers the run")

	// The documented recovery: an admin closes the run with a reason; the workspace is free.
	_, err = h.sys.Runs.Decisions.Recover(h.as("operator"), r.ID, "checked the bucket by hand")
	require.Error(t, err, "recovery needs an admin")
	_, err = h.sys.Runs.Decisions.Recover(h.as("admin"), r.ID, "")
	_, ok := errs.AsValidation(err)
	require.True(t, ok, "recovering needs a reason: %v", err)
	recovered, err := h.sys.Runs.Decisions.Recover(h.as("admin"), r.ID, "checked the bucket by hand")
	require.NoError(t, err)
	require.Equal(t, run.Failed, recovered.State)
	require.NoError(t, h.db.Raw("SELECT active_run_id FROM workspaces WHERE id = ?", r.WorkspaceID).Scan(&active).Error)
	require.Nil(t, active)
	h.start()
	next := h.waitFor(h.requestBucket("staging", "crash", "crash-bucket", run.KindApply).ID, run.PendingApproval)
	_, err = h.sys.Runs.Decisions.Approve(h.as("admin"), next.ID, run.Approval{Evidence: run.EvidenceOf(next)})
	require.NoError(t, err)
	h.waitFor(next.ID, run.Succeeded)
}

// planByHand runs the plan phase of r with the mock runner without the queue.
func (h *harness) planByHand(r run.Run) run.Run {
	h.t.Helper()
	ctx := context.Background()
	work, err := h.sys.Runs.Plans.BeginPlan(ctx, r.ID, byHand)
	require.NoError(h.t, err)
	res, err := mock.New().Plan(ctx, runner.PlanRequest{RunID: r.ID, WorkspaceID: r.WorkspaceID, Kind: runner.Kind(r.Kind), Config: work.Config, PriorState: work.PriorState})
	require.NoError(h.t, err)
	out, err := h.sys.Runs.Plans.FinishPlan(ctx, run.PlanOutcome{Lease: work.Lease, Revision: work.Run.PlanRevision, PlanFile: res.PlanFile, PlanJSON: res.PlanJSON, Log: res.Log, HasChanges: res.HasChanges})
	require.NoError(h.t, err)
	return out
}

// TestEntitlementsRecheckedBeforeApply: a requester who lost their role after a
// self-service approval, or an approver who lost it after approving, voids the approval.
func TestEntitlementsRecheckedBeforeApply(t *testing.T) {
	t.Parallel()
	h := newHarness(t, harnessOpts{})
	self := h.planByHand(h.requestBucket("development", "demoted", "demoted-bucket", run.KindApply))
	require.Equal(t, run.Approved, self.State, self.StateReason)
	require.NoError(t, h.db.Exec("UPDATE memberships SET role = 'viewer' WHERE user_id = ?", h.users["operator"].UserID).Error)
	_, err := h.sys.Runs.Applies.BeginApply(context.Background(), self.ID, byHand)
	require.ErrorIs(t, err, run.ErrSkip)
	self = h.waitFor(self.ID, run.Failed)
	require.Contains(t, self.StateReason, "may no longer request runs")
	require.Zero(t, h.stateVersions(self.WorkspaceID))
	require.NoError(t, h.db.Exec("UPDATE memberships SET role = 'operator' WHERE user_id = ?", h.users["operator"].UserID).Error)

	gated := h.planByHand(h.requestBucket("staging", "gated", "gated-bucket", run.KindApply))
	_, err = h.sys.Runs.Decisions.Approve(h.as("admin"), gated.ID, run.Approval{Evidence: run.EvidenceOf(gated)})
	require.NoError(t, err)
	require.NoError(t, h.db.Exec("UPDATE memberships SET role = 'viewer' WHERE user_id = ?", h.users["admin"].UserID).Error)
	_, err = h.sys.Runs.Applies.BeginApply(context.Background(), gated.ID, byHand)
	require.ErrorIs(t, err, run.ErrSkip)
	gated = h.waitFor(gated.ID, run.Failed)
	require.Contains(t, gated.StateReason, "the approval is void")
}

// TestApproverNeedsGrantInRestrictedEnvironment: in a restricted environment an
// approver below admin needs a grant, as a requester does.
func TestApproverNeedsGrantInRestrictedEnvironment(t *testing.T) {
	t.Parallel()
	h := newHarness(t, harnessOpts{})
	env := h.envs["staging"]
	require.NoError(t, h.db.Exec("UPDATE environments SET restricted = true WHERE id = ?", env).Error)
	require.NoError(t, h.db.Exec("INSERT INTO environment_grants (organization_id, environment_id, user_id) VALUES (?, ?, ?)", h.orgID, env, h.users["operator"].UserID).Error)
	r := h.planByHand(h.requestBucket("staging", "secret", "secret-bucket", run.KindApply))
	require.Equal(t, run.PendingApproval, r.State)
	// A second operator without a grant may not approve: for them the run does not
	// exist (restricted means restricted: 404, as for another tenant's run).
	other := h.users["viewer"]
	require.NoError(t, h.db.Exec("UPDATE memberships SET role = 'operator' WHERE user_id = ?", other.UserID).Error)
	other.Role = authz.RoleOperator
	_, err := h.sys.Runs.Decisions.Approve(authz.WithSubject(context.Background(), other), r.ID, run.Approval{Evidence: run.EvidenceOf(r)})
	require.ErrorIs(t, err, errs.ErrNotFound)
	require.NoError(t, h.db.Exec("INSERT INTO environment_grants (organization_id, environment_id, user_id) VALUES (?, ?, ?)", h.orgID, env, other.UserID).Error)
	_, err = h.sys.Runs.Decisions.Approve(authz.WithSubject(context.Background(), other), r.ID, run.Approval{Evidence: run.EvidenceOf(r)})
	require.NoError(t, err)
}

// TestCloudLiveRecheckedBeforeApply: a run on a live executor needs cloud.live of its
// requester and its approver; losing it after the approval voids the approval before
// the first side effect.
func TestCloudLiveRecheckedBeforeApply(t *testing.T) {
	t.Parallel()
	h := newHarness(t, harnessOpts{})
	for _, who := range []string{"operator", "admin"} {
		r := h.planByHand(h.requestBucket("staging", "live-"+who, "live-"+who+"-bucket", run.KindApply))
		require.Equal(t, run.PendingApproval, r.State)
		// The run acts on a live cloud (the harness plans with the mock; the rule only
		// reads the run's executor kind).
		require.NoError(t, h.db.Exec("UPDATE runs SET simulated = false WHERE id = ?", r.ID).Error)
		r.Simulated = false
		_, err := h.sys.Runs.Decisions.Approve(h.as("admin"), r.ID, run.Approval{Evidence: run.EvidenceOf(r)})
		require.NoError(t, err, "the demo admin holds cloud.live")
		require.NoError(t, h.db.Exec("UPDATE memberships SET cloud_live = false WHERE user_id = ?", h.users[who].UserID).Error)
		_, err = h.sys.Runs.Applies.BeginApply(context.Background(), r.ID, byHand)
		require.ErrorIs(t, err, run.ErrSkip)
		r = h.waitFor(r.ID, run.Failed)
		require.Contains(t, r.StateReason, "the live-cloud entitlement")
		require.Contains(t, r.StateReason, "the approval is void")
		require.Zero(t, h.stateVersions(r.WorkspaceID), "nothing was applied")
		require.NoError(t, h.db.Exec("UPDATE memberships SET cloud_live = true WHERE user_id = ?", h.users[who].UserID).Error)
	}
}

// byHand is the lease claim of a phase a test begins itself, outside the queue.
var byHand = run.Claim{JobID: -1, Holder: "test"}

// failingExecutor is the mock whose plan or verification fails, saying so in its log.
type failingExecutor struct {
	runner.Runner
	plan, verify error
}

func (f failingExecutor) Plan(ctx context.Context, req runner.PlanRequest) (runner.PlanResult, error) {
	if f.plan != nil {
		return runner.PlanResult{Log: []byte("planning...\n")}, f.plan
	}
	return f.Runner.Plan(ctx, req)
}

func (f failingExecutor) Verify(ctx context.Context, req runner.VerifyRequest) (runner.VerifyResult, error) {
	if f.verify != nil {
		return runner.VerifyResult{Log: []byte("refreshing...\n")}, f.verify
	}
	return f.Runner.Verify(ctx, req)
}

// TestAFailingExecutorFailsThePhase: the plan and verification workers' shared opening
// and ending: an executor's error fails the run with what failed and why, and keeps the
// executor's log.
func TestAFailingExecutorFailsThePhase(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name   string
		exec   failingExecutor
		reason string
		log    string
		stored func(run.Run) *string
	}{
		{"plan", failingExecutor{Runner: mock.New(), plan: errors.New("disk full")}, "plan failed: disk full", "planning...",
			func(r run.Run) *string { return r.PlanLogArtifactID }},
		{"verification", failingExecutor{Runner: mock.New(), verify: errors.New("cloud unreachable")}, "verification failed: cloud unreachable", "refreshing...",
			func(r run.Run) *string { return r.VerifyLogArtifactID }},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			h := newHarness(t, harnessOpts{runner: c.exec})
			h.start()
			r := h.requestBucket("development", "failing-"+c.name, "failing-"+c.name+"-bucket", run.KindApply)
			r = h.waitFor(r.ID, run.Failed, run.Succeeded)
			require.Equal(t, run.Failed, r.State)
			require.Equal(t, c.reason, r.StateReason)
			require.NotNil(t, c.stored(r), "the executor's log is kept")
			log, err := h.sys.Runs.Reads.Artifact(h.as("operator"), r, c.stored(r))
			require.NoError(t, err)
			require.Contains(t, string(log), c.log)
		})
	}
}
