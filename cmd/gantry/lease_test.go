package main

import (
	"context"
	"encoding/json"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"gantry/models/authz"
	runpkg "gantry/models/run"
)

// kill ends a portal with SIGKILL: no shutdown, no cleanup, its leases left behind.
func (p *replica) kill(t *testing.T) {
	t.Helper()
	require.NoError(t, p.cmd.Process.Signal(syscall.SIGKILL))
	_ = p.cmd.Wait()
}

// takeover is the audit record of a lease the sweeper took over.
type takeover struct {
	Phase      runpkg.JobKind `json:"phase"`
	Holder     string         `json:"holder"`
	RenewedAt  time.Time      `json:"renewed_at"`
	ExpiredAt  time.Time      `json:"expired_at"`
	DetectedAt time.Time      `json:"detected_at"`
	SweepPass  int64          `json:"sweep_pass"`
	// PreviousPassAt is when the sweeper's pass before the one that took it ran.
	PreviousPassAt *time.Time `json:"previous_pass_at"`
}

// TestLeaseTakesOverAKilledPortal: two portals with the default heartbeat (5 s) and
// lease (15 s); the one running a phase is SIGKILLed, mid-plan and then mid-apply. The
// other takes its lease over within 30 s of the kill, by the database clock (the dead
// worker's last renewal is before the kill; the takeover's detection after it) and by
// sweeper passes (the first pass after the lease expired took it over): the plan is
// planned again by a fresh job, the apply becomes APPLY_INTERRUPTED and is never
// applied. The dead workers' jobs are closed by the sweeper, never rescued by River.
func TestLeaseTakesOverAKilledPortal(t *testing.T) {
	t.Parallel()
	r := newReplicas(t)
	ctx := context.Background()
	// Each phase takes 10 s, so the one running it is surely mid-phase when killed.
	portals := map[string]*replica{}
	start := func(id string) { portals[id] = r.start("--replica-id="+id, "--runner-delay=10s") }
	start("a")
	var operator, admin, staging string
	require.NoError(t, r.DB.Raw("SELECT id FROM users WHERE subject = 'acme-operator'").Scan(&operator).Error)
	require.NoError(t, r.DB.Raw("SELECT id FROM users WHERE subject = 'acme-admin'").Scan(&admin).Error)
	require.NoError(t, r.DB.Raw("SELECT id FROM environments WHERE organization_id = ? AND name = 'staging'", r.Orgs["acme"]).Scan(&staging).Error)
	asOperator := authz.WithSubject(ctx, authz.Subject{UserID: operator, Name: "Olivia", OrganizationID: r.Orgs["acme"], Role: authz.RoleOperator})
	asAdmin := authz.WithSubject(ctx, authz.Subject{UserID: admin, Name: "Adam", OrganizationID: r.Orgs["acme"], Role: authz.RoleAdmin})
	run, err := r.System.Runs.Request(asOperator, runpkg.Request{EnvironmentID: staging, Workspace: "leases", Template: "bucket",
		Kind: runpkg.KindApply, Inputs: map[string]string{"name": "lease-bucket"}})
	require.NoError(t, err)

	current := func() runpkg.Run {
		var got runpkg.Run
		require.NoError(t, r.DB.Where("id = ?", run.ID).Take(&got).Error)
		return got
	}
	holder := func(phase runpkg.JobKind) string {
		var h string
		require.NoError(t, r.DB.Raw("SELECT coalesce(max(holder), '') FROM run_leases WHERE run_id = ? AND phase = ?", run.ID, string(phase)).Scan(&h).Error)
		return h
	}
	count := func(q string, args ...any) int64 {
		var n int64
		require.NoError(t, r.DB.Raw(q, args...).Scan(&n).Error)
		return n
	}
	jobs := func(kind string) []map[string]any {
		var rows []map[string]any
		require.NoError(t, r.DB.Raw("SELECT id, state, attempt, args::text AS args FROM river_job WHERE kind = ? AND args->>'run_id' = ?", kind, run.ID).Scan(&rows).Error)
		return rows
	}
	// tookOver is the sweeper's record of the takeover of phase, once it happened.
	tookOver := func(phase runpkg.JobKind, action string) (takeover, bool) {
		var raw string
		require.NoError(t, r.DB.Raw("SELECT coalesce(max(data::text), '') FROM audit_events WHERE target_id = ? AND action = ?", run.ID, action).Scan(&raw).Error)
		if raw == "" {
			return takeover{}, false
		}
		var ev struct {
			takeover
			Lease *takeover `json:"lease"`
		}
		require.NoError(t, json.Unmarshal([]byte(raw), &ev))
		if ev.Lease != nil {
			ev.takeover = *ev.Lease
		}
		return ev.takeover, ev.takeover.Phase == phase
	}
	// within30s asserts the takeover came within 30 s of the kill: by the database
	// clock, and by the sweeper passes that finished between the last renewal and it.
	within30s := func(tk takeover) {
		t.Helper()
		require.False(t, tk.RenewedAt.IsZero())
		require.LessOrEqual(t, tk.DetectedAt.Sub(tk.RenewedAt), 30*time.Second, "detected %s after the last renewal (the kill came after it): %+v", tk.DetectedAt.Sub(tk.RenewedAt), tk)
		require.False(t, tk.DetectedAt.Before(tk.ExpiredAt), "never before the lease expired")
		// Counted in sweeper passes: the pass that took it over was the first after the
		// lease expired (the one before ran while it was still live).
		require.Positive(t, tk.SweepPass)
		require.NotNil(t, tk.PreviousPassAt, "a pass ran before")
		require.True(t, tk.PreviousPassAt.Before(tk.ExpiredAt), "taken over at the first pass after it expired: %+v", tk)
	}

	// Mid-plan: a holds the plan's lease; b starts and a is killed.
	require.Eventually(t, func() bool { return holder(runpkg.JobPlan) == "a" }, 60*time.Second, 20*time.Millisecond, "a never planned:\n%s", portals["a"].out)
	start("b")
	portals["a"].kill(t)
	require.Equal(t, runpkg.Planning, current().State, "the killed portal finished nothing")
	var planTakeover takeover
	require.Eventually(t, func() bool {
		var ok bool
		planTakeover, ok = tookOver(runpkg.JobPlan, "run.lease_expired")
		return ok
	}, 90*time.Second, 100*time.Millisecond, "the plan's lease was never taken over:\n%s", portals["b"].out)
	require.Equal(t, "a", planTakeover.Holder)
	within30s(planTakeover)
	require.Eventually(t, func() bool { return current().State == runpkg.PendingApproval }, 60*time.Second, 100*time.Millisecond, "not planned again:\n%s", portals["b"].out)
	require.Equal(t, 2, current().PlanRevision, "planned again after the takeover")
	require.EqualValues(t, 1, count("SELECT count(*) FROM river_job WHERE kind = 'run.plan' AND args->>'run_id' = ? AND state = 'cancelled' AND attempt = 1", run.ID),
		"the dead worker's job was closed by the sweeper, not rescued")
	// (River records a job's completion shortly after the work it did commits.)
	require.Eventually(t, func() bool {
		return count("SELECT count(*) FROM river_job WHERE kind = 'run.plan' AND args->>'run_id' = ? AND state = 'completed' AND attempt = 1 AND (args->>'takeover')::bigint > 0", run.ID) == 1
	}, 10*time.Second, 50*time.Millisecond, "the takeover's fresh job planned it: %v", jobs("run.plan"))
	require.EqualValues(t, 1, count("SELECT count(*) FROM audit_events WHERE target_id = ? AND action = 'run.pending_approval'", run.ID))

	// Mid-apply: a is back (restarted); whichever portal applies is killed.
	start("a")
	_, err = r.System.Runs.Approve(asAdmin, run.ID, runpkg.Approval{Evidence: runpkg.EvidenceOf(current())})
	require.NoError(t, err)
	var applier string
	require.Eventually(t, func() bool { applier = holder(runpkg.JobApply); return applier != "" }, 60*time.Second, 20*time.Millisecond, "the apply never started")
	survivor := map[string]string{"a": "b", "b": "a"}[applier]
	portals[applier].kill(t)
	require.Equal(t, runpkg.Running, current().State)
	require.Eventually(t, func() bool { return current().State == runpkg.ApplyInterrupted }, 90*time.Second, 100*time.Millisecond,
		"the apply's lease was never taken over:\n%s", portals[survivor].out)
	applyTakeover, ok := tookOver(runpkg.JobApply, "run.apply_interrupted")
	require.True(t, ok, "the interruption records the lease it took over")
	require.Equal(t, applier, applyTakeover.Holder)
	within30s(applyTakeover)
	require.EqualValues(t, 1, count("SELECT count(*) FROM river_job WHERE kind = 'run.apply' AND args->>'run_id' = ? AND state = 'cancelled'", run.ID),
		"the dead apply's job was closed: River never hands it to another worker")
	require.Zero(t, count("SELECT count(*) FROM river_job WHERE kind = 'run.apply' AND args->>'run_id' = ? AND attempt > 1", run.ID), "never applied again")
	require.Zero(t, count("SELECT count(*) FROM state_versions WHERE run_id = ?", run.ID), "never applied")
	require.Zero(t, count("SELECT count(*) FROM run_leases WHERE run_id = ?", run.ID), "no lease left behind")
	portals[survivor].stop(t)
}
