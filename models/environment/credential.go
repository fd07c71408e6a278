package environment

import (
	"context"
	"crypto/subtle"
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

// Credentials keeps the static cloud credentials an environment may hold instead of using
// workload identity. Gantry prefers workload identity (a short-lived token minted per job
// phase, read-scoped for plans and verifications, write-scoped for applies); a static
// credential is a long-lived secret every job of the environment in its phases uses, which
// is why an environment that holds one shows a standing-credential finding.
//
// An environment holds at most two: a write credential (Write), which only applies get, and
// a read credential (Read), which plans and verifications get. A write key never reaches a
// read phase: without a read credential those phases use a read-scoped workload identity
// token (runner.jobCredentials.cloudToken holds the rule). Each secret is sealed with the
// keyring (envelope encryption, bound to its environment and its kind), never logged, never
// audited, never shown again once set.
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

// Kind names one of an environment's two static credentials.
type Kind string

const (
	// Write is the credential applies use (the one environments have always had).
	Write Kind = "write"
	// Read is the credential plans and verifications use.
	Read Kind = "read"
)

// slot is where and how a kind of credential is kept: its columns' prefix, the form and
// API field that names it, the context its ciphertext is bound to and its audit actions.
type slot struct {
	col          string
	field        string
	aad          string
	noun         string
	set, cleared audit.Entry
}

var slots = map[Kind]slot{
	Write: {col: "cred_", field: "cloud_credential", aad: "environment-credential:", noun: "write credential",
		set:     audit.Entry{Action: "environment.static_credential_set"},
		cleared: audit.Entry{Action: "environment.static_credential_cleared"}},
	Read: {col: "read_cred_", field: "cloud_read_credential", aad: "environment-read-credential:", noun: "read credential",
		set:     audit.Entry{Action: "environment.static_read_credential_set"},
		cleared: audit.Entry{Action: "environment.static_read_credential_cleared"}},
}

// Field is the form and API field that carries a credential of kind k (and names it in
// validation errors).
func (k Kind) Field() string { return slots[k].field }

func (k Kind) other() Kind {
	if k == Read {
		return Write
	}
	return Read
}

// credentialRow is the slice of an environments row that holds one kind of credential
// (the read columns are selected under the write columns' names).
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

// credentialAAD binds a sealed credential to its environment and kind: a ciphertext
// copied to another environment's row, or to the other kind's columns, does not open.
func credentialAAD(k Kind, orgID, envID string) []byte {
	return []byte(slots[k].aad + orgID + ":" + envID)
}

func credentialColumns(k Kind) string {
	p := slots[k].col
	return "id, organization_id, " + p + "key_id AS cred_key_id, " + p + "wrapped_key AS cred_wrapped_key, " +
		p + "nonce AS cred_nonce, " + p + "ciphertext AS cred_ciphertext, " + p + "set_at AS cred_set_at"
}

func (c *Credentials) row(ctx context.Context, k Kind, orgID, envID string, forUpdate bool) (credentialRow, error) {
	q := db.Conn(ctx, c.db).Table("environments").Select(credentialColumns(k)).
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

// open decrypts a row's credential.
func (c *Credentials) open(k Kind, r credentialRow) (string, error) {
	plain, err := c.keys.Open(r.sealed(), credentialAAD(k, r.OrganizationID, r.ID))
	if err != nil {
		return "", fmt.Errorf("opening the static %s of environment %s: %w", slots[k].noun, r.ID, err)
	}
	return string(plain), nil
}

// validateSecret checks a credential of kind k into v, never quoting it.
func validateSecret(v *errs.Validation, k Kind, secret string) {
	field := k.Field()
	switch {
	case secret == "":
		v.Add(field, "Enter the credential.")
	case len(secret) > MaxCredentialLength:
		v.Add(field, fmt.Sprintf("Use at most %d characters.", MaxCredentialLength))
	default:
		for i := 0; i < len(secret); i++ {
			if secret[i] <= ' ' || secret[i] > '~' {
				v.Add(field, "Use printable ASCII characters without spaces (an API key or token).")
				break
			}
		}
	}
}

// sameSecret says why a credential that is the other kind's is refused: the read phases
// would hold the write key.
var sameSecret = map[Kind]string{
	Read:  "The read credential must not be the write credential: plans and verifications would hold the write key. Use a read-only key.",
	Write: "The write credential must not be the read credential: plans and verifications would hold the write key. Keep a read-only key as the read credential.",
}

// refuseSame is a validation error on k's field when secret, the new credential of kind
// k, is other, the other kind's; compared in constant time, never quoted.
func refuseSame(k Kind, secret, other string) error {
	if secret == "" || other == "" || subtle.ConstantTimeCompare([]byte(secret), []byte(other)) != 1 {
		return nil
	}
	v := &errs.Validation{}
	v.Add(k.Field(), sameSecret[k])
	return v
}

// CredentialChange is what an edit asks of one static credential: a new secret (set or
// replace), removal, or neither (Secret empty, Remove false).
type CredentialChange struct {
	Secret string
	Remove bool
}

func (ch CredentialChange) none() bool { return ch.Secret == "" && !ch.Remove }

// CredentialChanges is what an edit of an environment asks of both its credentials.
type CredentialChanges struct {
	Write, Read CredentialChange
}

func (chs CredentialChanges) of(k Kind) CredentialChange {
	if k == Read {
		return chs.Read
	}
	return chs.Write
}

// Validate checks the changes on their own, never quoting a secret: the form shows the
// messages without having saved anything.
func (chs CredentialChanges) Validate() error {
	v := &errs.Validation{}
	for _, k := range []Kind{Write, Read} {
		ch := chs.of(k)
		switch {
		case ch.Remove && ch.Secret != "":
			v.Add(k.Field(), "Enter a new credential or remove the current one, not both.")
		case ch.Secret != "":
			validateSecret(v, k, ch.Secret)
		}
	}
	if refuseSame(Read, chs.Read.Secret, chs.Write.Secret) != nil {
		v.Add(Read.Field(), sameSecret[Read])
	}
	return v.Err()
}

// Check validates the changes for environment envID as Apply will, without saving
// anything: on their own, and a new secret against the other kind's stored one when that
// one stays. A form checks first, so a refused form saved nothing.
func (c *Credentials) Check(ctx context.Context, envID string, chs CredentialChanges) error {
	if chs.Write.none() && chs.Read.none() {
		return nil // nothing to check: the edit's own service call answers for the rest
	}
	subject, err := authz.Require(ctx, authz.PermEnvironmentsManage)
	if err != nil {
		return err
	}
	if err := chs.Validate(); err != nil {
		return err
	}
	for _, k := range []Kind{Write, Read} {
		ch, kept := chs.of(k), chs.of(k.other())
		if ch.Secret == "" || !kept.none() {
			continue
		}
		if err := c.refuseStored(ctx, k, subject.OrganizationID, envID, ch.Secret); err != nil {
			return err
		}
	}
	return c.pairRule(ctx, subject.OrganizationID, envID, chs, false)
}

// pairRule refuses changes after which environment envID would hold a write credential
// without a read credential. A static key acts for its whole environment, so what it
// creates belongs to no workspace, and a workspace's read-scoped workload token cannot
// see it: the plans and verifications of such an environment would find everything the
// applies made missing. Handing them the write key instead is what the read credential
// exists to avoid (runner.jobCredentials.cloudToken), so the pair goes together. An
// environment that held a write key alone before this rule keeps working as it did until
// its credentials are next changed.
func (c *Credentials) pairRule(ctx context.Context, orgID, envID string, chs CredentialChanges, forUpdate bool) error {
	held := map[Kind]bool{}
	for _, k := range []Kind{Write, Read} {
		r, err := c.row(ctx, k, orgID, envID, forUpdate)
		if err != nil {
			return err
		}
		ch := chs.of(k)
		held[k] = ch.Secret != "" || (r.set() && !ch.Remove)
	}
	if !held[Write] || held[Read] {
		return nil
	}
	v := &errs.Validation{}
	if chs.Read.Remove {
		v.Add(Read.Field(), "The write credential stays, so plans and verifications need this read credential: what a static key creates belongs to no workspace, and a workspace's own token cannot see it. Remove the write credential too, or enter a new read credential instead.")
	} else {
		v.Add(Write.Field(), "A write credential needs a read credential: what a static key creates belongs to no workspace, so plans and verifications need a read-only key of the same environment to see it (they never get the write key). Enter the read credential too.")
	}
	return v
}

// refuseStored is refuseSame of secret, a new credential of kind k, against environment
// envID's stored credential of the other kind.
func (c *Credentials) refuseStored(ctx context.Context, k Kind, orgID, envID, secret string) error {
	r, err := c.row(ctx, k.other(), orgID, envID, false)
	if err != nil || !r.set() {
		return err
	}
	stored, err := c.open(k.other(), r)
	if err != nil {
		return err
	}
	return refuseSame(k, secret, stored)
}

// Apply makes the changes in one transaction: removals first, then new secrets, so a
// change that swaps the keys is judged against what stays.
func (c *Credentials) Apply(ctx context.Context, envID string, chs CredentialChanges) error {
	if chs.Write.none() && chs.Read.none() {
		return nil
	}
	if err := chs.Validate(); err != nil {
		return err
	}
	subject, err := authz.Require(ctx, authz.PermEnvironmentsManage)
	if err != nil {
		return err
	}
	return db.Tx(ctx, c.db, func(ctx context.Context) error {
		// Under the row lock: the rule is judged on what the changes leave.
		if err := c.pairRule(ctx, subject.OrganizationID, envID, chs, true); err != nil {
			return err
		}
		for _, k := range []Kind{Write, Read} {
			if chs.of(k).Remove {
				if err := c.clear(ctx, k, envID); err != nil {
					return err
				}
			}
		}
		for _, k := range []Kind{Write, Read} {
			if s := chs.of(k).Secret; s != "" {
				if err := c.set(ctx, k, envID, s, chs.of(k.other()).Secret != ""); err != nil {
					return err
				}
			}
		}
		return nil
	})
}
