// Package run holds runs: one intent (apply, dry run or destroy) against one workspace,
// moved through the gate sequence by pure transition methods on the entity and
// persisted by one locked read-modify-write that also writes the audit event and
// enqueues the next job.
package run

import (
	"encoding/json"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"gantry/models/review"
)

// Kind is what a run intends.
type Kind string

const (
	KindApply    Kind = "apply"
	KindPlanOnly Kind = "plan_only"
	KindDestroy  Kind = "destroy"
)

// Valid reports whether k is a known kind.
func (k Kind) Valid() bool { return k == KindApply || k == KindPlanOnly || k == KindDestroy }

// Summary counts a plan's resource changes by action.
type Summary struct {
	Create  int `json:"create"`
	Update  int `json:"update"`
	Replace int `json:"replace"`
	Delete  int `json:"delete"`
	NoOp    int `json:"no_op"`
	Read    int `json:"read"`
}

// Changes is the number of changes that do something.
func (s Summary) Changes() int { return s.Create + s.Update + s.Replace + s.Delete }

// Run is one row of runs.
type Run struct {
	ID             string
	OrganizationID string
	WorkspaceID    string
	EnvironmentID  string
	Number         int
	Kind           Kind
	State          State
	StateReason    string

	TemplateName    string
	TemplateVersion string
	ModuleDigest    string
	Inputs          json.RawMessage `gorm:"type:jsonb"` // sensitive values masked

	RequestedBy     string
	RequestedByName string

	Runner    string
	Simulated bool

	ConfigArtifactID string
	ConfigDigest     string

	PriorStateVersionID *string
	PriorSerial         int
	PriorLineage        string

	PlanRevision       int
	PlanArtifactID     *string
	PlanDigest         string
	PlanJSONArtifactID *string
	PlanLogArtifactID  *string
	PlanSummary        Summary `gorm:"serializer:json;type:jsonb"`

	// The plan gates' findings (DESIGN §3, §7): the risk class, the matrix rule that
	// set it and the decision it requires, the policy evaluation the decision binds to,
	// and the cost estimate.
	RiskClass          *int
	RiskLevel          string
	RiskRule           string
	RiskReason         string
	RequiredApprover   string // "none", "system", or the least role that may approve
	FourEyes           bool
	Elevated           bool
	MatrixVersion      int
	PolicyEvaluationID *string
	PolicyOutcome      string
	PolicyBundleDigest string
	PolicyResultDigest string
	Cost               *review.Cost `gorm:"serializer:json;type:jsonb"`

	DecisionDeadline *time.Time

	ApprovedBy         *string
	ApprovedByName     string
	ApprovedAt         *time.Time
	ApprovedPlanDigest string
	ApprovalKind       string // "person" | "self-service"
	ApprovalExpiresAt  *time.Time

	RejectedBy     *string
	RejectedByName string
	RejectedAt     *time.Time

	ApplyLogArtifactID  *string
	NewStateVersionID   *string
	Outputs             json.RawMessage `gorm:"type:jsonb"`
	VerifyLogArtifactID *string

	CreatedAt  time.Time
	UpdatedAt  time.Time
	FinishedAt *time.Time

	// moves are the transitions made since the run was read, in order; the service
	// audits each one (gorm ignores unexported fields).
	moves []move
}

type move struct {
	from, to State
	reason   string
}

// LogValue keeps run logs to ids and state; inputs may be sensitive.
func (r Run) LogValue() slog.Value {
	return slog.GroupValue(slog.String("run", r.ID), slog.String("workspace", r.WorkspaceID), slog.String("state", string(r.State)))
}

// Label is the run's human name within its workspace, e.g. "#3".
func (r Run) Label() string { return fmt.Sprintf("#%d", r.Number) }

// transition moves the run to state to, recording why, if the table allows it.
func (r *Run) transition(to State, reason string) error {
	// A hard policy block is final although POLICY_BLOCKED itself is not terminal.
	if !CanTransition(r.State, to) || r.Finished() {
		return &TransitionError{From: r.State, To: to}
	}
	r.moves = append(r.moves, move{from: r.State, to: to, reason: reason})
	r.State, r.StateReason = to, reason
	return nil
}

// Decider is the person (or the system) deciding on a run.
type Decider struct {
	UserID string
	Name   string
}

// Evidence is what a decision is taken on (DESIGN §3): the plan and the policy
// evaluation the page showed. The database compares it with the run's current evidence
// in the transaction that records the decision.
type Evidence struct {
	PlanDigest         string
	PolicyEvaluationID string
	PolicyResultDigest string
	PolicyBundleDigest string
}

// EvidenceOf is the evidence run r carries now (what a review page shows).
func EvidenceOf(r Run) Evidence {
	ev := Evidence{PlanDigest: r.PlanDigest, PolicyResultDigest: r.PolicyResultDigest, PolicyBundleDigest: r.PolicyBundleDigest}
	if r.PolicyEvaluationID != nil {
		ev.PolicyEvaluationID = *r.PolicyEvaluationID
	}
	return ev
}

// checkEvidence refuses a decision taken on other evidence than the run's current one.
func (r *Run) checkEvidence(ev Evidence) error {
	if ev.PlanDigest == "" || ev.PlanDigest != r.PlanDigest {
		return fmt.Errorf("decision names plan %q, run %s carries %q: %w", ev.PlanDigest, r.ID, r.PlanDigest, ErrStaleEvidence)
	}
	if cur := EvidenceOf(*r); ev != cur {
		return fmt.Errorf("decision names policy evaluation %q (result %q, bundle %q), run %s carries %q (%q, %q): %w",
			ev.PolicyEvaluationID, ev.PolicyResultDigest, ev.PolicyBundleDigest, r.ID,
			cur.PolicyEvaluationID, cur.PolicyResultDigest, cur.PolicyBundleDigest, ErrStaleEvidence)
	}
	return nil
}

// Approve records an approval of exactly the evidence ev.
func (r *Run) Approve(d Decider, ev Evidence) error {
	if r.State != PendingApproval {
		return &TransitionError{From: r.State, To: Approved}
	}
	if err := r.checkEvidence(ev); err != nil {
		return err
	}
	if err := r.transition(Approved, "approved by "+d.Name); err != nil {
		return err
	}
	r.ApprovedBy, r.ApprovedByName, r.ApprovedPlanDigest, r.ApprovalKind = &d.UserID, d.Name, ev.PlanDigest, "person"
	return nil
}

// Finished reports whether nothing can follow: a terminal state, or a block by a
// hard-mandatory policy, which no override lifts.
func (r Run) Finished() bool {
	return r.State.Terminal() || (r.State == PolicyBlocked && r.PolicyOutcome == "hard_failed")
}

// Actions are what a person may do to r now, in display order: the table's actions
// from its state, none after a hard policy block, and an override of a soft one.
func (r Run) Actions() []Action {
	if r.State == PolicyBlocked && r.PolicyOutcome == "hard_failed" {
		return nil
	}
	return AvailableActions(r.State)
}

// ReleasePolicyBlock moves a run whose soft-mandatory failures were all overridden to
// wait for a person's approval.
func (r *Run) ReleasePolicyBlock(reason string) error {
	if r.State != PolicyBlocked {
		return &TransitionError{From: r.State, To: PendingApproval}
	}
	return r.transition(PendingApproval, reason)
}

// SelfServiceApprove is the system's approval of a run no person needs to decide on,
// bound to the same evidence as a person's (DESIGN §3, risk 1).
func (r *Run) SelfServiceApprove(rule string) error {
	if err := r.transition(Approved, "self-service: "+rule); err != nil {
		return err
	}
	system := "system"
	r.ApprovedBy, r.ApprovedByName, r.ApprovedPlanDigest, r.ApprovalKind = &system, "Gantry (self-service)", r.PlanDigest, "self-service"
	return nil
}

// Reject records a rejection; it needs a reason and stamps no approval fields.
func (r *Run) Reject(d Decider, ev Evidence, reason string) error {
	if r.State != PendingApproval {
		return &TransitionError{From: r.State, To: Rejected}
	}
	if strings.TrimSpace(reason) == "" {
		return ErrReasonRequired
	}
	if err := r.checkEvidence(ev); err != nil {
		return err
	}
	if err := r.transition(Rejected, strings.TrimSpace(reason)); err != nil {
		return err
	}
	r.RejectedBy, r.RejectedByName = &d.UserID, d.Name
	return nil
}

// Cancel stops a run that has not started applying.
func (r *Run) Cancel(d Decider, reason string) error {
	reason = strings.TrimSpace(reason)
	if reason == "" {
		reason = "cancelled by " + d.Name
	}
	return r.transition(Cancelled, reason)
}

// StartPlanning moves a queued run into planning.
func (r *Run) StartPlanning() error { return r.transition(Planning, "") }

// Fail ends the run with the reason a person needs to act on.
func (r *Run) Fail(reason string) error { return r.transition(Failed, reason) }

// StartApply moves an approved run into applying.
func (r *Run) StartApply() error { return r.transition(Running, "") }

// RefuseApply ends an approved run whose pre-apply checks failed: the worker started
// (RUNNING) and stopped before its first side effect (FAILED), as the table requires.
func (r *Run) RefuseApply(reason string) error {
	if err := r.StartApply(); err != nil {
		return err
	}
	return r.Fail(reason + "; nothing was applied")
}

// Interrupt marks an apply whose worker died: the state lock stays fenced and an admin
// must recover it; it is never re-applied blindly.
func (r *Run) Interrupt(reason string) error { return r.transition(ApplyInterrupted, reason) }

// Recover closes an interrupted apply: an admin checked what the dead worker left
// behind; the run ends FAILED and the workspace is free again.
func (r *Run) Recover(d Decider, reason string) error {
	if r.State != ApplyInterrupted {
		return &TransitionError{From: r.State, To: Failed}
	}
	if strings.TrimSpace(reason) == "" {
		return ErrReasonRequired
	}
	return r.transition(Failed, "recovered by "+d.Name+" after an interrupted apply: "+strings.TrimSpace(reason))
}

// StartVerify moves an applied run into verification.
func (r *Run) StartVerify() error { return r.transition(Verifying, "") }

// Succeed ends a verified run.
func (r *Run) Succeed() error { return r.transition(Succeeded, "applied and verified") }

// Expire ends a run whose decision window or approval validity ran out.
func (r *Run) Expire(reason string) error { return r.transition(Expired, reason) }

// MarkStale ends a run whose plan no longer matches the workspace's state.
func (r *Run) MarkStale(reason string) error { return r.transition(Stale, reason) }

// FinishPlanAs moves a planning run to the outcome of its plan (PLANNED, NO_CHANGES,
// PENDING_APPROVAL); self-service approval goes through SelfServiceApprove.
func (r *Run) FinishPlanAs(to State, reason string) error {
	if r.State != Planning {
		return &TransitionError{From: r.State, To: to}
	}
	return r.transition(to, reason)
}
