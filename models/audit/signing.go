package audit

import (
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"time"

	"gorm.io/gorm"
	"gorm.io/gorm/clause"

	"gantry/models/audit/exportfile"
	"gantry/models/authz"
	"gantry/models/db"
	"gantry/models/keyring"
)

// signingKey is one row of audit_signing_keys.
type signingKey struct {
	Kid            string `gorm:"primaryKey"`
	OrganizationID string
	PublicKey      []byte
	Fingerprint    string
	KeyID          string
	WrappedKey     []byte
	Nonce          []byte
	Ciphertext     []byte
	CreatedAt      time.Time
	RetiredAt      *time.Time
}

func (signingKey) TableName() string { return "audit_signing_keys" }

func signingAAD(kid, orgID string) []byte { return []byte("audit_signing_key:" + kid + ":" + orgID) }

func (k signingKey) published() exportfile.PublicKey {
	return exportfile.PublicKey{KeyID: k.Kid, PublicKey: base64.StdEncoding.EncodeToString(k.PublicKey), Fingerprint: k.Fingerprint,
		CreatedAt: k.CreatedAt.UTC(), RetiredAt: k.RetiredAt}
}

// Signer is an organization's current signing key, able to sign (exportfile.Signer).
type Signer struct {
	kid  string
	priv ed25519.PrivateKey
}

func (s Signer) KeyID() string                       { return s.kid }
func (s Signer) Public() ed25519.PublicKey           { return s.priv.Public().(ed25519.PublicKey) }
func (s Signer) Sign(message []byte) ([]byte, error) { return ed25519.Sign(s.priv, message), nil }
func (s Signer) Fingerprint() string                 { return exportfile.Fingerprint(s.Public()) }
func (s Signer) PublicKey() exportfile.PublicKey {
	return exportfile.PublicKey{KeyID: s.kid, PublicKey: base64.StdEncoding.EncodeToString(s.Public()), Fingerprint: s.Fingerprint()}
}

// Keys keeps the organizations' Ed25519 signing keys, private halves sealed by the
// keyring. One key per organization signs; rotated keys stay published.
type Keys struct {
	db   *gorm.DB
	keys *keyring.Keyring
}

// NewKeys returns the signing key store.
func NewKeys(gdb *gorm.DB, keys *keyring.Keyring) *Keys { return &Keys{db: gdb, keys: keys} }

// Signer returns organization orgID's current signing key, creating it on first use
// (replicas racing to create it agree on one: the unique index lets one row win).
func (k *Keys) Signer(ctx context.Context, orgID string) (Signer, error) {
	for range 2 {
		var rows []signingKey
		if err := db.Conn(ctx, k.db).Where("organization_id = ? AND retired_at IS NULL", orgID).Limit(1).Find(&rows).Error; err != nil {
			return Signer{}, fmt.Errorf("reading the signing key: %w", err)
		}
		if len(rows) == 1 {
			return k.open(rows[0])
		}
		if _, err := k.create(ctx, orgID, true); err != nil {
			return Signer{}, err
		}
	}
	return Signer{}, errors.New("no signing key could be created")
}

func (k *Keys) open(row signingKey) (Signer, error) {
	seed, err := k.keys.Open(keyring.Sealed{KeyID: row.KeyID, WrappedKey: row.WrappedKey, Nonce: row.Nonce, Ciphertext: row.Ciphertext},
		signingAAD(row.Kid, row.OrganizationID))
	if err != nil {
		return Signer{}, fmt.Errorf("opening signing key %s: %w", row.Kid, err)
	}
	if len(seed) != ed25519.SeedSize {
		return Signer{}, fmt.Errorf("signing key %s is not an Ed25519 seed", row.Kid)
	}
	return Signer{kid: row.Kid, priv: ed25519.NewKeyFromSeed(seed)}, nil
}

// create stores a new signing key for orgID; when another current key exists already
// (a replica won the race) it stores nothing if racing, and fails otherwise.
func (k *Keys) create(ctx context.Context, orgID string, racing bool) (signingKey, error) {
	pub, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		return signingKey{}, fmt.Errorf("generating a signing key: %w", err)
	}
	sum := sha256.Sum256(pub)
	kid := "audit-" + hex.EncodeToString(sum[:6])
	sealed, err := k.keys.Seal(priv.Seed(), signingAAD(kid, orgID))
	if err != nil {
		return signingKey{}, err
	}
	row := signingKey{Kid: kid, OrganizationID: orgID, PublicKey: pub, Fingerprint: exportfile.Fingerprint(pub), KeyID: sealed.KeyID,
		WrappedKey: sealed.WrappedKey, Nonce: sealed.Nonce, Ciphertext: sealed.Ciphertext, CreatedAt: time.Now().UTC()}
	tx := db.Conn(ctx, k.db)
	if racing {
		tx = tx.Clauses(clause.OnConflict{DoNothing: true})
	}
	if err := tx.Create(&row).Error; err != nil {
		return signingKey{}, fmt.Errorf("storing the signing key: %w", db.Translate(err))
	}
	return row, nil
}

// Published returns the subject's organization's public keys, current first, then
// the retired ones newest first: what its members (and auditors they hand them to)
// verify exports and attestations with.
func (k *Keys) Published(ctx context.Context) (exportfile.KeySet, error) {
	subject, err := authz.Require(ctx, authz.PermOrgRead)
	if err != nil {
		return exportfile.KeySet{}, err
	}
	if _, err := k.Signer(ctx, subject.OrganizationID); err != nil { // an organization always has a key to show
		return exportfile.KeySet{}, err
	}
	return k.published(ctx, subject.OrganizationID)
}

func (k *Keys) published(ctx context.Context, orgID string) (exportfile.KeySet, error) {
	var rows []signingKey
	if err := db.Conn(ctx, k.db).Where("organization_id = ?", orgID).Order("retired_at DESC NULLS FIRST, created_at DESC").Find(&rows).Error; err != nil {
		return exportfile.KeySet{}, fmt.Errorf("reading signing keys: %w", err)
	}
	set := exportfile.KeySet{Keys: []exportfile.PublicKey{}}
	for _, r := range rows {
		set.Keys = append(set.Keys, r.published())
	}
	return set, nil
}

// OrganizationKeys is the operator's view for `gantry keys list`: every organization's
// keys, by organization id. It checks no permission (it runs with the database URL).
func (k *Keys) OrganizationKeys(ctx context.Context) (map[string]exportfile.KeySet, error) {
	var rows []signingKey
	if err := db.Conn(ctx, k.db).Order("organization_id, retired_at DESC NULLS FIRST, created_at DESC").Find(&rows).Error; err != nil {
		return nil, fmt.Errorf("reading signing keys: %w", err)
	}
	out := map[string]exportfile.KeySet{}
	for _, r := range rows {
		set := out[r.OrganizationID]
		set.Keys = append(set.Keys, r.published())
		out[r.OrganizationID] = set
	}
	return out, nil
}

// RotateSigning retires every organization's current signing key and gives it a new
// one (organizations without a key get theirs on first use). Retired keys stay
// published: what they signed still verifies. It is part of `gantry keys rotate`.
func (k *Keys) RotateSigning(ctx context.Context) (int, error) {
	n := 0
	err := db.Tx(ctx, k.db, func(ctx context.Context) error {
		var current []signingKey
		if err := db.Conn(ctx, k.db).Clauses(clause.Locking{Strength: "UPDATE"}).Where("retired_at IS NULL").Find(&current).Error; err != nil {
			return fmt.Errorf("reading signing keys: %w", err)
		}
		for _, row := range current {
			if err := db.Conn(ctx, k.db).Model(&signingKey{}).Where("kid = ?", row.Kid).Update("retired_at", time.Now().UTC()).Error; err != nil {
				return fmt.Errorf("retiring signing key %s: %w", row.Kid, err)
			}
			if _, err := k.create(ctx, row.OrganizationID, false); err != nil {
				return err
			}
			n++
		}
		return nil
	})
	return n, err
}

// RewrapSigningKeys re-wraps the data keys sealing the signing keys under keys' current
// key-encryption key (the sealed seeds are untouched): the signing-key half of
// `gantry keys rotate`.
func RewrapSigningKeys(ctx context.Context, gdb *gorm.DB, keys *keyring.Keyring) (int, error) {
	n := 0
	err := db.Tx(ctx, gdb, func(ctx context.Context) error {
		conn := db.Conn(ctx, gdb)
		var rows []signingKey
		if err := conn.Clauses(clause.Locking{Strength: "UPDATE"}).Where("key_id <> ?", keys.CurrentKeyID()).Find(&rows).Error; err != nil {
			return fmt.Errorf("reading signing keys: %w", err)
		}
		for _, r := range rows {
			re, err := keys.Rewrap(keyring.Sealed{KeyID: r.KeyID, WrappedKey: r.WrappedKey})
			if err != nil {
				return fmt.Errorf("re-wrapping signing key %s: %w", r.Kid, err)
			}
			if err := conn.Model(&signingKey{}).Where("kid = ?", r.Kid).Updates(map[string]any{"key_id": re.KeyID, "wrapped_key": re.WrappedKey}).Error; err != nil {
				return fmt.Errorf("saving signing key %s: %w", r.Kid, err)
			}
			n++
		}
		return nil
	})
	return n, err
}
