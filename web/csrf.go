package web

import (
	"crypto/rand"
	"crypto/subtle"
	"encoding/base64"
)

// Pages carry the session's CSRF token masked with a fresh one-time pad (the masked
// form is base64url(pad || pad XOR token)), so the same token reads differently in
// every response. Pages are gzip-compressed and some reflect what was asked (a search
// text): a fixed secret beside reflected text would let an observer of response sizes
// guess it byte by byte (BREACH). The check accepts the masked form and the plain one.

// maskCSRF returns token under a fresh pad.
func maskCSRF(token string) string {
	pad := make([]byte, len(token))
	_, _ = rand.Read(pad) // crypto/rand never fails on Linux (Go 1.24+: it panics instead)
	out := make([]byte, 2*len(token))
	copy(out, pad)
	for i := range len(token) {
		out[len(token)+i] = pad[i] ^ token[i]
	}
	return base64.RawURLEncoding.EncodeToString(out)
}

// csrfMatches reports whether sent carries token, masked or plain, in constant time
// for a given length.
func csrfMatches(sent, token string) bool {
	if token == "" || sent == "" {
		return false
	}
	if subtle.ConstantTimeCompare([]byte(sent), []byte(token)) == 1 {
		return true
	}
	b, err := base64.RawURLEncoding.DecodeString(sent)
	if err != nil || len(b) != 2*len(token) {
		return false
	}
	unmasked := make([]byte, len(token))
	for i := range len(token) {
		unmasked[i] = b[i] ^ b[len(token)+i]
	}
	return subtle.ConstantTimeCompare(unmasked, []byte(token)) == 1
}
