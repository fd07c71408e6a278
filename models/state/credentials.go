package state

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"errors"
	"fmt"
	"time"

	"gorm.io/gorm"

	"gantry/models/audit"
	"gantry/models/authz"
	"gantry/models/db"
	"gantry/models/errs"
)

// credentialRow is one row of state_credentials.
type credentialRow struct {
	ID             string
	OrganizationID string
	WorkspaceID    string
	RunID          string
	Phase          Phase
	SecretHash     []byte
	ExpiresAt      time.Time
	RevokedAt      *time.Time
	CreatedAt      time.Time `gorm:"->"`
	// Now is the database's clock when the row was read (expiry is judged by the
	// clock that set it), not a column.
	Now time.Time `gorm:"->;column:now"`
}

func (credentialRow) TableName() string { return "state_credentials" }

// IssueCredentials mints the credential one job phase of run runID presents to the
// state backend of workspaceID: the username is the credential id, the password 32
// random bytes (base64url). Only the password's sha256 is stored; the password exists
// only in the returned value, so hand it straight to the job's environment.
//
// It is the orchestrator's call (no subject in context): the run it names must be a
// run of that workspace of organization orgID.
func (s *Store) IssueCredentials(ctx context.Context, orgID, workspaceID, runID string, phase Phase, ttl time.Duration) (username, password string, err error) {
	if !phase.Valid() {
		return "", "", fmt.Errorf("issuing state credentials: unknown phase %q", phase)
	}
	if ttl <= 0 {
		return "", "", fmt.Errorf("issuing state credentials: ttl must be positive, got %s", ttl)
	}
	secret := make([]byte, 32)
	if _, err := rand.Read(secret); err != nil {
		return "", "", fmt.Errorf("issuing state credentials: %w", err)
	}
	password = base64.RawURLEncoding.EncodeToString(secret)
	hash := sha256.Sum256([]byte(password))
	row := credentialRow{ID: db.NewID("stc"), OrganizationID: orgID, WorkspaceID: workspaceID, RunID: runID,
		Phase: phase, SecretHash: hash[:]}
	err = db.Tx(ctx, s.db, func(ctx context.Context) error {
		conn := db.Conn(ctx, s.db)
		var n int64
		if err := conn.Table("runs").Where("organization_id = ? AND workspace_id = ? AND id = ?", orgID, workspaceID, runID).Count(&n).Error; err != nil {
			return fmt.Errorf("checking run %s: %w", runID, err)
		}
		if n == 0 {
			return fmt.Errorf("run %s of workspace %s: %w", runID, workspaceID, errs.ErrNotFound)
		}
		// The database clock dates the expiry, as it is the clock Authenticate checks against.
		if err := conn.Raw("SELECT now() + make_interval(secs => ?)", ttl.Seconds()).Scan(&row.ExpiresAt).Error; err != nil {
			return fmt.Errorf("computing expiry: %w", err)
		}
		if err := conn.Create(&row).Error; err != nil {
			return fmt.Errorf("storing state credential: %w", db.Translate(err))
		}
		return s.audit.RecordAs(ctx, authz.System(orgID), audit.Entry{Action: "state.credentials_issued", TargetType: "workspace",
			TargetID: workspaceID, RunID: runID, Data: map[string]any{"credential_id": row.ID, "run_id": runID, "phase": phase,
				"expires_at": row.ExpiresAt.UTC().Format(time.RFC3339)}})
	})
	if err != nil {
		return "", "", err
	}
	return row.ID, password, nil
}

// dummyHash is compared against when the username is unknown, so an unknown username
// costs the same hashing and comparison as a wrong password.
var dummyHash = sha256.Sum256([]byte("gantry-state-no-such-credential"))

// Authenticate checks a Basic-auth username and password. Every failure (unknown
// username, wrong password, expired, revoked) is an ErrBadCredentials; the password is
// compared in constant time before anything else about the credential is looked at.
func (s *Store) Authenticate(ctx context.Context, username, password string) (Credential, error) {
	var row credentialRow
	err := db.Conn(ctx, s.db).Select("*, now() AS now").Where("id = ?", username).Take(&row).Error
	if err != nil && !isNotFound(err) {
		return Credential{}, fmt.Errorf("reading state credential: %w", db.Translate(err)) // a NUL in the user is a 400
	}
	found := row.ID != "" && len(row.SecretHash) == sha256.Size
	want := dummyHash[:]
	if found {
		want = row.SecretHash
	}
	got := sha256.Sum256([]byte(password))
	if subtle.ConstantTimeCompare(got[:], want) != 1 || !found {
		return Credential{}, ErrBadCredentials
	}
	switch {
	case row.RevokedAt != nil:
		return Credential{}, fmt.Errorf("credential %s was revoked: %w", row.ID, ErrBadCredentials)
	case !row.ExpiresAt.After(row.Now):
		return Credential{}, fmt.Errorf("credential %s expired: %w", row.ID, ErrBadCredentials)
	}
	return Credential{ID: row.ID, OrganizationID: row.OrganizationID, WorkspaceID: row.WorkspaceID, RunID: row.RunID,
		Phase: row.Phase, ExpiresAt: row.ExpiresAt}, nil
}

// Revoke ends every live credential of run runID and returns how many it ended. The
// orchestrator calls it when a job phase finishes; a revoked credential fails
// Authenticate from then on.
func (s *Store) Revoke(ctx context.Context, runID string) (int, error) {
	var n int
	err := db.Tx(ctx, s.db, func(ctx context.Context) error {
		var err error
		n, err = s.revoke(ctx, runID, "revoked")
		return err
	})
	return n, err
}

// RevokeCredential ends one credential (a finished phase's), leaving the run's other
// credentials alone: the next phase of the same run may already hold its own.
func (s *Store) RevokeCredential(ctx context.Context, id string) error {
	return db.Tx(ctx, s.db, func(ctx context.Context) error {
		var revoked []credentialRow
		err := db.Conn(ctx, s.db).Raw(`UPDATE state_credentials SET revoked_at = now()
			WHERE id = ? AND revoked_at IS NULL RETURNING id, organization_id, workspace_id, run_id`, id).Scan(&revoked).Error
		if err != nil {
			return fmt.Errorf("revoking state credential %s: %w", id, err)
		}
		if len(revoked) == 0 {
			return nil
		}
		r := revoked[0]
		return s.audit.RecordAs(ctx, authz.System(r.OrganizationID), audit.Entry{Action: "state.credentials_revoked",
			TargetType: "workspace", TargetID: r.WorkspaceID, RunID: r.RunID, Data: map[string]any{"run_id": r.RunID, "credential_ids": []string{id}, "reason": "phase finished"}})
	})
}

// revoke revokes runID's live credentials inside the caller's transaction and audits
// it per organization (a run has one) when any was live.
func (s *Store) revoke(ctx context.Context, runID, reason string) (int, error) {
	var revoked []credentialRow
	err := db.Conn(ctx, s.db).Raw(`UPDATE state_credentials SET revoked_at = now()
		WHERE run_id = ? AND revoked_at IS NULL RETURNING id, organization_id, workspace_id`, runID).Scan(&revoked).Error
	if err != nil {
		return 0, fmt.Errorf("revoking state credentials of %s: %w", runID, err)
	}
	if len(revoked) == 0 {
		return 0, nil
	}
	ids := make([]string, 0, len(revoked))
	for _, r := range revoked {
		ids = append(ids, r.ID)
	}
	first := revoked[0]
	err = s.audit.RecordAs(ctx, authz.System(first.OrganizationID), audit.Entry{Action: "state.credentials_revoked",
		TargetType: "workspace", TargetID: first.WorkspaceID, RunID: runID, Data: map[string]any{"run_id": runID, "credential_ids": ids, "reason": reason}})
	return len(revoked), err
}

// authorize checks that cred may act on workspaceID: its own workspace only. Another
// workspace of the same organization is ErrOtherWorkspace (tofu reports a 403 as bad
// credentials); a workspace outside the organization does not exist for it.
func (s *Store) authorize(ctx context.Context, cred Credential, workspaceID string, write bool) error {
	if cred.ID == "" {
		return ErrBadCredentials
	}
	if workspaceID != cred.WorkspaceID {
		var n int64
		err := db.Conn(ctx, s.db).Table("workspaces").Where("organization_id = ? AND id = ?", cred.OrganizationID, workspaceID).Count(&n).Error
		if err != nil {
			return fmt.Errorf("checking workspace %s: %w", workspaceID, err)
		}
		if n == 0 {
			return fmt.Errorf("workspace %s: %w", workspaceID, errs.ErrNotFound)
		}
		return ErrOtherWorkspace
	}
	if write && !cred.Phase.CanWrite() {
		return fmt.Errorf("%s credential %s: %w", cred.Phase, cred.ID, ErrReadOnly)
	}
	return nil
}

// isNotFound reports a gorm not-found error.
func isNotFound(err error) bool { return errors.Is(err, gorm.ErrRecordNotFound) }
