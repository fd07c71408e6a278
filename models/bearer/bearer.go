// Package bearer is the one home of Gantry's bearer secrets (API tokens, SCIM tokens):
// how one is made, written and checked. A token reads <prefix><id>.<secret>; only the
// sha256 of the secret is stored, and a check costs the same whether the token exists
// or not, so a guess learns nothing from the time it takes.
package bearer

import (
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"fmt"
	"strings"
)

// maxLength bounds a token read from a request: real ones are under 100 characters.
const maxLength = 200

// New makes a secret: 32 random bytes, base64url, and the sha256 to store.
func New() (secret string, hash []byte, err error) {
	raw := make([]byte, 32)
	if _, err := rand.Read(raw); err != nil {
		return "", nil, fmt.Errorf("making a secret: %w", err)
	}
	secret = base64.RawURLEncoding.EncodeToString(raw)
	sum := sha256.Sum256([]byte(secret))
	return secret, sum[:], nil
}

// Parse splits a token written with prefix into its id part and its secret; ok is false
// for anything else (no prefix, no dot, an empty id, too long).
func Parse(token, prefix string) (idPart, secret string, ok bool) {
	rest, hasPrefix := strings.CutPrefix(token, prefix)
	idPart, secret, found := strings.Cut(rest, ".")
	if !hasPrefix || !found || idPart == "" || len(token) > maxLength {
		return "", "", false
	}
	return idPart, secret, true
}

// dummyHash stands in for the stored hash of a token that does not exist.
var dummyHash = sha256.Sum256([]byte("gantry-no-such-token"))

// Matches reports whether secret is the one whose sha256 is stored, in constant time;
// a stored hash that is missing (an unknown token) is compared against a dummy, and
// never matches.
func Matches(secret string, stored []byte) bool {
	want, known := dummyHash[:], len(stored) == sha256.Size
	if known {
		want = stored
	}
	got := sha256.Sum256([]byte(secret))
	return subtle.ConstantTimeCompare(got[:], want) == 1 && known
}
