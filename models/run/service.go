package run

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"gorm.io/gorm"
	"gorm.io/gorm/clause"

	"gantry/models/artifact"
	"gantry/models/audit"
	"gantry/models/authz"
	"gantry/models/db"
	"gantry/models/errs"
	"gantry/models/policy"
	"gantry/models/risk"
	"gantry/policies"
)

// Timing of the gates (DESIGN §3). DefaultDecisionWindow is the decision window of an
// environment that sets none (the environments.decision_window_hours default, 168 hours);
// each environment sets its own, 1 to 720 hours, and a run waiting for a decision gets
// its deadline from its environment's window.
const (
	DefaultDecisionWindow = 7 * 24 * time.Hour
	ApprovalValidity      = 15 * time.Minute
)

// RunnerInfo names an executor this deployment offers and whether it only simulates.
type RunnerInfo struct {
	Name      string
	Simulated bool
}

// Runners are the executors on offer: the deployment's default and every runner an
// environment may name.
type Runners struct {
	Default   string
	Available []RunnerInfo
}

// pick resolves an environment's executor setting to an available runner.
func (rs Runners) pick(executor string) (RunnerInfo, bool) {
	if executor == "" || executor == "default" {
		executor = rs.Default
	}
	for _, r := range rs.Available {
		if r.Name == executor {
			return r, true
		}
	}
	return RunnerInfo{}, false
}

// Service moves runs through the gate sequence. Person-facing methods check the
// subject's permission and scope everything to its organization; worker-facing methods
// (Begin*/Finish*) act as the system on the run they are given.
type Service struct {
	db        *gorm.DB
	audit     *audit.Log
	artifacts *artifact.Store
	enqueuer  Enqueuer
	catalog   Catalog
	runners   Runners
	// StateAddress builds the http backend address of a workspace for generated config.
	stateAddress func(runner, workspaceID string) string
	fencer       Fencer
	matrix       MatrixSource
	policies     *policy.Store
}

// Fencer releases a dead job's state lock and revokes its credentials (the state
// backend implements it).
type Fencer interface {
	FenceAndRelease(ctx context.Context, workspaceID, runID, reason string) error
	HoldsLock(ctx context.Context, workspaceID, runID string) (bool, error)
}

// Config wires a Service.
type Config struct {
	DB        *gorm.DB
	Audit     *audit.Log
	Artifacts *artifact.Store
	Enqueuer  Enqueuer
	Catalog   Catalog
	Runners   Runners
	// StateAddress is the http backend address a runner's jobs reach for a workspace
	// (jobs in containers reach it through a forwarded socket at a fixed address).
	StateAddress func(runner, workspaceID string) string
	Fencer       Fencer
	// Matrix gives each organization's approval matrix (default: the risk store).
	Matrix MatrixSource
	// Policies gives policy bundles and modes and keeps evaluations (default: the
	// policy store).
	Policies *policy.Store
}

// NewService returns the run service.
func NewService(c Config) *Service {
	s := &Service{db: c.DB, audit: c.Audit, artifacts: c.Artifacts, enqueuer: c.Enqueuer, catalog: c.Catalog,
		runners: c.Runners, stateAddress: c.StateAddress, fencer: c.Fencer, matrix: c.Matrix, policies: c.Policies}
	if s.matrix == nil {
		s.matrix = risk.NewStore(c.DB, c.Audit)
	}
	if s.policies == nil {
		s.policies = policy.NewStore(c.DB, c.Audit)
	}
	return s
}

// now is the database clock: every deadline is judged by it, not by a portal's clock.
func (s *Service) now(ctx context.Context) (time.Time, error) {
	var t time.Time
	if err := db.Conn(ctx, s.db).Raw("SELECT now()").Scan(&t).Error; err != nil {
		return time.Time{}, fmt.Errorf("reading database clock: %w", err)
	}
	return t.UTC(), nil
}

// update is the one locked read-modify-write every transition goes through: lock the
// row, apply fn, save, audit the transition, enqueue the jobs the new state needs and
// notify live pages, all in one transaction. orgID "" is the system's lookup by id.
func (s *Service) update(ctx context.Context, orgID, id string, actor *authz.Subject, fn func(ctx context.Context, r *Run, now time.Time) error) (Run, error) {
	var out Run
	err := db.Tx(ctx, s.db, func(ctx context.Context) error {
		conn := db.Conn(ctx, s.db)
		q := conn.Clauses(clause.Locking{Strength: "UPDATE"}).Where("id = ?", id)
		if orgID != "" {
			q = q.Where("organization_id = ?", orgID)
		}
		var r Run
		if err := q.Take(&r).Error; err != nil {
			return fmt.Errorf("reading run %s: %w", id, db.Translate(err))
		}
		now, err := s.now(ctx)
		if err != nil {
			return err
		}
		before := r.State
		if err := fn(ctx, &r, now); err != nil {
			return err
		}
		if r.Finished() && r.FinishedAt == nil {
			r.FinishedAt = &now
		}
		r.UpdatedAt = now
		if err := conn.Model(&Run{}).Where("id = ?", r.ID).Select("*").Omit("id", "created_at").Updates(&r).Error; err != nil {
			return fmt.Errorf("saving run %s: %w", r.ID, err)
		}
		if r.State == before && len(r.moves) == 0 {
			out = r
			return nil
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
		if err := s.releaseSlotIfDone(ctx, r); err != nil {
			return err
		}
		if jobs := jobsFor(r); len(jobs) > 0 {
			if err := s.enqueuer.Enqueue(ctx, jobs...); err != nil {
				return fmt.Errorf("enqueuing %s work for run %s: %w", r.State, r.ID, err)
			}
		}
		if err := notifyChange(ctx, conn, r); err != nil {
			return err
		}
		out = r
		return nil
	})
	return out, err
}

// transitionEntry is the audit event of one state change, with the evidence in force.
func transitionEntry(r Run, m move) audit.Entry {
	data := map[string]any{"from": m.from, "to": m.to, "reason": m.reason, "workspace_id": r.WorkspaceID,
		"number": r.Number, "simulated": r.Simulated}
	if r.PlanDigest != "" {
		data["plan_digest"] = r.PlanDigest
	}
	if m.to == Approved {
		data["approved_plan_digest"], data["approval_kind"], data["config_digest"] = r.ApprovedPlanDigest, r.ApprovalKind, r.ConfigDigest
		// What else the approval bound: the policy evaluation and the risk decision (the
		// run row changes later; the hash-chained log keeps this).
		ev := EvidenceOf(r)
		data["policy_evaluation_id"], data["policy_result_digest"], data["policy_bundle_digest"] = ev.PolicyEvaluationID, ev.PolicyResultDigest, ev.PolicyBundleDigest
		data["risk_rule"], data["required_approver"], data["matrix_version"] = r.RiskRule, r.RequiredApprover, r.MatrixVersion
		if r.RiskClass != nil {
			data["risk_class"] = *r.RiskClass
		}
	}
	return audit.Entry{Action: "run." + strings.ToLower(string(m.to)), TargetType: "run", TargetID: r.ID, Data: data}
}

// notifyChange tells live run pages (over LISTEN/NOTIFY, delivered at commit).
func notifyChange(ctx context.Context, conn *gorm.DB, r Run) error {
	payload, _ := json.Marshal(map[string]string{"run": r.ID, "workspace": r.WorkspaceID, "org": r.OrganizationID, "state": string(r.State)})
	if err := conn.Exec("SELECT pg_notify(?, ?)", ChangesChannel, string(payload)).Error; err != nil {
		return fmt.Errorf("notifying run change: %w", err)
	}
	return nil
}

// ChangesChannel is the LISTEN/NOTIFY channel of run changes.
const ChangesChannel = "gantry_run_changes"

// releaseSlotIfDone frees the workspace's apply slot when its run is finished. An
// interrupted apply keeps the slot fenced until an admin recovers the run.
func (s *Service) releaseSlotIfDone(ctx context.Context, r Run) error {
	if !r.State.Terminal() {
		return nil
	}
	err := db.Conn(ctx, s.db).Exec("UPDATE workspaces SET active_run_id = NULL, updated_at = now() WHERE id = ? AND active_run_id = ?", r.WorkspaceID, r.ID).Error
	if err != nil {
		return fmt.Errorf("releasing apply slot: %w", err)
	}
	return nil
}

// Get returns run id of the subject's organization.
func (s *Service) Get(ctx context.Context, id string) (Run, error) {
	subject, err := authz.Require(ctx, authz.PermOrgRead)
	if err != nil {
		return Run{}, err
	}
	var r Run
	if err := db.Conn(ctx, s.db).Where("organization_id = ? AND id = ?", subject.OrganizationID, id).Take(&r).Error; err != nil {
		return Run{}, fmt.Errorf("reading run %s: %w", id, db.Translate(err))
	}
	return r, nil
}

// ListForWorkspace returns the runs of a workspace, newest first.
func (s *Service) ListForWorkspace(ctx context.Context, workspaceID string, limit int) ([]Run, error) {
	subject, err := authz.Require(ctx, authz.PermOrgRead)
	if err != nil {
		return nil, err
	}
	if limit <= 0 || limit > 200 {
		limit = 50
	}
	var runs []Run
	err = db.Conn(ctx, s.db).Where("organization_id = ? AND workspace_id = ?", subject.OrganizationID, workspaceID).
		Order("number DESC").Limit(limit).Find(&runs).Error
	if err != nil {
		return nil, fmt.Errorf("listing runs: %w", err)
	}
	return runs, nil
}

// ListRecent returns the newest runs of the subject's organization.
func (s *Service) ListRecent(ctx context.Context, limit int) ([]Run, error) {
	subject, err := authz.Require(ctx, authz.PermOrgRead)
	if err != nil {
		return nil, err
	}
	if limit <= 0 || limit > 200 {
		limit = 20
	}
	var runs []Run
	err = db.Conn(ctx, s.db).Where("organization_id = ?", subject.OrganizationID).Order("created_at DESC").Limit(limit).Find(&runs).Error
	if err != nil {
		return nil, fmt.Errorf("listing runs: %w", err)
	}
	return runs, nil
}

// ListPending returns the runs waiting for a decision in the subject's organization.
func (s *Service) ListPending(ctx context.Context) ([]Run, error) {
	subject, err := authz.Require(ctx, authz.PermOrgRead)
	if err != nil {
		return nil, err
	}
	var runs []Run
	err = db.Conn(ctx, s.db).Where("organization_id = ? AND state = ?", subject.OrganizationID, PendingApproval).Order("created_at").Find(&runs).Error
	if err != nil {
		return nil, fmt.Errorf("listing pending runs: %w", err)
	}
	return runs, nil
}

// History returns the audit events of run r (read through Get), oldest first: the
// gate timeline's evidence.
func (s *Service) History(ctx context.Context, r Run) ([]audit.Event, error) {
	subject, err := authz.Require(ctx, authz.PermOrgRead)
	if err != nil {
		return nil, err
	}
	if r.OrganizationID != subject.OrganizationID {
		return nil, errs.ErrNotFound
	}
	var events []audit.Event
	err = db.Conn(ctx, s.db).Where("organization_id = ? AND target_type = 'run' AND target_id = ?", r.OrganizationID, r.ID).
		Order("seq").Find(&events).Error
	if err != nil {
		return nil, fmt.Errorf("reading run history: %w", err)
	}
	return events, nil
}

// Artifact returns a decrypted artifact of a run in the subject's organization.
func (s *Service) Artifact(ctx context.Context, r Run, id *string) ([]byte, error) {
	subject, err := authz.Require(ctx, authz.PermOrgRead)
	if err != nil {
		return nil, err
	}
	if id == nil || r.OrganizationID != subject.OrganizationID {
		return nil, errs.ErrNotFound
	}
	data, _, err := s.artifacts.Get(ctx, subject.OrganizationID, *id)
	return data, err
}

// decider is the subject as the entity's methods see it.
func decider(s authz.Subject) Decider { return Decider{UserID: s.UserID, Name: s.Name} }

// Approval is a person's approval as submitted: the evidence the page showed and, for
// a run whose risk asks for an elevated decision, the typed confirmation and reason.
type Approval struct {
	Evidence Evidence
	Confirm  string // must be "DESTROY" when the run's decision is elevated
	Reason   string // 10+ characters when elevated
}

// ElevationWindow is how recent a sign-in must be for an elevated decision.
const ElevationWindow = 15 * time.Minute

// Approve approves run id's current evidence: a decision on other evidence than the
// run now carries is ErrStaleEvidence (409). The approval is valid for
// ApprovalValidity by the database clock.
func (s *Service) Approve(ctx context.Context, id string, in Approval) (Run, error) {
	subject, err := authz.Require(ctx, authz.PermProvisioningApply)
	if err != nil {
		return Run{}, err
	}
	return s.update(ctx, subject.OrganizationID, id, &subject, func(ctx context.Context, r *Run, now time.Time) error {
		// Four eyes: the requester may not approve their own run.
		if r.RequestedBy == subject.UserID && (r.FourEyes || r.RequiredApprover == "") {
			return fmt.Errorf("the requester of run %s may not approve it: %w", r.ID, errs.ErrForbidden)
		}
		if err := s.mayDecide(ctx, *r, subject); err != nil {
			return err
		}
		if r.Elevated {
			if err := elevated(subject, in, now); err != nil {
				return err
			}
		}
		if err := r.Approve(decider(subject), in.Evidence); err != nil {
			return err
		}
		if r.Elevated {
			r.StateReason += ": " + strings.TrimSpace(in.Reason)
			r.moves[len(r.moves)-1].reason = r.StateReason
		}
		expires := now.Add(ApprovalValidity)
		r.ApprovedAt, r.ApprovalExpiresAt = &now, &expires
		return nil
	})
}

// elevated checks what a risk-3 decision asks of the person (DESIGN §3): a fresh
// sign-in, the word DESTROY typed, and a reason of at least 10 characters.
func elevated(subject authz.Subject, in Approval, now time.Time) error {
	v := &errs.Validation{}
	if in.Confirm != "DESTROY" {
		v.Add("confirm", "Type DESTROY to approve a change that destroys or loses data.")
	}
	if len([]rune(strings.TrimSpace(in.Reason))) < 10 {
		v.Add("reason", "Say why, in at least 10 characters.")
	}
	if err := v.Err(); err != nil {
		return err
	}
	if subject.AuthenticatedAt.IsZero() || now.Sub(subject.AuthenticatedAt) > ElevationWindow {
		return errs.Explain(errs.ErrForbidden, fmt.Sprintf("This decision destroys or loses data: it needs a sign-in within the last %d minutes. "+
			"Use “Sign in again to decide” on the review page.", int(ElevationWindow.Minutes())))
	}
	return nil
}

// mayDecide checks that subject may approve r: the role the run's risk needs and, in a
// restricted environment, a grant.
func (s *Service) mayDecide(ctx context.Context, r Run, subject authz.Subject) error {
	env, err := s.environmentOf(ctx, r)
	if err != nil {
		return err
	}
	if need := requiredApprover(r); !subject.Role.AtLeast(need) {
		return fmt.Errorf("run %s needs an approver with the %s role: %w", r.ID, need, errs.ErrForbidden)
	}
	if env.Restricted && !subject.Role.AtLeast(authz.RoleAdmin) {
		granted, err := s.hasGrant(ctx, r.EnvironmentID, subject.UserID)
		if err != nil {
			return err
		}
		if !granted {
			return fmt.Errorf("environment %s is restricted and %s has no grant: %w", env.Name, subject.Name, errs.ErrForbidden)
		}
	}
	return nil
}

// Override overrides one soft-mandatory failure of run id's policy evaluation (admins),
// bound to the evaluation's result digest and the rule's version; a hard-mandatory
// failure is never overridden. When no soft failure is left the run waits for a
// person's approval.
func (s *Service) Override(ctx context.Context, id string, ev Evidence, ruleID, ruleVersion, reason string) (Run, error) {
	subject, err := authz.Require(ctx, authz.PermPoliciesManage)
	if err != nil {
		return Run{}, err
	}
	reason = strings.TrimSpace(reason)
	if len([]rune(reason)) < 10 {
		v := &errs.Validation{}
		v.Add("reason", "Say why this failure may be overridden, in at least 10 characters.")
		return Run{}, v
	}
	return s.update(ctx, subject.OrganizationID, id, &subject, func(ctx context.Context, r *Run, now time.Time) error {
		if r.State != PolicyBlocked {
			return &TransitionError{From: r.State, To: PendingApproval}
		}
		if r.Finished() {
			return errs.Explain(errs.ErrForbidden, "This run is blocked by a hard-mandatory policy, which is never overridden. Change the request instead.")
		}
		if err := r.checkEvidence(ev); err != nil {
			return err
		}
		evaluation, overrides, err := s.policies.EvaluationWithOverrides(ctx, r.OrganizationID, *r.PolicyEvaluationID)
		if err != nil {
			return err
		}
		var found *policies.Result
		for i := range evaluation.Results {
			if evaluation.Results[i].RuleID == ruleID {
				found = &evaluation.Results[i]
			}
		}
		switch {
		case found == nil || found.Passed:
			return fmt.Errorf("rule %s did not fail in this evaluation: %w", ruleID, errs.ErrNotFound)
		case found.Enforcement == policies.HardMandatory:
			return errs.Explain(errs.ErrForbidden, "Rule "+ruleID+" is hard-mandatory: its failure is never overridden. Change the request instead.")
		case found.Enforcement != policies.SoftMandatory:
			return fmt.Errorf("rule %s is advisory: nothing to override: %w", ruleID, errs.ErrConflict)
		case found.RuleVersion != ruleVersion:
			return fmt.Errorf("the override names version %s of rule %s, the evaluation used %s: %w", ruleVersion, ruleID, found.RuleVersion, ErrStaleEvidence)
		}
		if _, done := overrides[ruleID]; done {
			return fmt.Errorf("rule %s is already overridden: %w", ruleID, errs.ErrConflict)
		}
		o := policy.Override{OrganizationID: r.OrganizationID, RunID: r.ID, EvaluationID: evaluation.ID, RuleID: ruleID,
			RuleVersion: found.RuleVersion, ResultDigest: evaluation.ResultDigest, Reason: reason, OverriddenBy: subject.UserID, OverriddenByName: subject.Name}
		if err := s.policies.AddOverride(ctx, o, evaluation.BundleDigest); err != nil {
			return err
		}
		overrides[ruleID] = o
		for _, res := range evaluation.Results {
			if !res.Passed && res.Enforcement == policies.HardMandatory {
				return nil // never released; the page says why
			}
			if _, ok := overrides[res.RuleID]; !ok && !res.Passed && res.Enforcement == policies.SoftMandatory {
				return nil // more failures wait for their own override
			}
		}
		// An overridden policy always deserves a person's decision.
		if r.RequiredApprover == "system" || r.RequiredApprover == "none" {
			r.RequiredApprover, r.FourEyes = string(authz.RoleOperator), true
		}
		if err := s.setDecisionDeadline(ctx, r, now); err != nil {
			return err
		}
		return r.ReleasePolicyBlock("soft-mandatory failures overridden by " + subject.Name + "; " + r.RiskReason)
	})
}

// hasGrant reports whether user userID holds an explicit grant for environment envID
// (what a restricted environment asks of anyone below admin: requesters, approvers,
// and both again before an apply).
func (s *Service) hasGrant(ctx context.Context, envID, userID string) (bool, error) {
	var n int64
	if err := db.Conn(ctx, s.db).Table("environment_grants").Where("environment_id = ? AND user_id = ?", envID, userID).Count(&n).Error; err != nil {
		return false, fmt.Errorf("checking grants: %w", err)
	}
	return n > 0, nil
}

// Reject rejects run id with a reason.
func (s *Service) Reject(ctx context.Context, id string, ev Evidence, reason string) (Run, error) {
	subject, err := authz.Require(ctx, authz.PermProvisioningApply)
	if err != nil {
		return Run{}, err
	}
	return s.update(ctx, subject.OrganizationID, id, &subject, func(ctx context.Context, r *Run, now time.Time) error {
		if err := r.Reject(decider(subject), ev, reason); err != nil {
			return err
		}
		r.RejectedAt = &now
		return nil
	})
}

// Cancel stops run id wherever the state machine allows it. Operators may cancel runs
// they requested; admins and owners any run.
func (s *Service) Cancel(ctx context.Context, id, reason string) (Run, error) {
	subject, err := authz.Require(ctx, authz.PermProvisioningPlan)
	if err != nil {
		return Run{}, err
	}
	return s.update(ctx, subject.OrganizationID, id, &subject, func(ctx context.Context, r *Run, _ time.Time) error {
		if r.RequestedBy != subject.UserID && !subject.Role.AtLeast(authz.RoleAdmin) {
			return fmt.Errorf("only the requester or an admin may cancel run %s: %w", r.ID, errs.ErrForbidden)
		}
		return r.Cancel(decider(subject), reason)
	})
}

// Recover closes an interrupted apply (APPLY_INTERRUPTED -> FAILED) once an admin has
// checked the workspace, which releases its apply slot. It needs an admin or owner and
// a reason.
func (s *Service) Recover(ctx context.Context, id, reason string) (Run, error) {
	subject, err := authz.Require(ctx, authz.PermEnvironmentsManage)
	if err != nil {
		return Run{}, err
	}
	return s.update(ctx, subject.OrganizationID, id, &subject, func(ctx context.Context, r *Run, _ time.Time) error {
		return r.Recover(decider(subject), reason)
	})
}

// IsConflict reports whether err means "the run moved on": an invalid transition or
// stale evidence, both a 409 for a person.
func IsConflict(err error) bool {
	return errors.Is(err, ErrInvalidTransition) || errors.Is(err, ErrStaleEvidence)
}
