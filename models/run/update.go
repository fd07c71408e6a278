package run

import (
	"context"
	"fmt"
	"strings"
	"time"

	"gantry/models/audit"
	"gantry/models/authz"
	"gantry/models/db"
)

// update is the one locked read-modify-write every transition goes through: lock the
// row, read the database clock (after the lock, so a decision that waited behind
// another is judged when it commits), apply fn, save, audit each transition, release
// the apply slot of a finished run, enqueue the jobs the new state needs and notify
// live pages, all in one transaction. orgID "" is the system's lookup by id. When fn
// answers db.CommitThen(err) (a decision that came too late expires the run), the
// changes commit and the caller gets err.
//
// Lock order: rows before the organization's audit chain lock, which the first audit
// event takes and holds to the commit. A transaction that changes several runs (a
// state write, a member's demotion) locks all of them, in id order, before its first
// audit event (lockRuns): one order everywhere, no deadlock.
func (s *core) update(ctx context.Context, orgID, id string, actor *authz.Subject, fn func(ctx context.Context, r *Run, now time.Time) error) (Run, error) {
	var out Run
	err := db.Tx(ctx, s.store.db, func(ctx context.Context) error {
		r, err := s.store.lock(ctx, orgID, id)
		if err != nil {
			return err
		}
		now, err := s.now(ctx)
		if err != nil {
			return err
		}
		before, wasWaiting := r.State, r.Waiting()
		var answer error
		if err := fn(ctx, &r, now); err != nil {
			if !db.MustCommit(err) {
				return err
			}
			answer = err
		}
		// A lease lives only while the run is in its phase's state: leaving it (a
		// finish, a cancel) ends the lease, and its worker's next heartbeat stops.
		if r.State != before {
			if err := s.leases.endLeasesBut(ctx, r.ID, phaseOf(r.State)); err != nil {
				return err
			}
		}
		if r.Finished() && r.FinishedAt == nil {
			r.FinishedAt = &now
		}
		r.UpdatedAt = now
		if err := s.store.save(ctx, r); err != nil {
			return err
		}
		out = r
		if r.State == before && len(r.moves) == 0 {
			return answer
		}
		who := authz.System(r.OrganizationID)
		if actor != nil {
			who = *actor
		}
		for _, m := range r.moves {
			if err := s.audit.RecordAs(ctx, who, transitionEntry(r, m)); err != nil {
				return err
			}
		}
		// Who could decide the run before this change are its approvers, told of an
		// outcome; read them before the rows are rewritten.
		var approvers []string
		if wasWaiting {
			if approvers, err = s.store.deciderIDs(ctx, r.ID); err != nil {
				return err
			}
		}
		if wasWaiting || r.Waiting() {
			if err := s.refreshDeciders(ctx, r, now); err != nil {
				return err
			}
		}
		if err := s.sendNotices(ctx, r, approvers, actor); err != nil {
			return err
		}
		if r.State.Terminal() {
			if err := s.workspaces.ReleaseSlot(ctx, r.WorkspaceID, r.ID); err != nil {
				return err
			}
		}
		if jobs := jobsFor(r); len(jobs) > 0 {
			if err := s.enqueuer.Enqueue(ctx, jobs...); err != nil {
				return fmt.Errorf("enqueuing %s work for run %s: %w", r.State, r.ID, err)
			}
		}
		if err := s.store.notify(ctx, r); err != nil {
			return err
		}
		return answer
	})
	return out, err
}

// transitionEntry is the audit event of one state change, with the evidence in force
// and what the decision bound.
func transitionEntry(r Run, m move) audit.Entry {
	data := map[string]any{"from": m.From, "to": m.To, "reason": m.Reason, "workspace_id": r.WorkspaceID,
		"number": r.Number, "simulated": r.Simulated}
	if r.PlanDigest != "" {
		data["plan_digest"] = r.PlanDigest
	}
	if m.To == Approved {
		data["approved_plan_digest"], data["approval_kind"], data["config_digest"] = r.ApprovedPlanDigest, r.ApprovalKind, r.ConfigDigest
		// What else the approval bound: the policy evaluation and the risk decision (the
		// run row changes later; the hash-chained log keeps this).
		ev := EvidenceOf(r)
		data["policy_evaluation_id"], data["policy_result_digest"], data["policy_bundle_digest"] = ev.PolicyEvaluationID, ev.PolicyResultDigest, ev.PolicyBundleDigest
		data["risk_rule"], data["required_approver"], data["matrix_version"] = r.RiskRule, string(RequirementOf(r).Approver), r.MatrixVersion
		if r.ApprovalExpiresAt != nil {
			data["approval_expires_at"] = r.ApprovalExpiresAt.UTC()
		}
		if r.RiskClass != nil {
			data["risk_class"] = *r.RiskClass
		}
	}
	for k, v := range m.Data {
		data[k] = v
	}
	return audit.Entry{Action: "run." + strings.ToLower(string(m.To)), TargetType: "run", TargetID: r.ID, Data: data,
		EnvironmentID: r.EnvironmentID, WorkspaceID: r.WorkspaceID}
}
