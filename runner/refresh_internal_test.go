package runner

import (
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"gantry/models/db/dbtest"
	"gantry/models/identity"
	"gantry/models/keyring"
	"gantry/models/run"
)

// TestRefreshableOnlyForWorkloadTokens: a phase's workload token gets its expiry and a
// Refresh minting the next token of the same run and phase through the same issuer; an
// environment's static credential gets neither, so it is never replaced.
func TestRefreshableOnlyForWorkloadTokens(t *testing.T) {
	t.Parallel()
	keys, err := keyring.Parse(keyring.NewKeySpec("kek-test"))
	require.NoError(t, err)
	now := time.Now()
	clock := func() time.Time { return now }
	issuer := identity.NewIssuer(dbtest.New(t), keys, "https://gantry.test/workload", identity.Options{Lifetime: time.Minute, Now: clock})
	j := jobCredentials{identity: issuer}
	r := run.Run{ID: "run-1", OrganizationID: "org-1", EnvironmentID: "env-1", WorkspaceID: "ws-1",
		PlanDigest: "sha256:" + strings.Repeat("cd", 32)}
	claims := workloadClaims(r, identity.PhaseApply, run.Lease{RunID: r.ID, Phase: run.JobApply, Token: 3})

	static := j.refreshable(Credentials{StateUsername: "u", StatePassword: "p", CloudToken: "sbxk-static-key"}, claims)
	require.Nil(t, static.Refresh)
	require.True(t, static.CloudExpires.IsZero())
	require.Equal(t, "sbxk-static-key", static.CloudToken)

	token, expires, err := issuer.Mint(t.Context(), claims)
	require.NoError(t, err)
	c := j.refreshable(Credentials{StateUsername: "u", StatePassword: "p", CloudToken: token}, claims)
	require.Equal(t, token, c.CloudToken)
	require.True(t, expires.Equal(c.CloudExpires))
	require.NotNil(t, c.Refresh)

	now = now.Add(40 * time.Second)
	next, nextExpires, err := c.Refresh(t.Context())
	require.NoError(t, err)
	require.NotEqual(t, token, next)
	require.True(t, nextExpires.After(expires), "the next token outlives the first")
	first, err := issuer.Verify(t.Context(), token)
	require.NoError(t, err)
	second, err := issuer.Verify(t.Context(), next)
	require.NoError(t, err)
	require.Equal(t, first, second, "the same claims")
	require.Equal(t, claims, second, "the plan digest and the lease too")
	require.Equal(t, identity.ScopeWrite, second.Phase.Scope())
}
