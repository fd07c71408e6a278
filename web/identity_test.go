package web_test

import (
	"testing"

	"github.com/coreos/go-oidc/v3/oidc"
	"github.com/stretchr/testify/require"

	"gantry/cmd/gantry/webtest"
	"gantry/models/identity"
)

// TestWorkloadIssuerIsDiscoverable: a cloud that trusts Gantry discovers the workload
// issuer over HTTP and verifies a job token against the published keys.
func TestWorkloadIssuerIsDiscoverable(t *testing.T) {
	t.Parallel()
	app := webtest.Start(t)
	token, _, err := app.System.Identity.Mint(t.Context(), identity.Claims{OrganizationID: app.Orgs["acme"], EnvironmentID: "env-1",
		WorkspaceID: "ws-1", RunID: "run-1", Phase: identity.PhasePlan})
	require.NoError(t, err)
	provider, err := oidc.NewProvider(t.Context(), app.URL+"/workload")
	require.NoError(t, err)
	idToken, err := provider.Verifier(&oidc.Config{ClientID: "sandbox"}).Verify(t.Context(), token)
	require.NoError(t, err)
	var claims struct {
		Scope string `json:"scope"`
		Run   string `json:"gantry_run"`
	}
	require.NoError(t, idToken.Claims(&claims))
	require.Equal(t, "read", claims.Scope)
	require.Equal(t, "run-1", claims.Run)
}
