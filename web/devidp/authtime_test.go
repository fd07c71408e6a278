package devidp

import (
	"testing"
	"time"

	"github.com/coreos/go-oidc/v3/oidc"
	"github.com/stretchr/testify/require"
	"golang.org/x/oauth2"
)

// TestIDTokenSaysWhenTheUserSignedIn: the ID token carries auth_time, the second the
// user submitted the login form (a relying party counts only such a sign-in as fresh);
// with OmitAuthTime it carries none, as a provider that does not send it.
func TestIDTokenSaysWhenTheUserSignedIn(t *testing.T) {
	for _, omit := range []bool{false, true} {
		_, issuer := startIdPWith(t, "", func(c *Config) { c.OmitAuthTime = omit })
		r := newRP(t, issuer)
		verifier, nonce := oauth2.GenerateVerifier(), oauth2.GenerateVerifier()
		before := time.Now().Truncate(time.Second)
		code := r.login(issuer, oauth2.S256ChallengeOption(verifier), oidc.Nonce(nonce))
		after := time.Now()
		tok, err := r.conf.Exchange(r.ctx, code, oauth2.VerifierOption(verifier))
		require.NoError(t, err)
		raw, _ := tok.Extra("id_token").(string)
		idt, err := r.provider.Verifier(&oidc.Config{ClientID: clientID}).Verify(r.ctx, raw)
		require.NoError(t, err)
		var claims map[string]any
		require.NoError(t, idt.Claims(&claims))
		if omit {
			require.NotContains(t, claims, "auth_time", "OmitAuthTime leaves it out")
			continue
		}
		require.Contains(t, claims, "auth_time")
		at := time.Unix(int64(claims["auth_time"].(float64)), 0)
		require.False(t, at.Before(before), "auth_time %s is the login's, not earlier than %s", at, before)
		require.False(t, at.After(after), "auth_time %s is not later than the login", at)
	}
}
