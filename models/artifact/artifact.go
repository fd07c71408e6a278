// Package artifact stores run artifacts (config bundles, plan files, plan JSON, logs,
// state versions) encrypted at rest with the keyring's envelope scheme. The sha256 of
// the plaintext is kept in clear: it is the evidence approvals bind to.
package artifact

import (
	"context"
	"fmt"
	"time"

	"gorm.io/gorm"

	"gantry/models/bundle"
	"gantry/models/db"
	"gantry/models/keyring"
)

// Kind names what an artifact holds.
type Kind string

const (
	ConfigBundle Kind = "config_bundle"
	PlanFile     Kind = "plan_file"
	PlanJSON     Kind = "plan_json"
	PlanLog      Kind = "plan_log"
	ApplyLog     Kind = "apply_log"
	VerifyLog    Kind = "verify_log"
	State        Kind = "state"
)

// Artifact is one row of artifacts.
type Artifact struct {
	ID             string
	OrganizationID string
	WorkspaceID    string
	Kind           Kind
	SHA256         string `gorm:"column:sha256"`
	Size           int64
	KeyID          string
	WrappedKey     []byte
	Nonce          []byte
	Ciphertext     []byte
	CreatedAt      time.Time
}

// Store writes and reads artifacts.
type Store struct {
	db   *gorm.DB
	keys *keyring.Keyring
}

// NewStore returns the artifact store.
func NewStore(gdb *gorm.DB, keys *keyring.Keyring) *Store { return &Store{db: gdb, keys: keys} }

// aad binds a ciphertext to its row: id, owner and kind.
func aad(a Artifact) []byte {
	return []byte("artifact:" + a.ID + ":" + a.OrganizationID + ":" + a.WorkspaceID + ":" + string(a.Kind))
}

// Put encrypts data and stores it (in the transaction carried by ctx, if any).
func (s *Store) Put(ctx context.Context, orgID, workspaceID string, kind Kind, data []byte) (Artifact, error) {
	a := Artifact{ID: db.NewID("art"), OrganizationID: orgID, WorkspaceID: workspaceID, Kind: kind,
		SHA256: bundle.Digest(data), Size: int64(len(data))}
	sealed, err := s.keys.Seal(data, aad(a))
	if err != nil {
		return Artifact{}, fmt.Errorf("sealing %s: %w", kind, err)
	}
	a.KeyID, a.WrappedKey, a.Nonce, a.Ciphertext = sealed.KeyID, sealed.WrappedKey, sealed.Nonce, sealed.Ciphertext
	if err := db.Conn(ctx, s.db).Create(&a).Error; err != nil {
		return Artifact{}, fmt.Errorf("storing %s: %w", kind, err)
	}
	return a, nil
}

// Get decrypts artifact id of organization orgID and checks it against its recorded
// digest, so a tampered or swapped row is an error, never silently other bytes.
func (s *Store) Get(ctx context.Context, orgID, id string) ([]byte, Artifact, error) {
	var a Artifact
	if err := db.Conn(ctx, s.db).Where("organization_id = ? AND id = ?", orgID, id).Take(&a).Error; err != nil {
		return nil, Artifact{}, fmt.Errorf("reading artifact %s: %w", id, db.Translate(err))
	}
	data, err := s.keys.Open(keyring.Sealed{KeyID: a.KeyID, WrappedKey: a.WrappedKey, Nonce: a.Nonce, Ciphertext: a.Ciphertext}, aad(a))
	if err != nil {
		return nil, Artifact{}, fmt.Errorf("opening artifact %s: %w", id, err)
	}
	if got := bundle.Digest(data); got != a.SHA256 {
		return nil, Artifact{}, fmt.Errorf("artifact %s digest is %s, recorded %s", id, got, a.SHA256)
	}
	return data, a, nil
}

// Digest returns the recorded digest of artifact id without decrypting it.
func (s *Store) Digest(ctx context.Context, orgID, id string) (string, error) {
	var a Artifact
	if err := db.Conn(ctx, s.db).Select("sha256").Where("organization_id = ? AND id = ?", orgID, id).Take(&a).Error; err != nil {
		return "", fmt.Errorf("reading artifact %s: %w", id, db.Translate(err))
	}
	return a.SHA256, nil
}
