// Package state is Gantry's OpenTofu state backend: the state versions of each
// workspace (envelope-encrypted artifacts plus rows of state_versions), the workspace
// lock tofu takes around every plan and apply, and the job-scoped credentials a
// runner job presents as TF_HTTP_USERNAME/TF_HTTP_PASSWORD.
//
// Tofu enforces lineage and serial rules on its own side only; a zombie job, a
// `state push -force` or a confused runner would not. So the backend refuses, here,
// every write that would change a workspace's lineage, move its serial back, or
// slip past the holder of its lock.
package state

import (
	"encoding/json"
	"errors"
	"fmt"
	"gantry/models/db"
	"log/slog"
	"net/url"
	"strings"
	"time"

	"gorm.io/gorm"

	"gantry/models/artifact"
	"gantry/models/audit"
	"gantry/models/errs"
	"gantry/models/runport"
)

// Phase is the job phase a credential was issued for.
type Phase string

const (
	PhasePlan   Phase = "plan"
	PhaseApply  Phase = "apply"
	PhaseVerify Phase = "verify"
)

// Valid reports whether p is a known phase.
func (p Phase) Valid() bool { return p == PhasePlan || p == PhaseApply || p == PhaseVerify }

// CanWrite reports whether a credential of phase p may store state. Plans and
// verifications read and lock (tofu locks during a plan) but never write.
func (p Phase) CanWrite() bool { return p == PhaseApply }

// Addresses returns the backend URLs a job of workspaceID is given as TF_HTTP_ADDRESS
// and as TF_HTTP_LOCK_ADDRESS and TF_HTTP_UNLOCK_ADDRESS, under baseURL (the portal as
// the job reaches it). handlers.State serves exactly these routes.
func Addresses(baseURL, workspaceID string) (address, lockAddress string) {
	address = strings.TrimRight(baseURL, "/") + "/state/" + url.PathEscape(workspaceID)
	return address, address + "/lock"
}

// Credential is an authenticated job credential. It never holds the password.
type Credential struct {
	ID             string
	OrganizationID string
	WorkspaceID    string
	RunID          string
	Phase          Phase
	ExpiresAt      time.Time
}

// LogValue names the credential by ids only.
func (c Credential) LogValue() slog.Value {
	return slog.GroupValue(slog.String("credential", c.ID), slog.String("workspace", c.WorkspaceID),
		slog.String("run", c.RunID), slog.String("phase", string(c.Phase)))
}

// LockInfo is the part of tofu's LockInfo JSON the backend reads; the whole document
// is stored and handed back to a contender as tofu sent it.
type LockInfo struct {
	ID        string `json:"ID"`
	Operation string `json:"Operation"`
	Who       string `json:"Who"`
}

// Lock is the lock state of one workspace.
type Lock struct {
	WorkspaceID  string
	Held         bool
	LockID       string
	Info         json.RawMessage // the holder's LockInfo, as sent
	RunID        string
	CredentialID string
	Fence        int64
	AcquiredAt   time.Time
}

// Version is one row of state_versions (the table the run lifecycle created).
type Version struct {
	ID             string
	OrganizationID string
	WorkspaceID    string
	Serial         int64
	Lineage        string
	ArtifactID     string
	SHA256         string `gorm:"column:sha256"`
	RunID          *string
	CreatedAt      time.Time
}

// TableName pins the table shared with models/run.
func (Version) TableName() string { return "state_versions" }

var (
	// ErrBadCredentials covers an unknown username, a wrong password, an expired and a
	// revoked credential alike: the caller is not authenticated.
	ErrBadCredentials = fmt.Errorf("invalid state credentials: %w", errs.ErrUnauthenticated)
	// ErrOtherWorkspace means the credential belongs to another workspace of the organization.
	ErrOtherWorkspace = fmt.Errorf("credential is for another workspace: %w", errs.ErrForbidden)
	// ErrReadOnly means a plan or verify credential tried to write state.
	ErrReadOnly = fmt.Errorf("credential may not write state: %w", errs.ErrForbidden)
	// ErrNoState means the workspace has no state version yet.
	ErrNoState = fmt.Errorf("no state: %w", errs.ErrNotFound)
	// ErrMalformed means the body is not a state (or LockInfo) document Gantry accepts.
	ErrMalformed = errors.New("malformed request body")
	// ErrLineageChanged refuses a state of another lineage than the workspace's.
	ErrLineageChanged = fmt.Errorf("state lineage differs from the workspace's: %w", errs.ErrConflict)
	// ErrSerialRegressed refuses a state older than the current one, or another state
	// under the current serial.
	ErrSerialRegressed = fmt.Errorf("state serial does not move forward: %w", errs.ErrConflict)
	// ErrLockNotHeld refuses a write or unlock that names a lock nobody holds any more
	// (released, or fenced by the orchestrator).
	ErrLockNotHeld = fmt.Errorf("the named lock is not held: %w", errs.ErrConflict)
	// ErrLocked is what LockedError unwraps to.
	ErrLocked = fmt.Errorf("state is locked: %w", errs.ErrConflict)
)

// LockedError means someone else holds the workspace lock; Holder is their LockInfo,
// which tofu shows to the person whose lock attempt failed.
type LockedError struct {
	Holder json.RawMessage
	LockID string
}

func (e *LockedError) Error() string { return "state is locked by " + e.LockID }

// Unwrap makes a LockedError an ErrLocked (a conflict).
func (e *LockedError) Unwrap() error { return ErrLocked }

// Store holds the state backend's data: the state versions of every workspace, their
// locks and the job credentials. Runs read their predecessors and fence dead jobs'
// locks through it; Service serves it to OpenTofu.
type Store struct {
	db        *gorm.DB
	artifacts *artifact.Store
	audit     *audit.Log
}

// NewStore returns the state store, keeping state through artifacts.
func NewStore(gdb *gorm.DB, artifacts *artifact.Store, log *audit.Log) *Store {
	return &Store{db: gdb, artifacts: artifacts, audit: log}
}

// Service is Gantry's OpenTofu http state backend: the store's operations for job
// credentials, and every state write told to the run lifecycle in the write's own
// transaction, so the runs still waiting on the old state go STALE with it (DESIGN §3).
type Service struct {
	*Store
	runs runport.StateWatcher
}

// NewService returns the backend over st, telling runs about every write.
func NewService(st *Store, runs runport.StateWatcher) *Service {
	return &Service{Store: st, runs: runs}
}

// Unavailable reports whether err means the backend's database is away (restarting,
// shutting down, unreachable): nothing was done, and the same request succeeds once it
// is back, so the backend answers 503 and tofu retries.
func Unavailable(err error) bool { return db.Unavailable(err) }
