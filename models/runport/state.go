package runport

import (
	"context"
	"fmt"
	"time"
)

// NoPredecessor is the predecessor of a plan computed against a workspace without
// state: "none" is evidence too (a state written since makes the plan stale).
const NoPredecessor = "none"

// Predecessor is the state version a plan was computed from (DESIGN §3): its id,
// serial, lineage and digest, or VersionID NoPredecessor when there was none.
type Predecessor struct {
	VersionID string
	Serial    int
	Lineage   string
	Digest    string
}

// None reports whether the plan was computed against no state.
func (p Predecessor) None() bool { return p.VersionID == NoPredecessor }

// String names the predecessor for a person, e.g. "serial 4 (sv-…)" or "no state".
func (p Predecessor) String() string {
	if p.None() {
		return "no state"
	}
	return fmt.Sprintf("serial %d (%s)", p.Serial, p.VersionID)
}

// StateWatcher is what the state backend (models/state) calls, in the transaction that
// stores a new state version of a workspace: the run lifecycle marks that workspace's
// runs still waiting on the old state STALE there and then (DESIGN §3). The backend
// calls LockWaiting once it holds the workspace's state lock and before it audits the
// write, then StateWritten after storing the version.
type StateWatcher interface {
	LockWaiting(ctx context.Context, orgID, workspaceID string) error
	StateWritten(ctx context.Context, orgID, workspaceID string, written Predecessor, byRunID string) error
}

// StateVersionInfo is one state version: its workspace, serial and the run that wrote
// it ("" for none).
type StateVersionInfo struct {
	ID, WorkspaceID string
	Serial          int
	RunID           string
	CreatedAt       time.Time
}

// StateResource is one managed resource instance of a state version.
type StateResource struct {
	Address, Type, ID string
}
