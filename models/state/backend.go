package state

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"strings"

	"gantry/models/artifact"
	"gantry/models/audit"
	"gantry/models/authz"
	"gantry/models/bundle"
	"gantry/models/db"
	"gantry/models/runport"
)

// Latest returns the newest state version of workspaceID in organization orgID, or
// ErrNoState.
func (s *Store) Latest(ctx context.Context, orgID, workspaceID string) (Version, error) {
	var v Version
	err := db.Conn(ctx, s.db).Where("organization_id = ? AND workspace_id = ?", orgID, workspaceID).Order("serial DESC").Take(&v).Error
	if isNotFound(err) {
		return Version{}, ErrNoState
	}
	if err != nil {
		return Version{}, fmt.Errorf("reading state of %s: %w", workspaceID, err)
	}
	return v, nil
}

// Read returns the decrypted latest state of workspaceID, or ErrNoState.
func (s *Store) Read(ctx context.Context, cred Credential, workspaceID string) ([]byte, error) {
	if err := s.authorize(ctx, cred, workspaceID, false); err != nil {
		return nil, err
	}
	v, err := s.Latest(ctx, cred.OrganizationID, workspaceID)
	if err != nil {
		return nil, err
	}
	data, _, err := s.artifacts.Get(ctx, cred.OrganizationID, v.ArtifactID)
	return data, err
}

// stateHeader is what the backend reads of a state document.
type stateHeader struct {
	Version *int    `json:"version"`
	Serial  *uint64 `json:"serial"`
	Lineage string  `json:"lineage"`
}

func parseState(data []byte) (stateHeader, error) {
	var h stateHeader
	if err := json.Unmarshal(data, &h); err != nil {
		return h, fmt.Errorf("state is not JSON: %v: %w", err, ErrMalformed)
	}
	switch {
	case h.Version == nil:
		return h, fmt.Errorf("state has no version: %w", ErrMalformed)
	case h.Serial == nil || *h.Serial < 1 || *h.Serial > math.MaxInt32:
		return h, fmt.Errorf("state serial must be between 1 and %d: %w", math.MaxInt32, ErrMalformed)
	case h.Lineage == "":
		return h, fmt.Errorf("state has no lineage: %w", ErrMalformed)
	case strings.ContainsRune(h.Lineage, 0):
		// PostgreSQL keeps no NUL in text: refused here as bad input, not a 500 later.
		return h, fmt.Errorf("state lineage holds a NUL character: %w", ErrMalformed)
	}
	return h, nil
}

// Write stores data as the workspace's next state version, for an apply credential.
// lockID is the ?ID= tofu sends when it holds the lock: while the workspace is locked
// only the holder (same lock id, same run) may write, and a write naming a lock that
// is no longer held (released, or fenced after its job was declared dead) is refused.
// The state must keep the workspace's lineage and move its serial forward; the same
// serial with the same bytes again is an idempotent success (a retried request). In the
// same transaction the run lifecycle marks the workspace's waiting runs STALE.
func (s *Service) Write(ctx context.Context, cred Credential, workspaceID, lockID string, data []byte) error {
	return withLock(ctx, s.Store, cred, workspaceID, true, data, parseState, func(ctx context.Context, lock lockRow, h stateHeader) error {
		switch {
		case lock.held() && (lockID != *lock.LockID || cred.RunID != deref(lock.RunID)):
			return lock.lockedError()
		case !lock.held() && lockID != "":
			return fmt.Errorf("writing under lock %s: %w", lockID, ErrLockNotHeld)
		}
		return s.record(ctx, cred.OrganizationID, workspaceID, cred.RunID, h, data, map[string]any{"credential_id": cred.ID}, s.runs)
	})
}

// record stores a state version under the workspace's state lock (held by the caller)
// and tells runs: it locks the waiting runs before auditing the version (the lock
// order of the run lifecycle), then marks them STALE.
func (s *Store) record(ctx context.Context, orgID, workspaceID, runID string, h stateHeader, data []byte, audited map[string]any, runs runport.StateWatcher) error {
	if err := runs.LockWaiting(ctx, orgID, workspaceID); err != nil {
		return err
	}
	v, wrote, err := s.store(ctx, orgID, workspaceID, runID, h, data, audited)
	if err != nil || !wrote {
		return err
	}
	return runs.StateWritten(ctx, orgID, workspaceID, v.Predecessor(), runID)
}

// RecordApplied stores the state a runner returned instead of writing it through the
// backend (the SIMULATED mock) as run runID's version, under the same lineage and
// serial rules and telling runs as a backend write does, and returns its id.
func (s *Store) RecordApplied(ctx context.Context, orgID, workspaceID, runID string, data []byte, runs runport.StateWatcher) (string, error) {
	h, err := parseState(data)
	if err != nil {
		return "", err
	}
	err = db.Tx(ctx, s.db, func(ctx context.Context) error {
		if _, err := s.lockWorkspace(ctx, orgID, workspaceID); err != nil {
			return err
		}
		return s.record(ctx, orgID, workspaceID, runID, h, data, nil, runs)
	})
	if err != nil {
		return "", err
	}
	return s.VersionOf(ctx, orgID, workspaceID, runID)
}

// HoldSteady takes workspaceID's state lock, shared, until the transaction in ctx ends:
// no state version is written meanwhile, so a predecessor read now stays the newest
// until the reader commits (a run finishing its plan; see runport.StateWatcher).
func (s *Store) HoldSteady(ctx context.Context, orgID, workspaceID string) error {
	conn := db.Conn(ctx, s.db)
	err := conn.Exec(`INSERT INTO state_locks (workspace_id, organization_id) VALUES (?, ?) ON CONFLICT (workspace_id) DO NOTHING`,
		workspaceID, orgID).Error
	if err != nil {
		return fmt.Errorf("creating lock of %s: %w", workspaceID, db.Translate(err))
	}
	var held []string
	if err := conn.Raw("SELECT workspace_id FROM state_locks WHERE workspace_id = ? AND organization_id = ? FOR SHARE", workspaceID, orgID).Scan(&held).Error; err != nil {
		return fmt.Errorf("holding state of %s: %w", workspaceID, err)
	}
	return nil
}

// store writes a new version of workspaceID under its lock row (held by the caller's
// transaction): same lineage, serial forward; the same serial and bytes again is the
// version already stored (wrote false).
func (s *Store) store(ctx context.Context, orgID, workspaceID, runID string, h stateHeader, data []byte, audited map[string]any) (Version, bool, error) {
	serial := int64(*h.Serial)
	current, err := s.Latest(ctx, orgID, workspaceID)
	switch {
	case err == nil:
		if h.Lineage != current.Lineage {
			return Version{}, false, fmt.Errorf("lineage %s over %s: %w", h.Lineage, current.Lineage, ErrLineageChanged)
		}
		if serial == current.Serial && bundle.Digest(data) == current.SHA256 {
			return current, false, nil // the same write again: already stored
		}
		if serial <= current.Serial {
			return Version{}, false, fmt.Errorf("serial %d over %d: %w", serial, current.Serial, ErrSerialRegressed)
		}
	case !errors.Is(err, ErrNoState):
		return Version{}, false, err
	}
	art, err := s.artifacts.Put(ctx, orgID, workspaceID, artifact.State, data)
	if err != nil {
		return Version{}, false, err
	}
	v := Version{ID: db.NewID("sv"), OrganizationID: orgID, WorkspaceID: workspaceID, Serial: serial,
		Lineage: h.Lineage, ArtifactID: art.ID, SHA256: art.SHA256, RunID: &runID}
	if err := db.Conn(ctx, s.db).Omit("CreatedAt").Create(&v).Error; err != nil {
		return Version{}, false, fmt.Errorf("saving state version %d: %w", serial, db.Translate(err))
	}
	// The audit names the version, never its content: state holds secrets.
	data2 := map[string]any{"state_version_id": v.ID, "serial": serial, "lineage": h.Lineage, "sha256": art.SHA256, "run_id": runID}
	for k, val := range audited {
		data2[k] = val
	}
	err = s.audit.RecordAs(ctx, authz.System(orgID), audit.Entry{Action: "state.version_created",
		TargetType: "workspace", TargetID: workspaceID, RunID: runID, Data: data2})
	return v, true, err
}

// Predecessor is the workspace's newest version as the predecessor of a plan computed
// now (runport.NoPredecessor when it has no state).
func (s *Store) Predecessor(ctx context.Context, orgID, workspaceID string) (runport.Predecessor, error) {
	v, err := s.Latest(ctx, orgID, workspaceID)
	switch {
	case errors.Is(err, ErrNoState):
		return runport.Predecessor{VersionID: runport.NoPredecessor}, nil
	case err != nil:
		return runport.Predecessor{}, err
	}
	return v.Predecessor(), nil
}

// Predecessor is v as the predecessor of a plan.
func (v Version) Predecessor() runport.Predecessor {
	return runport.Predecessor{VersionID: v.ID, Serial: int(v.Serial), Lineage: v.Lineage, Digest: v.SHA256}
}

// Content returns the decrypted state of version id of organization orgID.
func (s *Store) Content(ctx context.Context, orgID, id string) ([]byte, error) {
	var v Version
	if err := db.Conn(ctx, s.db).Where("organization_id = ? AND id = ?", orgID, id).Take(&v).Error; err != nil {
		return nil, fmt.Errorf("reading state version %s: %w", id, db.Translate(err))
	}
	data, _, err := s.artifacts.Get(ctx, orgID, v.ArtifactID)
	return data, err
}

// VersionOf returns the newest version of workspaceID that run runID wrote ("" none).
func (s *Store) VersionOf(ctx context.Context, orgID, workspaceID, runID string) (string, error) {
	v, err := s.Latest(ctx, orgID, workspaceID)
	switch {
	case errors.Is(err, ErrNoState):
		return "", nil
	case err != nil:
		return "", err
	}
	if v.RunID == nil || *v.RunID != runID {
		return "", nil
	}
	return v.ID, nil
}
