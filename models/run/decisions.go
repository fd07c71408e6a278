package run

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"gantry/models/authz"
	"gantry/models/db"
	"gantry/models/environment"
	"gantry/models/errs"
	"gantry/models/policy"
	"gantry/models/risk"
)

// The decisions people take on a run. Each is authorized first, through Permissions,
// inside the transaction that records it: under the row lock, by the database clock.

// decider is the subject as the entity's methods see it.
func decider(s authz.Subject) Decider { return Decider{UserID: s.UserID, Name: s.Name} }

// permissions is PermissionsOf for subject on run r, now.
func (s *Decisions) permissions(ctx context.Context, subject authz.Subject, r Run, now time.Time) (Permissions, environment.Environment, error) {
	env, err := s.k.environments.Lookup(ctx, r.OrganizationID, r.EnvironmentID)
	if err != nil {
		return Permissions{}, environment.Environment{}, err
	}
	a, err := s.k.actorFor(ctx, subject, env)
	if err != nil {
		return Permissions{}, environment.Environment{}, err
	}
	overrode, err := s.k.overriders(ctx, r)
	if err != nil {
		return Permissions{}, environment.Environment{}, err
	}
	a.Overrode = overrode[subject.UserID]
	return PermissionsOf(r, a, env, now), env, nil
}

// Permissions says what the subject in ctx may do to run r (read through Get) now, by
// the database clock: what pages show as controls.
func (s *Decisions) Permissions(ctx context.Context, r Run) (Permissions, error) {
	subject, err := authz.Require(ctx, authz.PermOrgRead)
	if err != nil {
		return Permissions{}, err
	}
	now, err := s.k.now(ctx)
	if err != nil {
		return Permissions{}, err
	}
	p, _, err := s.permissions(ctx, subject, r, now)
	if err != nil {
		return Permissions{}, err
	}
	// While a break-glass window is open nothing is approved: the page says why.
	if p.Approve.Allowed() || p.Override.Allowed() {
		v, err := s.windowVerdict(ctx, r)
		if err != nil {
			return Permissions{}, err
		}
		if !v.Allowed() {
			p.Approve, p.Override = v, v
		}
	}
	return p, nil
}

// windowVerdict refuses approving (or overriding) a run of a workspace a break-glass
// window is open on (CONFLICT, with the window and its end).
func (s *Decisions) windowVerdict(ctx context.Context, r Run) (Verdict, error) {
	why, err := s.k.windowRefusal(ctx, r)
	if err != nil || why == "" {
		return allowed(), err
	}
	return refused(errs.Explain(errs.ErrConflict, capitalize(why)+". Plan again after it ends.")), nil
}

// Approval is a person's approval as submitted: the evidence the page showed and, for
// a run whose risk asks for an elevated decision, the typed confirmation and reason.
type Approval struct {
	Evidence Evidence
	Confirm  string // must be ConfirmWord when the run's decision is elevated
	Reason   string // MinReasonLength+ characters when elevated
}

// decision runs one decision on run id: under the row lock and the database clock it
// asks Permissions for act (a late decision expires the run and answers
// APPROVAL_EXPIRED; anything else refused records nothing), checks the evidence is
// complete, then lets apply record it.
func (s *Decisions) decision(ctx context.Context, id string, act Action, ev *Evidence,
	apply func(ctx context.Context, r *Run, subject authz.Subject, now time.Time) error) (Run, error) {
	subject, err := authz.Require(ctx, authz.PermOrgRead)
	if err != nil {
		return Run{}, err
	}
	if ev != nil {
		if err := ev.complete(); err != nil {
			return Run{}, err
		}
	}
	var waited time.Duration
	outcome := string(act)
	r, err := s.k.update(ctx, subject.OrganizationID, id, &subject, func(ctx context.Context, r *Run, now time.Time) error {
		if r.WaitingSince != nil {
			waited = now.Sub(*r.WaitingSince)
		}
		p, _, err := s.permissions(ctx, subject, *r, now)
		if err != nil {
			return err
		}
		v := map[Action]Verdict{ActionApprove: p.Approve, ActionReject: p.Reject, ActionOverride: p.Override,
			ActionCancel: p.Cancel, ActionRecover: p.Recover}[act]
		if v.Allowed() && (act == ActionApprove || act == ActionOverride) {
			if v, err = s.windowVerdict(ctx, *r); err != nil {
				return err
			}
		}
		if !v.Allowed() {
			if v.Code() == errs.CodeApprovalExpired && r.Waiting() {
				// Judged at commit: the deadline passed before this decision could be
				// recorded, so the run ends EXPIRED with that reason and nothing else is.
				if err := r.end(Expired, EndApprovalExpired, fmt.Sprintf("no decision within the decision window: a decision (%s by %s) arrived at %s, after the deadline %s",
					act, subject.Name, now.Format(time.RFC3339Nano), r.DecisionDeadline.UTC().Format(time.RFC3339Nano))); err != nil {
					return err
				}
				outcome = "expired_late"
				return db.CommitThen(v.Err())
			}
			return v.Err()
		}
		return apply(ctx, r, subject, now)
	})
	if err == nil || outcome == "expired_late" {
		s.k.observer.Decided(outcome, waited)
	}
	return r, err
}

// complete refuses evidence with a field missing (422): a decision on half the
// evidence is no decision.
func (ev Evidence) complete() error {
	if ev.RunID == "" || ev.PlanRevision <= 0 || ev.PlanDigest == "" || ev.ConfigDigest == "" || ev.Predecessor.VersionID == "" {
		v := &errs.Validation{}
		v.Add("evidence", "This decision is missing part of the evidence it binds to. Reload the review page and decide again.")
		return v
	}
	return nil
}

// Approve approves run id's current evidence, valid for ApprovalValidity by the
// database clock. Evidence other than the run now carries is 409 STALE_EVIDENCE; a
// decision after the deadline 409 APPROVAL_EXPIRED.
func (s *Decisions) Approve(ctx context.Context, id string, in Approval) (Run, error) {
	return s.decision(ctx, id, ActionApprove, &in.Evidence, func(ctx context.Context, r *Run, subject authz.Subject, now time.Time) error {
		elevated := RequirementOf(*r).Elevated
		if elevated {
			if err := checkElevation(in.Confirm, in.Reason); err != nil {
				return err
			}
		}
		if err := r.Approve(decider(subject), in.Evidence, now); err != nil {
			return err
		}
		if err := s.k.recordBoundaryShown(ctx, r); err != nil {
			return err
		}
		if elevated {
			reason := strings.TrimSpace(in.Reason)
			r.StateReason += ": " + reason
			r.moves.Last().Reason = r.StateReason
			r.moves.Annotate(map[string]any{"elevated": true, "confirmation": ConfirmWord, "approval_reason": reason,
				"authenticated_at": subject.AuthenticatedAt.UTC()})
		}
		return nil
	})
}

// Reject rejects run id (waiting for an approval or an override) with a reason, bound
// to the same evidence as an approval.
func (s *Decisions) Reject(ctx context.Context, id string, ev Evidence, reason string) (Run, error) {
	if err := checkReason(reason, 1, "Say why you reject this plan."); err != nil {
		return Run{}, err
	}
	return s.decision(ctx, id, ActionReject, &ev, func(ctx context.Context, r *Run, subject authz.Subject, now time.Time) error {
		if err := r.Reject(decider(subject), ev, reason, now); err != nil {
			return err
		}
		return s.k.recordBoundaryShown(ctx, r)
	})
}

// Cancel stops run id where the state machine allows it: before it applies, the
// requester her own run and admins and owners any run, with an optional reason; while it
// applies, who could approve it or an admin, confirmed and with a reason: the run ends
// APPLY_INTERRUPTED at once and its worker stops OpenTofu (stop.go).
func (s *Decisions) Cancel(ctx context.Context, id string, c Cancellation) (Run, error) {
	return s.decision(ctx, id, ActionCancel, nil, func(ctx context.Context, r *Run, subject authz.Subject, now time.Time) error {
		if err := c.check(*r); err != nil {
			return err
		}
		applying := r.State == Running
		if err := r.Cancel(decider(subject), c.Reason, now); err != nil {
			return err
		}
		if !applying {
			return nil
		}
		return s.stopApply(ctx, *r, r.StateReason)
	})
}

// Recover closes an interrupted apply (APPLY_INTERRUPTED -> FAILED) once an admin has
// checked the workspace, which releases its apply slot.
func (s *Decisions) Recover(ctx context.Context, id, reason string) (Run, error) {
	if err := checkReason(reason, 1, "Say what you checked before closing the interrupted apply."); err != nil {
		return Run{}, err
	}
	return s.decision(ctx, id, ActionRecover, nil, func(ctx context.Context, r *Run, subject authz.Subject, _ time.Time) error {
		return r.Recover(decider(subject), reason)
	})
}

// Override overrides one soft-mandatory failure of run id's policy evaluation, bound to
// the evaluation's result digest and the rule's version, until the run's decision
// deadline; a hard-mandatory failure is never overridden. It needs what approving
// needs and policies.manage. When no soft failure is left the run waits for a person's
// approval, within the decision window it already had.
func (s *Decisions) Override(ctx context.Context, id string, ev Evidence, ruleID, ruleVersion, reason string) (Run, error) {
	if err := checkReason(reason, MinReasonLength, fmt.Sprintf("Say why this failure may be overridden, in at least %d characters.", MinReasonLength)); err != nil {
		return Run{}, err
	}
	reason = strings.TrimSpace(reason)
	return s.decision(ctx, id, ActionOverride, &ev, func(ctx context.Context, r *Run, subject authz.Subject, now time.Time) error {
		if err := ev.check(*r); err != nil {
			return err
		}
		evaluation, overrides, err := s.k.policies.EvaluationWithOverrides(ctx, r.OrganizationID, *r.PolicyEvaluationID)
		if err != nil {
			return err
		}
		found, err := overridable(evaluation.Results, overrides, ruleID, ruleVersion)
		if err != nil {
			return err
		}
		if r.DecisionDeadline == nil {
			return fmt.Errorf("run %s has no decision deadline to bound the override: %w", r.ID, errs.ErrConflict)
		}
		o := policy.Override{OrganizationID: r.OrganizationID, RunID: r.ID, EvaluationID: evaluation.ID, RuleID: ruleID,
			RuleVersion: found.RuleVersion, ResultDigest: evaluation.ResultDigest, Reason: reason, OverriddenBy: subject.UserID,
			OverriddenByName: subject.Name, ExpiresAt: *r.DecisionDeadline, EnvironmentID: r.EnvironmentID, WorkspaceID: r.WorkspaceID}
		if err := s.k.policies.AddOverride(ctx, o, evaluation.BundleDigest, ev.auditData()); err != nil {
			return err
		}
		overrides[ruleID] = o
		for _, res := range evaluation.Results {
			if _, err := overridable(evaluation.Results, overrides, res.RuleID, res.RuleVersion); err == nil {
				return nil // more failures wait for their own override
			}
		}
		// An overridden policy always deserves a person's decision.
		if !risk.Approver(r.RequiredApprover).Person() {
			r.RequiredApprover, r.FourEyes = string(risk.ApproverOperator), true
		}
		return r.ReleasePolicyBlock("soft-mandatory failures overridden by " + subject.Name + "; " + r.RiskReason)
	})
}

// PlanAgain starts a new run of run id's intent (same workspace, kind, template version
// and inputs: the same config bundle) after it went STALE, EXPIRED or was REJECTED. It
// needs what requesting needs.
func (s *Decisions) PlanAgain(ctx context.Context, id string) (Run, error) {
	subject, err := authz.Require(ctx, authz.PermOrgRead)
	if err != nil {
		return Run{}, err
	}
	var out Run
	err = s.k.inTx(ctx, func(ctx context.Context) error {
		old, err := s.k.store.get(ctx, subject.OrganizationID, id)
		if err != nil {
			return err
		}
		now, err := s.k.now(ctx)
		if err != nil {
			return err
		}
		p, _, err := s.permissions(ctx, subject, old, now)
		if err != nil {
			return err
		}
		if !p.PlanAgain.Allowed() {
			return p.PlanAgain.Err()
		}
		// Planning again is the same intent, so it needs the same template version from
		// the catalog and the executor its bundle was generated for.
		if facts, err := s.k.catalog.Facts(old.TemplateName); err != nil || facts.Version != old.TemplateVersion {
			return errs.Explain(errs.ErrConflict, fmt.Sprintf("The catalog no longer offers %s %s, which run %s used: request the change again from the catalog.",
				old.TemplateName, old.TemplateVersion, old.Label()))
		}
		env, err := s.k.environments.Lookup(ctx, old.OrganizationID, old.EnvironmentID)
		if err != nil {
			return err
		}
		if chosen, offered := s.k.runners.pick(env.Executor); !offered || chosen.Name != old.Runner {
			return errs.Explain(errs.ErrConflict, fmt.Sprintf("Environment %s no longer runs jobs on the %s executor run %s was planned for: request the change again.",
				env.Name, old.Runner, old.Label()))
		}
		out, err = s.k.queue(ctx, subject, queued{workspaceID: old.WorkspaceID, environmentID: old.EnvironmentID, kind: old.Kind,
			template: old.TemplateName, version: old.TemplateVersion, moduleDigest: old.ModuleDigest, inputs: old.Inputs,
			runner: RunnerInfo{Name: old.Runner, Simulated: old.Simulated}, configArtifactID: old.ConfigArtifactID,
			configDigest: old.ConfigDigest, source: &old})
		return err
	})
	return out, err
}

// VoidApprovalsOf sends the runs userID approved that have not started applying back to
// wait for a decision (a run whose deadline has passed expires instead). The members
// service calls it, in its own transaction and before its own audit event (the runs are
// locked before the audit chain, as everywhere), when it demotes or removes userID or
// takes cloud.live away; it has authorized its subject.
func (s *Eligibility) VoidApprovalsOf(ctx context.Context, orgID, userID, reason string) error {
	return s.k.inTx(ctx, func(ctx context.Context) error {
		ids, err := s.k.store.approvedBy(ctx, orgID, userID)
		if err != nil {
			return err
		}
		return s.voidAll(ctx, orgID, userID, reason, ids)
	})
}

// voidAll voids userID's approvals of runs ids: all of them locked first (see update's
// lock order), then each voided with its own audit event.
func (s *Eligibility) voidAll(ctx context.Context, orgID, userID, reason string, ids []string) error {
	if err := s.k.store.lockRuns(ctx, ids); err != nil {
		return err
	}
	for _, id := range ids {
		_, err := s.k.update(ctx, orgID, id, nil, func(ctx context.Context, r *Run, now time.Time) error {
			if r.State != Approved || r.ApprovedBy == nil || *r.ApprovedBy != userID {
				return ErrSkip
			}
			if r.DecisionDeadline != nil && !now.Before(*r.DecisionDeadline) {
				return r.end(Expired, EndApprovalVoided, "the approval was void ("+reason+") and the decision window had closed")
			}
			return r.VoidApproval("the approval by " + r.ApprovedByName + " is void: " + reason + "; the run waits for a decision again")
		})
		if err != nil && !errors.Is(err, ErrSkip) {
			return err
		}
	}
	return nil
}

// IsConflict reports whether err means "the run moved on": an invalid transition or
// stale evidence, both a 409 for a person.
func IsConflict(err error) bool {
	return errors.Is(err, ErrInvalidTransition) || errors.Is(err, ErrStaleEvidence)
}
