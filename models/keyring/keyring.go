// Package keyring is Gantry's envelope encryption: every artifact (config bundle, plan
// file, plan JSON, logs, state version) is encrypted with its own random AES-256-GCM
// data key, and that data key is stored wrapped by a key-encryption key (KEK) named by a
// key id. Rotating the KEK re-wraps data keys without touching the artifacts.
package keyring

import (
	"crypto/aes"
	"crypto/cipher"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"regexp"
	"strings"
)

// Sealed is an encrypted artifact as stored.
type Sealed struct {
	KeyID      string // which KEK wrapped the data key
	WrappedKey []byte // nonce || AES-GCM(KEK, data key)
	Nonce      []byte
	Ciphertext []byte // AES-GCM(data key, plaintext) with the caller's associated data
}

// Keyring holds the key-encryption keys; the first one configured seals new data.
type Keyring struct {
	current string
	keks    map[string]cipher.AEAD
}

var keyIDPattern = regexp.MustCompile(`^[A-Za-z0-9_.-]{1,64}$`)

// Parse reads a key specification "id1:base64key[,id2:base64key...]" (each key 32
// random bytes, standard base64). The first key seals; the others still open and are
// re-wrapped by Rotate. The specification is a secret: pass it in the environment.
func Parse(spec string) (*Keyring, error) {
	k := &Keyring{keks: map[string]cipher.AEAD{}}
	for i, part := range strings.Split(strings.TrimSpace(spec), ",") {
		id, b64, ok := strings.Cut(strings.TrimSpace(part), ":")
		if !ok || !keyIDPattern.MatchString(id) {
			return nil, fmt.Errorf("key %d: want id:base64key with an id of letters, digits, '.', '_' or '-'", i+1)
		}
		raw, err := base64.StdEncoding.DecodeString(b64)
		if err != nil || len(raw) != 32 {
			return nil, fmt.Errorf("key %q: want 32 bytes in standard base64", id)
		}
		if _, dup := k.keks[id]; dup {
			return nil, fmt.Errorf("key %q is listed twice", id)
		}
		aead, err := newGCM(raw)
		if err != nil {
			return nil, err
		}
		k.keks[id] = aead
		if i == 0 {
			k.current = id
		}
	}
	return k, nil
}

// NewKeySpec returns a specification with one fresh random key named id.
func NewKeySpec(id string) string {
	raw := make([]byte, 32)
	mustRandom(raw)
	return id + ":" + base64.StdEncoding.EncodeToString(raw)
}

// CurrentKeyID is the id new data is sealed with.
func (k *Keyring) CurrentKeyID() string { return k.current }

func newGCM(key []byte) (cipher.AEAD, error) {
	block, err := aes.NewCipher(key)
	if err != nil {
		return nil, fmt.Errorf("creating cipher: %w", err)
	}
	return cipher.NewGCM(block)
}

func mustRandom(b []byte) {
	if _, err := rand.Read(b); err != nil {
		panic(fmt.Sprintf("reading random bytes: %v", err))
	}
}

// Seal encrypts plaintext under a fresh data key. aad binds the ciphertext to where it
// is stored (e.g. the artifact id): opening it under other aad fails, so sealed blobs
// cannot be swapped between rows.
func (k *Keyring) Seal(plaintext, aad []byte) (Sealed, error) {
	dataKey := make([]byte, 32)
	mustRandom(dataKey)
	aead, err := newGCM(dataKey)
	if err != nil {
		return Sealed{}, err
	}
	nonce := make([]byte, aead.NonceSize())
	mustRandom(nonce)
	wrapped, err := k.wrap(k.current, dataKey)
	if err != nil {
		return Sealed{}, err
	}
	return Sealed{KeyID: k.current, WrappedKey: wrapped, Nonce: nonce, Ciphertext: aead.Seal(nil, nonce, plaintext, aad)}, nil
}

// ErrUnknownKey means the sealed data names a KEK this keyring does not hold.
var ErrUnknownKey = errors.New("unknown key id")

// Open decrypts s, which must have been sealed with the same aad.
func (k *Keyring) Open(s Sealed, aad []byte) ([]byte, error) {
	dataKey, err := k.unwrap(s)
	if err != nil {
		return nil, err
	}
	aead, err := newGCM(dataKey)
	if err != nil {
		return nil, err
	}
	plain, err := aead.Open(nil, s.Nonce, s.Ciphertext, aad)
	if err != nil {
		return nil, fmt.Errorf("decrypting artifact: %w", err)
	}
	return plain, nil
}

// Rewrap re-wraps s's data key under the current KEK; the ciphertext is unchanged.
func (k *Keyring) Rewrap(s Sealed) (Sealed, error) {
	if s.KeyID == k.current {
		return s, nil
	}
	dataKey, err := k.unwrap(s)
	if err != nil {
		return Sealed{}, err
	}
	wrapped, err := k.wrap(k.current, dataKey)
	if err != nil {
		return Sealed{}, err
	}
	s.KeyID, s.WrappedKey = k.current, wrapped
	return s, nil
}

func (k *Keyring) wrap(id string, dataKey []byte) ([]byte, error) {
	kek := k.keks[id]
	nonce := make([]byte, kek.NonceSize())
	mustRandom(nonce)
	// The key id is authenticated too: a wrapped key cannot be relabelled.
	return kek.Seal(nonce, nonce, dataKey, []byte("gantry-dek:"+id)), nil
}

func (k *Keyring) unwrap(s Sealed) ([]byte, error) {
	kek, ok := k.keks[s.KeyID]
	if !ok {
		return nil, fmt.Errorf("key %q: %w", s.KeyID, ErrUnknownKey)
	}
	ns := kek.NonceSize()
	if len(s.WrappedKey) < ns {
		return nil, errors.New("wrapped data key is truncated")
	}
	dataKey, err := kek.Open(nil, s.WrappedKey[:ns], s.WrappedKey[ns:], []byte("gantry-dek:"+s.KeyID))
	if err != nil {
		return nil, fmt.Errorf("unwrapping data key: %w", err)
	}
	return dataKey, nil
}

// NewDataKey returns a fresh data key and its wrapped form (KeyID and WrappedKey set),
// for data sealed in pieces rather than in one Seal: a long export is encrypted chunk
// by chunk under one data key, so memory holds one chunk.
func (k *Keyring) NewDataKey() ([]byte, Sealed, error) {
	dataKey := make([]byte, 32)
	mustRandom(dataKey)
	wrapped, err := k.wrap(k.current, dataKey)
	if err != nil {
		return nil, Sealed{}, err
	}
	return dataKey, Sealed{KeyID: k.current, WrappedKey: wrapped}, nil
}

// DataKey unwraps the data key of s (its KeyID and WrappedKey).
func (k *Keyring) DataKey(s Sealed) ([]byte, error) { return k.unwrap(s) }

// NewAEAD returns AES-256-GCM under a data key.
func NewAEAD(dataKey []byte) (cipher.AEAD, error) { return newGCM(dataKey) }
