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

// transitions is THE table: the only moves a run can make. Services, workers and the
// UI's available actions all read it.
var transitions = map[State][]State{
	Queued:           {Planning, Cancelled},
	Planning:         {Planned, NoChanges, PolicyBlocked, PendingApproval, Approved, Failed, Cancelled},
	PolicyBlocked:    {PendingApproval, Cancelled},
	PendingApproval:  {Approved, Rejected, Cancelled, Expired, Stale},
	Approved:         {Running, Expired, Cancelled, Stale},
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
	ActionCancel  Action = "cancel"
	// ActionRecover closes an interrupted apply after an admin checked the workspace
	// (the state lock is then released and later runs may apply).
	ActionRecover Action = "recover"
	// ActionOverride overrides one soft-mandatory policy failure (admins, with a reason);
	// offered per failed rule on the review page, not in the action bar.
	ActionOverride Action = "override"
)

// actionTargets maps each person-initiated action to the state it moves a run to.
// Approval and rejection are decisions on a run waiting for one, so they also require
// PENDING_APPROVAL (the table's PLANNING -> APPROVED is the system's self-service path).
var actionTargets = map[Action]State{ActionApprove: Approved, ActionReject: Rejected, ActionCancel: Cancelled, ActionRecover: Failed}

// AvailableActions are the actions the table allows from s, in display order.
func AvailableActions(s State) []Action {
	var out []Action
	for _, a := range []Action{ActionApprove, ActionReject, ActionCancel, ActionRecover} {
		if !CanTransition(s, actionTargets[a]) {
			continue
		}
		if (a == ActionApprove || a == ActionReject) && s != PendingApproval {
			continue
		}
		// Failing a run is the system's move everywhere but after an interrupted apply.
		if a == ActionRecover && s != ApplyInterrupted {
			continue
		}
		out = append(out, a)
	}
	return out
}
