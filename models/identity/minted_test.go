package identity_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"gantry/models/db/dbtest"
	"gantry/models/identity"
)

// TestMintedExpiry: a token the issuer minted reads back with its expiry (what a
// runner refreshing it needs); another issuer's token, a static key or garbage is not
// the issuer's.
func TestMintedExpiry(t *testing.T) {
	t.Parallel()
	gdb := dbtest.New(t)
	keys := newKeyring(t)
	iss := identity.NewIssuer(gdb, keys, "http://127.0.0.1:1/workload", identity.Options{Lifetime: 3 * time.Second})
	tok, expires, err := iss.Mint(t.Context(), claimsFor(identity.PhaseApply))
	require.NoError(t, err)
	got, ok := iss.MintedExpiry(tok)
	require.True(t, ok)
	require.True(t, got.Equal(expires), "%s != %s", got, expires)

	other := identity.NewIssuer(gdb, keys, "http://127.0.0.1:2/workload", identity.Options{})
	foreign, _, err := other.Mint(t.Context(), claimsFor(identity.PhaseApply))
	require.NoError(t, err)
	for _, s := range []string{foreign, "sbxk-0123456789abcdef", "", "a.b.c"} {
		_, ok := iss.MintedExpiry(s)
		require.False(t, ok, "%q", s)
	}
}
