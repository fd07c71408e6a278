package state

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"gorm.io/gorm/clause"

	"gantry/models/audit"
	"gantry/models/authz"
	"gantry/models/db"
)

// The workspace state lock: tofu's LOCK and UNLOCK, Gantry's reservation for an apply,
// and the orchestrator's fence for a dead job. Every write, lock and unlock of a
// workspace goes through its state_locks row, locked for the transaction.

// lockRow is one row of state_locks.
type lockRow struct {
	WorkspaceID    string `gorm:"primaryKey"`
	OrganizationID string
	LockID         *string
	Info           []byte `gorm:"type:jsonb"`
	RunID          *string
	CredentialID   *string
	Fence          int64
	AcquiredAt     *time.Time
}

func (lockRow) TableName() string { return "state_locks" }

func (r lockRow) held() bool { return r.LockID != nil }

func (r lockRow) lock() Lock {
	l := Lock{WorkspaceID: r.WorkspaceID, Held: r.held(), Info: r.Info, Fence: r.Fence}
	if r.held() {
		l.LockID, l.RunID, l.CredentialID, l.AcquiredAt = *r.LockID, deref(r.RunID), deref(r.CredentialID), *r.AcquiredAt
	}
	return l
}

func (r lockRow) lockedError() *LockedError {
	return &LockedError{Holder: json.RawMessage(r.Info), LockID: deref(r.LockID)}
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

// lockWorkspace returns workspaceID's lock row, locked FOR UPDATE until the
// transaction in ctx ends, creating it (free) on first use. Every write, lock and
// unlock of a workspace goes through it, so they are serialised per workspace.
func (s *Store) lockWorkspace(ctx context.Context, orgID, workspaceID string) (lockRow, error) {
	conn := db.Conn(ctx, s.db)
	err := conn.Exec(`INSERT INTO state_locks (workspace_id, organization_id) VALUES (?, ?) ON CONFLICT (workspace_id) DO NOTHING`,
		workspaceID, orgID).Error
	if err != nil {
		return lockRow{}, fmt.Errorf("creating lock of %s: %w", workspaceID, db.Translate(err))
	}
	var row lockRow
	err = conn.Clauses(clause.Locking{Strength: "UPDATE"}).Where("workspace_id = ? AND organization_id = ?", workspaceID, orgID).Take(&row).Error
	if err != nil {
		return lockRow{}, fmt.Errorf("locking state of %s: %w", workspaceID, db.Translate(err))
	}
	return row, nil
}

// lockFor is lockWorkspace for a request made with cred. After taking the row lock it
// checks again that cred is still live: FenceAndRelease revokes under the same row
// lock, so a job fenced while its request was on the way cannot slip in behind the
// fence with a credential it authenticated a moment earlier.
func (s *Store) lockFor(ctx context.Context, cred Credential, workspaceID string) (lockRow, error) {
	lock, err := s.lockWorkspace(ctx, cred.OrganizationID, workspaceID)
	if err != nil {
		return lockRow{}, err
	}
	var live int64
	err = db.Conn(ctx, s.db).Model(&credentialRow{}).Where("id = ? AND revoked_at IS NULL AND expires_at > now()", cred.ID).Count(&live).Error
	if err != nil {
		return lockRow{}, fmt.Errorf("checking credential %s: %w", cred.ID, err)
	}
	if live == 0 {
		return lockRow{}, fmt.Errorf("credential %s is no longer live: %w", cred.ID, ErrBadCredentials)
	}
	return lock, nil
}

// withLock is the one way a request of cred reaches workspaceID's state (Write, Lock,
// Unlock): it checks that cred may read the state (write: write it) before looking at
// the request's body, reads the body with parse, refusing a malformed one before any
// row is locked, then runs fn with what parse read in a transaction holding the
// workspace's lock row (lockFor), so a workspace's writes, locks and unlocks take turns.
func withLock[T any](ctx context.Context, s *Store, cred Credential, workspaceID string, write bool, body []byte,
	parse func([]byte) (T, error), fn func(ctx context.Context, lock lockRow, doc T) error) error {
	if err := s.authorize(ctx, cred, workspaceID, write); err != nil {
		return err
	}
	doc, err := parse(body)
	if err != nil {
		return err
	}
	return db.Tx(ctx, s.db, func(ctx context.Context) error {
		lock, err := s.lockFor(ctx, cred, workspaceID)
		if err != nil {
			return err
		}
		return fn(ctx, lock, doc)
	})
}

func parseLockInfo(info []byte) (LockInfo, error) {
	var li LockInfo
	if err := json.Unmarshal(info, &li); err != nil {
		return li, fmt.Errorf("lock info is not JSON: %v: %w", err, ErrMalformed)
	}
	if li.ID == "" {
		return li, fmt.Errorf("lock info has no ID: %w", ErrMalformed)
	}
	// The document is kept as jsonb, which holds no NUL character in any string.
	if bytes.Contains(info, []byte(`\u0000`)) {
		return li, fmt.Errorf("lock info holds a NUL character: %w", ErrMalformed)
	}
	return li, nil
}

// Lock takes workspaceID's lock for cred's run with tofu's LockInfo document info. A
// lock held by anyone else is a *LockedError carrying the holder's LockInfo. Taking a
// lock already held under the same lock id by the same credential succeeds again, so
// a retried request whose first answer was lost does not lock its own sender out; an
// apply credential may also take again, under a new lock id, the lock it holds
// (retakenBy).
func (s *Store) Lock(ctx context.Context, cred Credential, workspaceID string, info []byte) error {
	return withLock(ctx, s, cred, workspaceID, false, info, parseLockInfo, func(ctx context.Context, lock lockRow, li LockInfo) error {
		if reservedFor(lock, cred) || retakenBy(lock, cred) {
			// The apply's own tofu takes the lock Gantry reserved for it, or its job
			// locks again what it already holds: the same holding, so the fence stays.
			err := db.Conn(ctx, s.db).Exec(`UPDATE state_locks SET lock_id = ?, info = ? WHERE workspace_id = ?`,
				li.ID, string(info), workspaceID).Error
			if err != nil {
				return fmt.Errorf("taking over the reservation of %s: %w", workspaceID, db.Translate(err))
			}
			return nil
		}
		if lock.held() {
			if *lock.LockID == li.ID && deref(lock.CredentialID) == cred.ID {
				return nil
			}
			return lock.lockedError()
		}
		// Every acquisition gets the next fence: a lock id names one holding, and the
		// fence orders holdings, never going back.
		err := db.Conn(ctx, s.db).Exec(`UPDATE state_locks SET lock_id = ?, info = ?, run_id = ?, credential_id = ?,
			fence = fence + 1, acquired_at = now() WHERE workspace_id = ?`,
			li.ID, string(info), cred.RunID, cred.ID, workspaceID).Error
		if err != nil {
			return fmt.Errorf("taking lock of %s: %w", workspaceID, db.Translate(err))
		}
		return nil
	})
}

// reservationPrefix starts the lock id of a reservation (Reserve); tofu's own lock ids
// are UUIDs, so the two never meet.
const reservationPrefix = "gantry-reserved-"

// Reserve takes workspaceID's state lock for the apply of run runID before tofu runs
// (DESIGN §3: the lock is acquired with a fencing token before the first side effect),
// held by the apply's state credential credentialID, with the next fence, which it
// returns. Nobody else locks or writes the state meanwhile; tofu's own LOCK with that
// credential takes the reservation over as the same holding (same fence), and its
// UNLOCK ends it. A reservation tofu never took (it died first) is released when the
// run is fenced. A lock held by another run is a *LockedError: the apply must not start.
func (s *Store) Reserve(ctx context.Context, orgID, workspaceID, runID, credentialID string) (int64, error) {
	var fence int64
	err := db.Tx(ctx, s.db, func(ctx context.Context) error {
		lock, err := s.lockWorkspace(ctx, orgID, workspaceID)
		if err != nil {
			return err
		}
		if lock.held() {
			if deref(lock.RunID) == runID && deref(lock.CredentialID) == credentialID {
				fence = lock.Fence // a retried reservation
				return nil
			}
			return lock.lockedError()
		}
		fence = lock.Fence + 1
		id := fmt.Sprintf("%s%d", reservationPrefix, fence)
		info, err := json.Marshal(map[string]string{"ID": id, "Operation": "OperationTypeApply", "Who": "gantry",
			"Info": "reserved for the apply of run " + runID})
		if err != nil {
			return err
		}
		err = db.Conn(ctx, s.db).Exec(`UPDATE state_locks SET lock_id = ?, info = ?, run_id = ?, credential_id = ?,
			fence = ?, acquired_at = now() WHERE workspace_id = ?`, id, string(info), runID, credentialID, fence, workspaceID).Error
		if err != nil {
			return fmt.Errorf("reserving the state lock of %s: %w", workspaceID, db.Translate(err))
		}
		return nil
	})
	return fence, err
}

// reservedFor reports whether lock is a reservation (Reserve) for cred.
func reservedFor(lock lockRow, cred Credential) bool {
	return lock.held() && strings.HasPrefix(*lock.LockID, reservationPrefix) &&
		deref(lock.RunID) == cred.RunID && deref(lock.CredentialID) == cred.ID
}

// retakenBy reports whether lock is held by the apply credential cred itself, under
// another lock id: the apply's job locking again. That happens when `tofu apply` could
// neither store its state nor unlock (the database was away past tofu's retries) and the
// runner pushes the errored.tfstate it left (`tofu state push` locks first). The
// credential is the job's own and lives only for its phase, whose commands run one at a
// time, so this is the same holding: the fence stays, and the old lock id no longer
// writes.
func retakenBy(lock lockRow, cred Credential) bool {
	return lock.held() && cred.Phase.CanWrite() &&
		deref(lock.RunID) == cred.RunID && deref(lock.CredentialID) == cred.ID
}

// Unlock releases workspaceID's lock when info names it and cred's run holds it. An
// unlock of a free lock succeeds (a retried unlock); any other holder is a
// *LockedError. tofu force-unlock sends a LockInfo with only the ID: the same rule
// applies, so a job cannot break another run's lock; the orchestrator does that with
// FenceAndRelease.
func (s *Store) Unlock(ctx context.Context, cred Credential, workspaceID string, info []byte) error {
	return withLock(ctx, s, cred, workspaceID, false, info, parseLockInfo, func(ctx context.Context, lock lockRow, li LockInfo) error {
		if !lock.held() {
			return nil
		}
		if *lock.LockID != li.ID || deref(lock.RunID) != cred.RunID {
			return lock.lockedError()
		}
		return s.release(ctx, workspaceID)
	})
}

func (s *Store) release(ctx context.Context, workspaceID string) error {
	err := db.Conn(ctx, s.db).Exec(`UPDATE state_locks SET lock_id = NULL, info = NULL, run_id = NULL, credential_id = NULL,
		acquired_at = NULL WHERE workspace_id = ?`, workspaceID).Error
	if err != nil {
		return fmt.Errorf("releasing lock of %s: %w", workspaceID, err)
	}
	return nil
}

// LockOf returns the lock state of workspaceID (Held false when free), for the
// orchestrator to find a lock whose job is gone.
func (s *Store) LockOf(ctx context.Context, workspaceID string) (Lock, error) {
	var row lockRow
	err := db.Conn(ctx, s.db).Where("workspace_id = ?", workspaceID).Take(&row).Error
	if isNotFound(err) {
		return Lock{WorkspaceID: workspaceID}, nil
	}
	if err != nil {
		return Lock{}, fmt.Errorf("reading lock of %s: %w", workspaceID, err)
	}
	return row.lock(), nil
}

// HoldsLock reports whether a job of run runID holds the workspace's state lock.
func (s *Store) HoldsLock(ctx context.Context, workspaceID, runID string) (bool, error) {
	l, err := s.LockOf(ctx, workspaceID)
	if err != nil {
		return false, err
	}
	return l.Held && l.RunID == runID, nil
}

// FenceAndRelease is the orchestrator's answer to a dead job of run runID: it
// revokes every live state credential of the run, so the job, should it still be
// running somewhere, can neither write nor unlock; releases the workspace lock if that
// run holds it; and bumps the fence. It is idempotent and audited as
// "state.lock_fenced".
//
// Call it before issuing credentials for a retry of the same run: it revokes every
// credential the run has at that moment.
func (s *Store) FenceAndRelease(ctx context.Context, workspaceID, runID, reason string) error {
	return db.Tx(ctx, s.db, func(ctx context.Context) error {
		var orgID string
		err := db.Conn(ctx, s.db).Table("workspaces").Select("organization_id").Where("id = ?", workspaceID).Take(&orgID).Error
		if err != nil {
			return fmt.Errorf("reading workspace %s: %w", workspaceID, db.Translate(err))
		}
		lock, err := s.lockWorkspace(ctx, orgID, workspaceID)
		if err != nil {
			return err
		}
		revoked, err := s.revoke(ctx, runID, "fenced: "+reason)
		if err != nil {
			return err
		}
		released := lock.held() && deref(lock.RunID) == runID
		if released {
			if err := s.release(ctx, workspaceID); err != nil {
				return err
			}
		}
		var fence int64
		if err := db.Conn(ctx, s.db).Raw(`UPDATE state_locks SET fence = fence + 1 WHERE workspace_id = ? RETURNING fence`, workspaceID).
			Scan(&fence).Error; err != nil {
			return fmt.Errorf("fencing %s: %w", workspaceID, err)
		}
		data := map[string]any{"run_id": runID, "reason": reason, "released": released, "fence": fence,
			"credentials_revoked": revoked}
		if released {
			data["lock_id"] = *lock.LockID
		}
		return s.audit.RecordAs(ctx, authz.System(orgID), audit.Entry{Action: "state.lock_fenced",
			TargetType: "workspace", TargetID: workspaceID, RunID: runID, Data: data})
	})
}
