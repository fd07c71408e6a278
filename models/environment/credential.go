package environment

import (
	"context"
	"fmt"
	"time"

	"gorm.io/gorm"
	"gorm.io/gorm/clause"

	"gantry/models/audit"
	"gantry/models/authz"
	"gantry/models/db"
	"gantry/models/errs"
	"gantry/models/keyring"
)

// Credentials keeps the static cloud credential an environment may hold instead of using
// workload identity. Gantry prefers workload identity (a short-lived token minted per job
// phase); a static credential is a long-lived secret that every job of the environment uses,
// in every phase, which is why an environment that has one shows a standing-credential
// finding. The secret is sealed with the keyring (envelope encryption, bound to the
// environment), never logged, never audited, never shown again once set.
type Credentials struct {
	db    *gorm.DB
	audit *audit.Log
	keys  *keyring.Keyring
}

// NewCredentials returns the static credential store of environments.
func NewCredentials(gdb *gorm.DB, log *audit.Log, keys *keyring.Keyring) *Credentials {
	return &Credentials{db: gdb, audit: log, keys: keys}
}

// MaxCredentialLength bounds a static credential (it travels in an HTTP header).
const MaxCredentialLength = 4096

// credentialRow is the slice of an environments row that holds the credential.
type credentialRow struct {
	ID             string
	OrganizationID string
	CredKeyID      *string
	CredWrappedKey []byte
	CredNonce      []byte
	CredCiphertext []byte
	CredSetAt      *time.Time
}

func (r credentialRow) set() bool { return r.CredKeyID != nil && r.CredSetAt != nil }

func (r credentialRow) sealed() keyring.Sealed {
	return keyring.Sealed{KeyID: *r.CredKeyID, WrappedKey: r.CredWrappedKey, Nonce: r.CredNonce, Ciphertext: r.CredCiphertext}
}

// credentialAAD binds a sealed credential to its environment: a ciphertext copied to another
// environment's row does not open.
func credentialAAD(orgID, envID string) []byte {
	return []byte("environment-credential:" + orgID + ":" + envID)
}

const credentialColumns = "id, organization_id, cred_key_id, cred_wrapped_key, cred_nonce, cred_ciphertext, cred_set_at"

func (c *Credentials) row(ctx context.Context, orgID, envID string, forUpdate bool) (credentialRow, error) {
	q := db.Conn(ctx, c.db).Table("environments").Select(credentialColumns).
		Where("organization_id = ? AND id = ?", orgID, envID)
	if forUpdate {
		q = q.Clauses(clause.Locking{Strength: "UPDATE"})
	}
	var r credentialRow
	if err := q.Take(&r).Error; err != nil {
		return credentialRow{}, fmt.Errorf("reading environment %s: %w", envID, db.Translate(err))
	}
	return r, nil
}

// validateSecret checks a credential without ever quoting it.
func validateSecret(secret string) error {
	v := &errs.Validation{}
	switch {
	case secret == "":
		v.Add("cloud_credential", "Enter the credential.")
	case len(secret) > MaxCredentialLength:
		v.Add("cloud_credential", fmt.Sprintf("Use at most %d characters.", MaxCredentialLength))
	default:
		for i := 0; i < len(secret); i++ {
			if secret[i] <= ' ' || secret[i] > '~' {
				v.Add("cloud_credential", "Use printable ASCII characters without spaces (an API key or token).")
				break
			}
		}
	}
	return v.Err()
}

// CredentialChange is what an edit of an environment asks of its static credential: a new
// secret (set or replace), removal, or neither (Secret empty, Remove false).
type CredentialChange struct {
	Secret string
	Remove bool
}

// Validate checks the change on its own, never quoting the secret: the form shows the
// message without having saved anything.
func (ch CredentialChange) Validate() error {
	if ch.Remove && ch.Secret != "" {
		v := &errs.Validation{}
		v.Add("cloud_credential", "Enter a new credential or remove the current one, not both.")
		return v
	}
	if ch.Secret == "" {
		return nil
	}
	return validateSecret(ch.Secret)
}

// Apply makes the change: set, clear, or nothing.
func (c *Credentials) Apply(ctx context.Context, envID string, ch CredentialChange) error {
	switch {
	case ch.Remove:
		return c.ClearStaticCredential(ctx, envID)
	case ch.Secret != "":
		return c.SetStaticCredential(ctx, envID, ch.Secret)
	}
	return nil
}

// SetStaticCredential seals secret as environment envID's static cloud credential, replacing
// any earlier one. Bad input is an *errs.Validation (field "cloud_credential") that never
// quotes the secret. The audit event says that a credential was set, never what it is.
func (c *Credentials) SetStaticCredential(ctx context.Context, envID, secret string) error {
	subject, err := authz.Require(ctx, authz.PermEnvironmentsManage)
	if err != nil {
		return err
	}
	if err := validateSecret(secret); err != nil {
		return err
	}
	return db.Tx(ctx, c.db, func(ctx context.Context) error {
		before, err := c.row(ctx, subject.OrganizationID, envID, true)
		if err != nil {
			return err
		}
		sealed, err := c.keys.Seal([]byte(secret), credentialAAD(before.OrganizationID, before.ID))
		if err != nil {
			return fmt.Errorf("sealing the credential: %w", err)
		}
		err = db.Conn(ctx, c.db).Model(&Environment{}).
			Where("organization_id = ? AND id = ?", before.OrganizationID, before.ID).
			Updates(map[string]any{
				"cred_key_id": sealed.KeyID, "cred_wrapped_key": sealed.WrappedKey, "cred_nonce": sealed.Nonce,
				"cred_ciphertext": sealed.Ciphertext, "cred_set_at": gorm.Expr("now()"), "updated_at": gorm.Expr("now()"),
			}).Error
		if err != nil {
			return fmt.Errorf("storing the credential: %w", err)
		}
		return c.audit.Record(ctx, audit.Entry{
			Action: "environment.static_credential_set", TargetType: "environment", TargetID: before.ID,
			Data: map[string]any{"replaced": before.set(), "key_id": sealed.KeyID, "finding": "standing_credential"},
		})
	})
}

// ClearStaticCredential removes environment envID's static credential: its jobs use workload
// identity again. Clearing an environment without one changes nothing and audits nothing.
func (c *Credentials) ClearStaticCredential(ctx context.Context, envID string) error {
	subject, err := authz.Require(ctx, authz.PermEnvironmentsManage)
	if err != nil {
		return err
	}
	return db.Tx(ctx, c.db, func(ctx context.Context) error {
		before, err := c.row(ctx, subject.OrganizationID, envID, true)
		if err != nil || !before.set() {
			return err
		}
		err = db.Conn(ctx, c.db).Model(&Environment{}).
			Where("organization_id = ? AND id = ?", before.OrganizationID, before.ID).
			Updates(map[string]any{
				"cred_key_id": nil, "cred_wrapped_key": nil, "cred_nonce": nil, "cred_ciphertext": nil,
				"cred_set_at": nil, "updated_at": gorm.Expr("now()"),
			}).Error
		if err != nil {
			return fmt.Errorf("clearing the credential: %w", err)
		}
		return c.audit.Record(ctx, audit.Entry{
			Action: "environment.static_credential_cleared", TargetType: "environment", TargetID: before.ID,
			Data: map[string]any{"set_at": before.CredSetAt.UTC().Format(time.RFC3339)},
		})
	})
}

// StaticCredentialSince reports whether environment envID of the subject's organization holds
// a static credential, and since when. It never opens the credential.
func (c *Credentials) StaticCredentialSince(ctx context.Context, envID string) (time.Time, bool, error) {
	subject, err := authz.Require(ctx, authz.PermEnvironmentsManage)
	if err != nil {
		return time.Time{}, false, err
	}
	r, err := c.row(ctx, subject.OrganizationID, envID, false)
	if err != nil || !r.set() {
		return time.Time{}, false, err
	}
	return *r.CredSetAt, true, nil
}

// StaticCredentialsSince maps the ids of the subject's organization's environments that hold
// a static credential to when it was set (for the environment list's finding badges).
func (c *Credentials) StaticCredentialsSince(ctx context.Context) (map[string]time.Time, error) {
	subject, err := authz.Require(ctx, authz.PermEnvironmentsManage)
	if err != nil {
		return nil, err
	}
	var rows []struct {
		ID        string
		CredSetAt time.Time
	}
	err = db.Conn(ctx, c.db).Table("environments").Select("id, cred_set_at").
		Where("organization_id = ? AND cred_set_at IS NOT NULL", subject.OrganizationID).Scan(&rows).Error
	if err != nil {
		return nil, fmt.Errorf("listing static credentials: %w", err)
	}
	out := make(map[string]time.Time, len(rows))
	for _, r := range rows {
		out[r.ID] = r.CredSetAt
	}
	return out, nil
}

// StaticCredential opens environment envID's static credential for the runner, which acts as
// the system (no subject): ok is false when the environment uses workload identity. The
// secret goes to the job's environment and nowhere else.
func (c *Credentials) StaticCredential(ctx context.Context, orgID, envID string) (secret string, ok bool, err error) {
	r, err := c.row(ctx, orgID, envID, false)
	if err != nil || !r.set() {
		return "", false, err
	}
	plain, err := c.keys.Open(r.sealed(), credentialAAD(r.OrganizationID, r.ID))
	if err != nil {
		return "", false, fmt.Errorf("opening the static credential of environment %s: %w", envID, err)
	}
	return string(plain), true, nil
}

// RewrapCredentials re-wraps the data key of every environment credential not sealed under
// keys' current key (`gantry keys rotate`); ciphertexts are untouched. It returns how many it
// re-wrapped, audited per organization as "keys.rewrapped".
func RewrapCredentials(ctx context.Context, gdb *gorm.DB, keys *keyring.Keyring) (int, error) {
	log := audit.New(gdb)
	current := keys.CurrentKeyID()
	n := 0
	err := db.Tx(ctx, gdb, func(ctx context.Context) error {
		var rows []credentialRow
		err := db.Conn(ctx, gdb).Table("environments").Select(credentialColumns).
			Where("cred_key_id IS NOT NULL AND cred_key_id <> ?", current).
			Clauses(clause.Locking{Strength: "NO KEY UPDATE"}).Order("id").Scan(&rows).Error
		if err != nil {
			return fmt.Errorf("reading environment credentials to rotate: %w", err)
		}
		perOrg := map[string]int{}
		for _, r := range rows {
			re, err := keys.Rewrap(r.sealed())
			if err != nil {
				return fmt.Errorf("re-wrapping the credential of environment %s: %w", r.ID, err)
			}
			err = db.Conn(ctx, gdb).Model(&Environment{}).Where("id = ? AND cred_key_id = ?", r.ID, *r.CredKeyID).
				Updates(map[string]any{"cred_key_id": re.KeyID, "cred_wrapped_key": re.WrappedKey}).Error
			if err != nil {
				return fmt.Errorf("storing the re-wrapped credential of environment %s: %w", r.ID, err)
			}
			perOrg[r.OrganizationID]++
			n++
		}
		for orgID, count := range perOrg {
			err := log.RecordAs(ctx, authz.System(orgID), audit.Entry{Action: "keys.rewrapped", TargetType: "keyring",
				TargetID: current, Data: map[string]any{"environment_credentials": count, "key_id": current}})
			if err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return 0, err
	}
	return n, nil
}
