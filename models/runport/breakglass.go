package runport

import (
	"errors"
	"time"

	"gantry/models/errs"
)

// The vocabulary runs share with break-glass windows (models/breakglass): a verdict of
// the rules, both sides answering in the same terms; what drift attribution and the
// run rules need of a window; what a finished drift check tells the windows.

// Verdict is the rules' answer to "may this person do this now": nil error is yes; a
// refusal carries its code (FORBIDDEN, NOT_FOUND, CONFLICT, STALE_EVIDENCE,
// APPROVAL_EXPIRED) and the reason in words.
type Verdict struct{ err error }

// VerdictOf is the verdict err says: nil allows, anything else refuses with its code
// (runs' rules and break-glass windows' answer in the same terms).
func VerdictOf(err error) Verdict { return Verdict{err: err} }

func (v Verdict) Allowed() bool   { return v.err == nil }
func (v Verdict) Err() error      { return v.err }
func (v Verdict) Code() errs.Code { return errs.CodeOf(v.err) }

// Reason is the refusal in words ("" when allowed).
func (v Verdict) Reason() string {
	var ex *errs.Explained
	switch {
	case v.err == nil:
		return ""
	case errors.As(v.err, &ex):
		return ex.Message
	}
	return v.err.Error()
}

// WindowInfo is what drift attribution and the run rules need of a break-glass window.
type WindowInfo struct {
	ID              string
	WorkspaceID     string
	RequestedByName string
	Reason          string
	// EndsAt is when an open window closes (nil unless it is open).
	EndsAt *time.Time
	// OpenedAt and EndedAt bound when its credentials were meant to be used (nil: it
	// never opened, or has not ended).
	OpenedAt, EndedAt *time.Time
}

// DriftCheck is what a finished drift check tells its workspace's windows awaiting
// codification.
type DriftCheck struct {
	RunID          string
	Label          string // the run's label, "#7"
	OrganizationID string
	WorkspaceID    string
	// SourceRunID is the run whose state the check compared with the world (nil: none).
	SourceRunID *string
	Status      DriftStatus
}
