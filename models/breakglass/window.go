// Package breakglass holds break-glass windows (DESIGN §9, the manual change path): a
// time-boxed permission for one person to change one workspace's live resources by
// hand in an emergency, asked for with a reason, approved by an admin who is not the
// requester (bound to the window's exact terms), opened within the approval's validity
// and closed by its clock. While a window is open no pipeline run of the workspace is
// approved or applied (models/run asks through run.Windows). At its end a drift check
// runs by itself, and the window waits "awaiting codification" until a gated
// codification run accepts the change into state and the drift check after it finds
// nothing, or an owner closes it with a reason.
//
// The package is split by role: the entity and its transitions (window.go), who may do
// what (rules.go), the table and what runs ask of it (store.go), and the person-facing
// service: reads and requests (service.go), decisions, use and deadlines (actions.go).
package breakglass

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"time"

	"gantry/models/errs"
	"gantry/models/moves"
	"gantry/models/run"
)

// State is where a window is.
type State string

const (
	Requested            State = "REQUESTED"
	Approved             State = "APPROVED"
	Open                 State = "OPEN"
	AwaitingCodification State = "AWAITING_CODIFICATION"
	Codified             State = "CODIFIED"
	Closed               State = "CLOSED"
	Rejected             State = "REJECTED"
	Cancelled            State = "CANCELLED"
	Expired              State = "EXPIRED"
)

// transitions is the table of the moves a window can make.
//   - REQUESTED: an admin approves or rejects, the requester (or an admin) cancels, or
//     nobody decides within the environment's decision window (EXPIRED).
//   - APPROVED: the requester opens it within the approval's validity, or it EXPIRES.
//   - OPEN: its clock ends it (or the requester or an admin ends it early).
//   - AWAITING_CODIFICATION: a drift check finds the codified state matches the world
//     (CODIFIED), finds nothing left to codify (CLOSED), or an owner closes it (CLOSED).
var transitions = map[State][]State{
	Requested:            {Approved, Rejected, Cancelled, Expired},
	Approved:             {Open, Cancelled, Expired},
	Open:                 {AwaitingCodification},
	AwaitingCodification: {Codified, Closed},
}

// Terminal reports whether nothing can follow s.
func (s State) Terminal() bool { return len(transitions[s]) == 0 }

// Active reports whether a window in s holds its workspace's one place (asked for,
// approved or open).
func (s State) Active() bool { return s == Requested || s == Approved || s == Open }

// Label is the state in words.
func (s State) Label() string {
	if s == AwaitingCodification {
		return "awaiting codification"
	}
	return strings.ToLower(string(s))
}

// The window's bounds (DESIGN §9).
const (
	DefaultDuration = time.Hour
	MinDuration     = 5 * time.Minute
	MaxDuration     = 4 * time.Hour
	// MinReasonLength is the least a reason (for the window, for closing it) says.
	MinReasonLength = 10
	// MaxReasonLength bounds a reason (the column holds 2,000 characters).
	MaxReasonLength = 2000
)

// Durations are the window lengths the request form offers.
var Durations = []time.Duration{15 * time.Minute, 30 * time.Minute, time.Hour, 2 * time.Hour, 4 * time.Hour}

// Window is one row of breakglass_windows.
type Window struct {
	ID              string
	OrganizationID  string
	EnvironmentID   string
	WorkspaceID     string
	State           State
	StateReason     string
	Reason          string
	DurationMinutes int
	// TermsDigest binds the approval to exactly these terms (Terms.Digest).
	TermsDigest     string
	RequestedBy     string
	RequestedByName string
	// DecisionDeadline: a request nobody decides by then expires.
	DecisionDeadline time.Time

	ApprovedBy     *string
	ApprovedByName string
	ApprovedAt     *time.Time
	// ApprovalExpiresAt: the requester opens the window before then, or it expires.
	ApprovalExpiresAt *time.Time
	RejectedBy        *string
	RejectedByName    string

	OpenedAt          *time.Time
	EndsAt            *time.Time
	EndedAt           *time.Time
	CredentialsIssued int

	// DriftCheckRunID is the newest drift check that reported to the window;
	// CodifyRunID the newest codification asked for.
	DriftCheckRunID *string
	CodifyRunID     *string
	ClosedBy        *string
	ClosedByName    string

	CreatedAt  time.Time
	UpdatedAt  time.Time
	FinishedAt *time.Time

	// moves are the transitions since the window was read, for the audit.
	moves moves.Log[State]
}

// move is one of a window's moves.
type move = moves.Move[State]

// TableName: gorm would say "windows".
func (Window) TableName() string { return "breakglass_windows" }

// LogValue keeps logs to ids and state (a reason may name an incident).
func (w Window) LogValue() slog.Value {
	return slog.GroupValue(slog.String("window", w.ID), slog.String("workspace", w.WorkspaceID), slog.String("state", string(w.State)))
}

// Duration is the window's length.
func (w Window) Duration() time.Duration { return time.Duration(w.DurationMinutes) * time.Minute }

// Terms are what an approval of a window binds to: who asked, for which workspace, for
// how long and why. Anything else approved is not this window.
type Terms struct {
	WindowID        string `json:"window_id"`
	OrganizationID  string `json:"organization_id"`
	EnvironmentID   string `json:"environment_id"`
	WorkspaceID     string `json:"workspace_id"`
	RequestedBy     string `json:"requested_by"`
	DurationMinutes int    `json:"duration_minutes"`
	Reason          string `json:"reason"`
}

// Digest is "sha256:" and the hex sha256 of the terms' JSON (fields in declaration
// order, so the same terms always give the same digest).
func (t Terms) Digest() string {
	b, _ := json.Marshal(t) // strings and an int: cannot fail
	sum := sha256.Sum256(b)
	return "sha256:" + hex.EncodeToString(sum[:])
}

// TermsOf are window w's terms.
func TermsOf(w Window) Terms {
	return Terms{WindowID: w.ID, OrganizationID: w.OrganizationID, EnvironmentID: w.EnvironmentID, WorkspaceID: w.WorkspaceID,
		RequestedBy: w.RequestedBy, DurationMinutes: w.DurationMinutes, Reason: w.Reason}
}

// TransitionError says which move was refused (a conflict: the window moved on).
type TransitionError struct{ From, To State }

func (e *TransitionError) Error() string {
	return fmt.Sprintf("a %s break-glass window cannot become %s", e.From.Label(), e.To.Label())
}

// Unwrap makes it a conflict (409).
func (e *TransitionError) Unwrap() error { return errs.ErrConflict }

// transition moves the window to state to, recording why, if the table allows it.
func (w *Window) transition(to State, reason string, data map[string]any) error {
	if !slices.Contains(transitions[w.State], to) {
		return &TransitionError{From: w.State, To: to}
	}
	w.moves.Add(w.State, to, reason, data)
	w.State, w.StateReason = to, reason
	return nil
}

// Decider is the person (or the system) acting on a window: the same record as who
// decides on a run.
type Decider = run.Decider

// Approve records an admin's approval of exactly the terms digest terms, valid for
// validity from now: the requester opens the window within it.
func (w *Window) Approve(d Decider, terms string, now time.Time, validity time.Duration) error {
	if w.State != Requested {
		return &TransitionError{From: w.State, To: Approved}
	}
	if terms != w.TermsDigest {
		return errs.Explain(errs.ErrStaleEvidence, "The window's terms changed since the page was drawn: reload it and decide again.")
	}
	expires := now.Add(validity)
	if err := w.transition(Approved, fmt.Sprintf("approved by %s; open it by %s", d.Name, expires.UTC().Format("15:04 UTC")),
		map[string]any{"terms_digest": terms, "approval_expires_at": expires.UTC()}); err != nil {
		return err
	}
	w.ApprovedBy, w.ApprovedByName, w.ApprovedAt, w.ApprovalExpiresAt = &d.UserID, d.Name, &now, &expires
	return nil
}

// Reject records a rejection with its reason.
func (w *Window) Reject(d Decider, terms, reason string) error {
	if w.State != Requested {
		return &TransitionError{From: w.State, To: Rejected}
	}
	if terms != w.TermsDigest {
		return errs.Explain(errs.ErrStaleEvidence, "The window's terms changed since the page was drawn: reload it and decide again.")
	}
	if err := w.transition(Rejected, "rejected by "+d.Name+": "+reason, map[string]any{"terms_digest": terms, "rejection_reason": reason}); err != nil {
		return err
	}
	w.RejectedBy, w.RejectedByName = &d.UserID, d.Name
	return nil
}

// Cancel withdraws a window that has not opened.
func (w *Window) Cancel(d Decider) error {
	return w.transition(Cancelled, "cancelled by "+d.Name, map[string]any{"cancelled_by": d.UserID})
}

// Expire ends a request nobody decided in time, or an approval nobody used in time.
func (w *Window) Expire(reason string) error { return w.transition(Expired, reason, nil) }

// OpenNow opens an approved window: its clock runs from now for its duration.
func (w *Window) OpenNow(d Decider, now time.Time) error {
	ends := now.Add(w.Duration())
	if err := w.transition(Open, fmt.Sprintf("opened by %s until %s", d.Name, ends.UTC().Format("2006-01-02 15:04 UTC")),
		map[string]any{"ends_at": ends.UTC()}); err != nil {
		return err
	}
	w.OpenedAt, w.EndsAt = &now, &ends
	return nil
}

// End closes an open window's manual change path: it now awaits codification.
func (w *Window) End(reason string, now time.Time) error {
	if err := w.transition(AwaitingCodification, reason, nil); err != nil {
		return err
	}
	w.EndedAt = &now
	return nil
}

// Close ends a window awaiting codification without one: an owner's decision with a
// reason, or the system's when a drift check finds nothing left to codify (d nil).
func (w *Window) Close(d *Decider, reason string) error {
	why := reason
	if d != nil {
		why = "closed by " + d.Name + ": " + reason
	}
	if err := w.transition(Closed, why, map[string]any{"close_reason": reason}); err != nil {
		return err
	}
	if d != nil {
		w.ClosedBy, w.ClosedByName = &d.UserID, d.Name
	}
	return nil
}

// Codify records that the change is in state: a codification wrote it, and the drift
// check after it found nothing.
func (w *Window) Codify(reason string) error { return w.transition(Codified, reason, nil) }
