// Package run holds runs: one intent (apply, dry run or destroy) against one workspace,
// moved through the gate sequence by pure transition methods on the entity and
// persisted by one locked read-modify-write that also writes the audit event and
// enqueues the next job.
//
// The package is split by role: the entity and its transition table (run.go, kind.go,
// evidence.go, state.go), every decision rule and constant (rules.go; said in words in
// rules_words.go), the one locked read-modify-write (update.go), the decisions people
// take (decisions.go), requests (request.go, names.go), reads (reads.go), the
// worker-facing lifecycle (work.go, apply.go, stale.go, escalate.go), the plan gates
// (assess.go), drift checks, corrections and codifications (drift.go, drift_checks.go,
// drift_reads.go), the runs table (store.go) and the small interfaces it needs from
// other aggregates (deps.go).
package run

import (
	"encoding/json"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"time"

	"gantry/models/moves"
	"gantry/models/review"
)

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
	// Ending is why the run ended (endings.go); "" while it has not, and for runs that
	// ended before endings were coded (migration 00032 fills in the unambiguous ones).
	Ending Ending `gorm:"default:''"`

	TemplateName    string
	TemplateVersion string
	ModuleDigest    string
	Inputs          json.RawMessage `gorm:"type:jsonb"` // sensitive values masked

	RequestedBy     string
	RequestedByName string
	// RequestReason and RequestTicket are why the requester asked for the run and the
	// ticket it answers (request_note.go): free text, shown, never decided on.
	RequestReason string `gorm:"default:''"`
	RequestTicket string `gorm:"default:''"`

	Runner    string
	Simulated bool

	ConfigArtifactID string
	ConfigDigest     string

	// The state version the plan was computed from (none: all zero); the decision and
	// the apply bind to it.
	PriorStateVersionID *string
	PriorSerial         int
	PriorLineage        string
	PriorStateDigest    string

	PlanRevision       int
	PlanArtifactID     *string
	PlanDigest         string
	PlanJSONArtifactID *string
	PlanLogArtifactID  *string
	PlanSummary        Summary `gorm:"serializer:json;type:jsonb"`

	// The plan gates' findings (DESIGN §3, §7): the risk class, the matrix rule that
	// set it and the decision it requires, the policy evaluation the decision binds to,
	// and the cost estimate.
	RiskClass        *int
	RiskLevel        string
	RiskRule         string
	RiskReason       string
	RequiredApprover string // "none", "system", a role, or "environment_owners"
	FourEyes         bool
	Elevated         bool
	// Escalation names who may also decide once the run has waited EscalateAfterMinutes
	// ("" = nobody); EscalatedAt is when the escalation job recorded it.
	Escalation           string
	EscalateAfterMinutes int
	MatrixVersion        int
	PolicyEvaluationID   *string
	PolicyOutcome        string
	PolicyBundleDigest   string
	PolicyResultDigest   string
	Cost                 *review.Cost `gorm:"serializer:json;type:jsonb"`

	// WaitingSince is when the run started waiting for a person (a soft policy block or
	// PENDING_APPROVAL); DecisionDeadline is when that wait ends in EXPIRED.
	WaitingSince     *time.Time
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

	CancelledBy     *string
	CancelledByName string
	CancelledAt     *time.Time

	ApplyLogArtifactID  *string
	NewStateVersionID   *string
	Outputs             json.RawMessage `gorm:"type:jsonb"`
	VerifyLogArtifactID *string

	// SourceRunID is the run this one was planned again from, if any (for a drift check,
	// a codification or a correction: the run that wrote the state, whose configuration
	// it reuses); PriorRequesters
	// are who requested the runs along that chain (none of them decides this one where
	// the requester may not).
	SourceRunID     *string
	PriorRequesters []string `gorm:"serializer:json;type:jsonb"`
	// RollbackVersionID is the state version this run rolls back to (re-applying the
	// inputs and template version of the run that wrote it, SourceRunID), and
	// RollbackSerial its serial; nil and 0 for any other run.
	RollbackVersionID *string
	RollbackSerial    int
	// PromotedFromRunID is the applied run of another environment's workspace this run
	// promotes (nil for any other run).
	PromotedFromRunID *string
	// BreakglassWindowID is the break-glass window a codification codifies, or whose
	// end (or codification) a drift check checks (nil for any other run).
	BreakglassWindowID *string
	// Drift is what a finished drift check found, each drifted resource attributed to
	// the window that changed it or to nobody; DriftStatus sums it up (drift.go).
	Drift       *Drift      `gorm:"serializer:json;type:jsonb"`
	DriftStatus DriftStatus `gorm:"default:''"`

	CreatedAt  time.Time
	UpdatedAt  time.Time
	FinishedAt *time.Time

	// moves are the transitions made since the run was read, in order; the service
	// audits each one with what its decision bound (evidence, reason, who may decide).
	moves moves.Log[State]
}

// move is one of a run's moves.
type move = moves.Move[State]

// LogValue keeps run logs to ids and state; inputs may be sensitive.
func (r Run) LogValue() slog.Value {
	return slog.GroupValue(slog.String("run", r.ID), slog.String("workspace", r.WorkspaceID), slog.String("state", string(r.State)))
}

// Label is the run's human name within its workspace, e.g. "#3".
func (r Run) Label() string { return fmt.Sprintf("#%d", r.Number) }

// transition moves the run to state to, recording why, if the table allows it. It is
// the one way a phase moves a run (planning, running, verifying, succeeded, failed,
// stale, expired, interrupted): the table in state.go is the rule, so no verb stands
// for a target state; the decisions below add the preconditions a person must meet.
// A move that ends the run goes through end instead, with its code (endings.go).
func (r *Run) transition(to State, reason string) error { return moveRun(r, to, "", reason) }

// end moves the run into a state it ends in, with the code that says why.
func (r *Run) end(to State, code Ending, reason string) error { return moveRun(r, to, code, reason) }

// moveRun is transition and end in one: a function, not a method, to keep Run's methods
// to what callers use (roles_test.go).
func moveRun(r *Run, to State, code Ending, reason string) error {
	// A hard policy block is final although POLICY_BLOCKED itself is not terminal:
	// nothing moves it but a rejection, which records why and never enables approval.
	rejectingHardBlock := r.HardBlocked() && to == Rejected
	if !CanTransition(r.State, to) || r.Finished() && !rejectingHardBlock {
		return &TransitionError{From: r.State, To: to}
	}
	switch ends := endsAfter(*r, to); {
	case ends && !code.EndsIn(to):
		return fmt.Errorf("%w: a run ending %s needs an ending code of that state, not %q", ErrInvalidTransition, to, code)
	case !ends && code != "":
		return fmt.Errorf("%w: a move to %s does not end the run, so it takes no ending code (%s)", ErrInvalidTransition, to, code)
	}
	var data map[string]any
	if code != "" {
		data = map[string]any{"ending": string(code)}
	}
	r.moves.Add(r.State, to, reason, data)
	r.State, r.StateReason, r.Ending = to, reason, code
	return nil
}

// Decider is the person (or the system) deciding on a run.
type Decider struct {
	UserID string
	Name   string
}

// Finished reports whether nothing can follow: a terminal state, or a block by a
// hard-mandatory policy, which no override lifts.
func (r Run) Finished() bool {
	return r.State.Terminal() || r.HardBlocked()
}

// HardBlocked reports whether a hard-mandatory policy failure blocks the run for good.
func (r Run) HardBlocked() bool { return r.State == PolicyBlocked && r.PolicyOutcome == "hard_failed" }

// SoftBlocked reports whether the run waits for an admin's override of soft-mandatory
// policy failures.
func (r Run) SoftBlocked() bool { return r.State == PolicyBlocked && !r.HardBlocked() }

// Waiting reports whether the run waits for a person's decision (an override or an
// approval): the runs a new state version makes STALE and a deadline expires.
func (r Run) Waiting() bool { return r.State == PendingApproval || r.SoftBlocked() }

// RequestedByUser reports whether user userID requested this run, or a run it was planned
// again from: four eyes and "the requester never rejects" hold across "Plan again".
func (r Run) RequestedByUser(userID string) bool {
	return r.RequestedBy == userID || slices.Contains(r.PriorRequesters, userID)
}

// Live reports whether the run's executor acts on a real cloud (not the SIMULATED mock):
// requesting and approving it needs cloud.live.
func (r Run) Live() bool { return !r.Simulated }

// Approve records an approval of exactly the evidence ev, valid for ApprovalValidity
// from now (the database clock when the decision commits).
func (r *Run) Approve(d Decider, ev Evidence, now time.Time) error {
	if r.State != PendingApproval {
		return &TransitionError{From: r.State, To: Approved}
	}
	if err := ev.check(*r); err != nil {
		return err
	}
	if err := r.transition(Approved, "approved by "+d.Name); err != nil {
		return err
	}
	expires := now.Add(ApprovalValidity)
	r.ApprovedBy, r.ApprovedByName, r.ApprovedPlanDigest, r.ApprovalKind = &d.UserID, d.Name, ev.PlanDigest, "person"
	r.ApprovedAt, r.ApprovalExpiresAt = &now, &expires
	r.moves.Annotate(ev.auditData())
	r.markSelfApproval()
	return nil
}

// SelfServiceApprove is the system's approval of a run no person needs to decide on,
// bound to the same evidence as a person's (DESIGN §3, risk 1).
func (r *Run) SelfServiceApprove(rule string, now time.Time) error {
	if err := r.transition(Approved, "self-service: "+rule); err != nil {
		return err
	}
	system, expires := "system", now.Add(ApprovalValidity)
	r.ApprovedBy, r.ApprovedByName, r.ApprovedPlanDigest, r.ApprovalKind = &system, "Gantry (self-service)", r.PlanDigest, "self-service"
	r.ApprovedAt, r.ApprovalExpiresAt = &now, &expires
	r.moves.Annotate(EvidenceOf(*r).auditData())
	return nil
}

// VoidApproval sends an approved run back to wait for a decision: the approver lost
// the rights the approval needed before the apply started. The decision deadline it
// had still holds.
func (r *Run) VoidApproval(reason string) error {
	if r.State != Approved {
		return &TransitionError{From: r.State, To: PendingApproval}
	}
	if err := r.transition(PendingApproval, reason); err != nil {
		return err
	}
	r.ApprovedBy, r.ApprovedByName, r.ApprovedAt, r.ApprovedPlanDigest, r.ApprovalKind, r.ApprovalExpiresAt = nil, "", nil, "", "", nil
	return nil
}

// Reject records a rejection of the run waiting for a decision (PENDING_APPROVAL, or a
// soft policy block) or of a run a hard-mandatory policy blocked (DESIGN §2: it records
// why and never enables approval); it needs a reason and stamps no approval fields.
func (r *Run) Reject(d Decider, ev Evidence, reason string, now time.Time) error {
	if !r.Waiting() && !r.HardBlocked() {
		return &TransitionError{From: r.State, To: Rejected}
	}
	reason = strings.TrimSpace(reason)
	if reason == "" {
		return ErrReasonRequired
	}
	if err := ev.check(*r); err != nil {
		return err
	}
	if err := r.end(Rejected, EndRejected, "rejected by "+d.Name+": "+reason); err != nil {
		return err
	}
	r.RejectedBy, r.RejectedByName, r.RejectedAt = &d.UserID, d.Name, &now
	r.moves.Annotate(ev.auditData())
	r.moves.Annotate(map[string]any{"rejected_by": d.UserID, "rejection_reason": reason})
	return nil
}

// Cancel stops a run; the reason is optional before it applies. A cancellation is not
// a rejection: it says nothing about the plan. A run that is applying ends
// APPLY_INTERRUPTED, never CANCELLED: OpenTofu may have changed resources, the
// workspace stays fenced and an admin recovers it (Decisions.Cancel stops the apply).
func (r *Run) Cancel(d Decider, reason string, now time.Time) error {
	why := "cancelled by " + d.Name
	if reason = strings.TrimSpace(reason); reason != "" {
		why += ": " + reason
	}
	var err error
	if r.State == Running {
		err = r.end(ApplyInterrupted, EndApplyCancelled, "cancelled while it applied by "+d.Name+": "+reason+
			"; OpenTofu is stopped and the state it wrote is kept; no later run of the workspace applies until an admin recovers this one")
	} else {
		err = r.end(Cancelled, EndCancelled, why)
	}
	if err != nil {
		return err
	}
	r.CancelledBy, r.CancelledByName, r.CancelledAt = &d.UserID, d.Name, &now
	r.moves.Annotate(map[string]any{"cancelled_by": d.UserID, "cancellation_reason": reason})
	return nil
}

// ReleasePolicyBlock moves a run whose soft-mandatory failures were all overridden to
// wait for a person's approval, within the decision deadline it already has.
func (r *Run) ReleasePolicyBlock(reason string) error {
	if r.State != PolicyBlocked {
		return &TransitionError{From: r.State, To: PendingApproval}
	}
	return r.transition(PendingApproval, reason)
}

// RefuseApply ends an approved run whose pre-apply checks failed: the worker started
// (RUNNING) and stopped before its first side effect (FAILED), as the table requires.
func (r *Run) RefuseApply(reason string) error {
	if err := r.transition(Running, ""); err != nil {
		return err
	}
	return r.end(Failed, EndApplyRefused, reason+"; nothing was applied")
}

// Recover closes an interrupted apply: an admin checked what the dead worker left
// behind; the run ends FAILED and the workspace is free again.
func (r *Run) Recover(d Decider, reason string) error {
	if r.State != ApplyInterrupted {
		return &TransitionError{From: r.State, To: Failed}
	}
	if strings.TrimSpace(reason) == "" {
		return ErrReasonRequired
	}
	return r.end(Failed, EndRecovered, "recovered by "+d.Name+" after an interrupted apply: "+strings.TrimSpace(reason))
}

// FinishPlanAs moves a planning run to the outcome of its plan (PLANNED, NO_CHANGES,
// POLICY_BLOCKED, PENDING_APPROVAL), with the ending code when the outcome ends it ("":
// it waits for a person); self-service approval goes through SelfServiceApprove.
func (r *Run) FinishPlanAs(to State, code Ending, reason string) error {
	if r.State != Planning {
		return &TransitionError{From: r.State, To: to}
	}
	return moveRun(r, to, code, reason)
}

// waitFor starts a wait for a person's decision: from now, until the environment's
// decision window ends. A run released from a soft policy block keeps the wait it had.
func (r *Run) waitFor(window time.Duration, now time.Time) {
	if r.WaitingSince != nil && r.DecisionDeadline != nil {
		return
	}
	deadline := now.Add(window)
	r.WaitingSince, r.DecisionDeadline = &now, &deadline
}
