package run

import (
	"errors"
	"fmt"
	"slices"

	"gantry/models/errs"
)

// State is where a run is in the gate sequence (DESIGN §2).
type State string

const (
	Queued           State = "QUEUED"
	Planning         State = "PLANNING"
	Planned          State = "PLANNED"
	NoChanges        State = "NO_CHANGES"
	PolicyBlocked    State = "POLICY_BLOCKED"
	PendingApproval  State = "PENDING_APPROVAL"
	Approved         State = "APPROVED"
	Running          State = "RUNNING"
	Verifying        State = "VERIFYING"
	Succeeded        State = "SUCCEEDED"
	Failed           State = "FAILED"
	Rejected         State = "REJECTED"
	Cancelled        State = "CANCELLED"
	Expired          State = "EXPIRED"
	Stale            State = "STALE"
	ApplyInterrupted State = "APPLY_INTERRUPTED"
)

// States lists every state, in lifecycle order.
var States = []State{Queued, Planning, Planned, NoChanges, PolicyBlocked, PendingApproval, Approved,
	Running, Verifying, Succeeded, Failed, Rejected, Cancelled, Expired, Stale, ApplyInterrupted}

// transitions is THE table (DESIGN §2, with the moves issue 9 added): the only moves a
// run can make. Services, workers and the UI's available actions all read it.
//   - PLANNING -> STALE: the workspace's state moved while the run was planning.
//   - POLICY_BLOCKED (soft only; a hard block is final, see Run.Finished) -> REJECTED,
//     STALE, EXPIRED: a soft block waits for a person like PENDING_APPROVAL does.
//   - APPROVED -> PENDING_APPROVAL: the approver lost the rights the approval needed
//     (demoted or removed) before the apply started; the run waits again.
var transitions = map[State][]State{
	Queued:           {Planning, Cancelled},
	Planning:         {Planned, NoChanges, PolicyBlocked, PendingApproval, Approved, Failed, Cancelled, Stale},
	PolicyBlocked:    {PendingApproval, Rejected, Cancelled, Expired, Stale},
	PendingApproval:  {Approved, Rejected, Cancelled, Expired, Stale},
	Approved:         {Running, Expired, Cancelled, Stale, PendingApproval},
	Running:          {Verifying, Failed, ApplyInterrupted},
	Verifying:        {Succeeded, Failed},
	ApplyInterrupted: {Failed},
}

// CanTransition reports whether the table allows from -> to.
func CanTransition(from, to State) bool { return slices.Contains(transitions[from], to) }

// Terminal reports whether nothing can follow s.
func (s State) Terminal() bool { return len(transitions[s]) == 0 }

// Valid reports whether s is a known state.
func (s State) Valid() bool { return slices.Contains(States, s) }

// Sentinel errors of the state machine; services map them to HTTP statuses.
var (
	// ErrInvalidTransition: the table does not allow the move from the current state.
	// It is a conflict (409): the run moved on since the page was drawn.
	ErrInvalidTransition = fmt.Errorf("invalid run transition: %w", errs.ErrConflict)
	// ErrStaleEvidence: the decision names other evidence than the run now carries (409).
	ErrStaleEvidence = errs.ErrStaleEvidence
	// ErrReasonRequired: a rejection or cancellation needs a reason.
	ErrReasonRequired = errors.New("a reason is required")
)

// TransitionError says which move was refused.
type TransitionError struct{ From, To State }

func (e *TransitionError) Error() string {
	return fmt.Sprintf("a %s run cannot become %s", e.From, e.To)
}

// Unwrap lets errors.Is(err, ErrInvalidTransition) match.
func (e *TransitionError) Unwrap() error { return ErrInvalidTransition }

// Action is something a person can do to a run.
type Action string

const (
	ActionApprove Action = "approve"
	ActionReject  Action = "reject"
	// ActionOverride overrides one soft-mandatory policy failure (with a reason);
	// offered per failed rule on the review page.
	ActionOverride Action = "override"
	// ActionCancel stops a run: before it applies it ends CANCELLED; while it applies
	// OpenTofu is stopped and it ends APPLY_INTERRUPTED (an admin then recovers it).
	ActionCancel Action = "cancel"
	// ActionRecover closes an interrupted apply after an admin checked the workspace
	// (the state lock is then released and later runs may apply).
	ActionRecover Action = "recover"
	// ActionPlanAgain starts a new run with the same template version and inputs after
	// this one went STALE, EXPIRED or was REJECTED: a new intent needs a new run.
	ActionPlanAgain Action = "plan-again"
)

// Actions lists every action, in display order.
var Actions = []Action{ActionApprove, ActionReject, ActionOverride, ActionCancel, ActionRecover, ActionPlanAgain}

// plannedAgainFrom are the ends after which the same intent may be planned again.
var plannedAgainFrom = []State{Stale, Expired, Rejected}

// Actions are what the state machine allows on r now, whoever asks (rules.go's
// Permissions then says who may): approving only while it waits for approval,
// rejecting while it waits for any decision, overriding a soft policy block, cancelling
// where the table allows, recovering an interrupted apply, planning again after it
// went stale, expired or was rejected. Nothing after a hard policy block.
func (r Run) Actions() []Action {
	if r.HardBlocked() {
		// Final: nothing moves it, but a person may still reject it with a reason
		// (DESIGN §2), which records why and never enables approval.
		return []Action{ActionReject}
	}
	var out []Action
	for _, a := range Actions {
		ok := false
		switch a {
		case ActionApprove:
			ok = r.State == PendingApproval
		case ActionReject:
			ok = r.Waiting()
		case ActionOverride:
			ok = r.SoftBlocked()
		case ActionCancel:
			// A run applying is cancelled too: it is stopped and ends APPLY_INTERRUPTED.
			ok = CanTransition(r.State, Cancelled) || r.State == Running
		case ActionRecover:
			ok = r.State == ApplyInterrupted
		case ActionPlanAgain:
			ok = slices.Contains(plannedAgainFrom, r.State) && r.Kind != KindPlanOnly
		}
		if ok {
			out = append(out, a)
		}
	}
	return out
}
