package identity

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"errors"
	"fmt"
	"time"

	"github.com/go-jose/go-jose/v4"
	"gorm.io/gorm"

	"gantry/models/db"
	"gantry/models/keyring"
)

// rotationLockKey is the transaction-scoped advisory lock under which a replica decides
// to rotate and creates the key, so replicas racing past the rotation time create one
// key, not one each. (The one-active-key unique index enforces it as well.)
const rotationLockKey int64 = 0x67616e7472790101 // "gantry" + 0x0101

// retireGrace keeps a rotated key published a little longer than the longest token it
// can have signed: it covers clock skew between replicas, a replica that read the old
// key just before the rotation committed and signs just after, and verifiers' leeway.
const retireGrace = 5 * time.Minute

// workloadKey is one row of workload_keys.
type workloadKey struct {
	Kid         string `gorm:"primaryKey"`
	PublicJWK   string `gorm:"column:public_jwk;type:jsonb"`
	KeyID       string // keyring KEK that wrapped the data key
	WrappedKey  []byte
	Nonce       []byte
	Ciphertext  []byte // sealed PKCS#8 DER of the ES256 private key
	CreatedAt   time.Time
	RetireAfter *time.Time // nil while it signs; set when rotated out
}

func (workloadKey) TableName() string { return "workload_keys" }

// keyAAD binds a sealed private key to its row: a ciphertext copied onto another kid
// does not open.
func keyAAD(kid string) []byte { return []byte("workload_key:" + kid) }

// signingKey returns the key to sign with at now, rotating first if the active key is
// missing or older than the rotation period.
func (i *Issuer) signingKey(ctx context.Context, now time.Time) (workloadKey, error) {
	k, err := i.activeKey(ctx)
	if err == nil && !i.due(k, now) {
		return k, nil
	}
	if err != nil && !errors.Is(err, gorm.ErrRecordNotFound) {
		return workloadKey{}, fmt.Errorf("reading signing key: %w", err)
	}
	return i.rotate(ctx, now)
}

// activeKey reads the key that currently signs (gorm.ErrRecordNotFound when none).
func (i *Issuer) activeKey(ctx context.Context) (workloadKey, error) {
	var k workloadKey
	err := db.Conn(ctx, i.db).Where("retire_after IS NULL").Order("created_at DESC").Take(&k).Error
	return k, err
}

// due reports whether k is old enough to be replaced.
func (i *Issuer) due(k workloadKey, now time.Time) bool {
	return !now.Before(k.CreatedAt.Add(i.rotation))
}

// rotate creates a new signing key and retires the old one, unless another replica did
// so while this one waited for the lock.
func (i *Issuer) rotate(ctx context.Context, now time.Time) (workloadKey, error) {
	var out workloadKey
	err := db.Tx(ctx, i.db, func(ctx context.Context) error {
		conn := db.Conn(ctx, i.db)
		if err := conn.Exec("SELECT pg_advisory_xact_lock(?)", rotationLockKey).Error; err != nil {
			return fmt.Errorf("taking key rotation lock: %w", err)
		}
		// Read again under the lock: in READ COMMITTED this statement sees a key another
		// replica committed while we waited, and we use it instead of rotating twice.
		k, err := i.activeKey(ctx)
		if err == nil && !i.due(k, now) {
			out = k
			return nil
		}
		if err != nil && !errors.Is(err, gorm.ErrRecordNotFound) {
			return fmt.Errorf("reading signing key: %w", err)
		}
		// Tokens signed by the old key live at most MaxLifetime from now; keep its public
		// half published until then. Retire before inserting: the unique index allows
		// one active key at a time.
		if err := conn.Model(&workloadKey{}).Where("retire_after IS NULL").
			Update("retire_after", now.Add(MaxLifetime+retireGrace)).Error; err != nil {
			return fmt.Errorf("retiring signing key: %w", err)
		}
		// Keys whose every token has expired are no longer needed by anyone: delete them,
		// private halves included, rather than keep secrets around.
		if err := conn.Where("retire_after <= ?", now).Delete(&workloadKey{}).Error; err != nil {
			return fmt.Errorf("deleting retired signing keys: %w", err)
		}
		nk, err := i.newKey(now)
		if err != nil {
			return err
		}
		if err := conn.Create(&nk).Error; err != nil {
			return fmt.Errorf("storing signing key: %w", db.Translate(err))
		}
		out = nk
		return nil
	})
	return out, err
}

// newKey generates a P-256 key and seals its private half with the keyring.
func (i *Issuer) newKey(now time.Time) (workloadKey, error) {
	priv, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return workloadKey{}, fmt.Errorf("generating signing key: %w", err)
	}
	k := workloadKey{Kid: db.NewID("wk"), CreatedAt: now}
	pub, err := jose.JSONWebKey{Key: &priv.PublicKey, KeyID: k.Kid, Algorithm: string(jose.ES256), Use: "sig"}.MarshalJSON()
	if err != nil {
		return workloadKey{}, fmt.Errorf("encoding public key: %w", err)
	}
	k.PublicJWK = string(pub)
	der, err := x509.MarshalPKCS8PrivateKey(priv)
	if err != nil {
		return workloadKey{}, fmt.Errorf("encoding signing key: %w", err)
	}
	sealed, err := i.keys.Seal(der, keyAAD(k.Kid))
	clear(der)
	if err != nil {
		return workloadKey{}, fmt.Errorf("sealing signing key: %w", err)
	}
	k.KeyID, k.WrappedKey, k.Nonce, k.Ciphertext = sealed.KeyID, sealed.WrappedKey, sealed.Nonce, sealed.Ciphertext
	return k, nil
}

// privateKey opens k's sealed private key.
func (i *Issuer) privateKey(k workloadKey) (*ecdsa.PrivateKey, error) {
	der, err := i.keys.Open(keyring.Sealed{KeyID: k.KeyID, WrappedKey: k.WrappedKey, Nonce: k.Nonce, Ciphertext: k.Ciphertext}, keyAAD(k.Kid))
	if err != nil {
		return nil, fmt.Errorf("opening signing key %s: %w", k.Kid, err)
	}
	defer clear(der)
	parsed, err := x509.ParsePKCS8PrivateKey(der)
	if err != nil {
		return nil, fmt.Errorf("parsing signing key %s: %w", k.Kid, err)
	}
	priv, ok := parsed.(*ecdsa.PrivateKey)
	if !ok || priv.Curve != elliptic.P256() {
		return nil, fmt.Errorf("signing key %s is not a P-256 key", k.Kid)
	}
	return priv, nil
}

// publicKeys returns the published keys at now, newest first: the active one and the
// retired ones some unexpired token may still carry.
func (i *Issuer) publicKeys(ctx context.Context, now time.Time) ([]jose.JSONWebKey, error) {
	var rows []workloadKey
	if err := db.Conn(ctx, i.db).Select("kid", "public_jwk").
		Where("retire_after IS NULL OR retire_after > ?", now).
		Order("created_at DESC").Find(&rows).Error; err != nil {
		return nil, fmt.Errorf("reading signing keys: %w", err)
	}
	keys := make([]jose.JSONWebKey, 0, len(rows))
	for _, r := range rows {
		var k jose.JSONWebKey
		if err := k.UnmarshalJSON([]byte(r.PublicJWK)); err != nil {
			return nil, fmt.Errorf("decoding public key %s: %w", r.Kid, err)
		}
		if !k.IsPublic() || k.KeyID != r.Kid {
			return nil, fmt.Errorf("public key %s is malformed", r.Kid)
		}
		keys = append(keys, k)
	}
	return keys, nil
}
