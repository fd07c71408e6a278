package run

import (
	"context"
	"time"

	"gantry/models/audit"
	"gantry/models/authz"
	"gantry/models/notify"
)

// The decisions the clock takes (their jobs: runner.ExpireWorker, runner.EscalateWorker):
// a run that waited past its deadline expires, one past its escalation time escalates.

// ExpireIfDue ends a run still in state st once its deadline has passed by the
// database clock. It never prepares an apply.
func (s *Decisions) ExpireIfDue(ctx context.Context, runID string, st State) (Run, error) {
	return s.k.update(ctx, "", runID, nil, func(ctx context.Context, r *Run, now time.Time) error {
		if r.State != st {
			return ErrSkip
		}
		switch {
		case (st == PendingApproval || r.SoftBlocked()) && r.DecisionDeadline != nil && !now.Before(*r.DecisionDeadline):
			return r.end(Expired, EndApprovalExpired, "no decision within the decision window")
		case st == Approved && r.ApprovalExpiresAt != nil && !now.Before(*r.ApprovalExpiresAt):
			return s.k.endValidity(ctx, r)
		}
		return ErrSkip
	})
}

// EscalateIfDue records, once, that run runID has waited its escalation time: from now
// the escalation's deciders may decide too. The rules already judge eligibility by the
// database clock (a decision need not wait for this job); the job makes the escalation
// visible and audited: run.escalated is written exactly once per run and decision row,
// however often the job runs and on however many replicas.
func (s *Decisions) EscalateIfDue(ctx context.Context, runID string) (Run, error) {
	var out Run
	err := s.k.inTx(ctx, func(ctx context.Context) error {
		r, err := s.k.store.lock(ctx, "", runID)
		if err != nil {
			return err
		}
		out = r
		now, err := s.k.now(ctx)
		if err != nil {
			return err
		}
		at := escalatesAt(r)
		if r.State != PendingApproval || at == nil || now.Before(*at) {
			return ErrSkip
		}
		d := RequirementOf(r)
		first, err := s.k.store.recordEscalation(ctx, r, string(d.Escalation), now)
		if err != nil || !first {
			return err
		}
		if err := s.k.audit.RecordAs(ctx, authz.System(r.OrganizationID), audit.Entry{Action: "run.escalated", TargetType: "run", TargetID: r.ID,
			EnvironmentID: r.EnvironmentID, WorkspaceID: r.WorkspaceID,
			Data: map[string]any{"level": r.RiskLevel, "approver": string(d.Approver), "escalation": string(d.Escalation),
				"waiting_since": r.WaitingSince.UTC(), "escalate_after_minutes": int(d.EscalateAfter / time.Minute),
				"reason": "waited " + d.EscalateAfter.String() + " for " + approverPhrase(d.Approver) + "; now also " + approverPhrase(d.Escalation)}}); err != nil {
			return err
		}
		// The escalation's deciders join the run's rows ("Waiting for you").
		if err := s.k.refreshDeciders(ctx, r, now); err != nil {
			return err
		}
		// Everyone who may decide now hears it again, the escalation's deciders first time.
		deciders, err := s.k.store.deciderIDs(ctx, r.ID)
		if err != nil {
			return err
		}
		if err := s.k.notifier.Notify(ctx, notify.Notice{Event: notify.DecisionEscalated, OrganizationID: r.OrganizationID, RunID: r.ID,
			State: string(r.State), Reason: "waited " + d.EscalateAfter.String() + " for " + approverPhrase(d.Approver), At: now,
			Recipients: deciders}); err != nil {
			return err
		}
		// Who may decide changed: that is a change of the run (its version moves, so live
		// pages show it and pages that already do are left alone).
		r.UpdatedAt = now
		if err := s.k.store.touch(ctx, r); err != nil {
			return err
		}
		out = r
		return s.k.store.notify(ctx, r)
	})
	return out, err
}
