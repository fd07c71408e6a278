package web_test

import (
	"crypto/tls"
	"crypto/x509"
	"net/http"
	"testing"
	"time"

	"github.com/coreos/go-oidc/v3/oidc"
	"github.com/stretchr/testify/require"

	"gantry/models/db/dbtest"
	"gantry/models/identity"
	"gantry/models/keyring"
	"gantry/web"
)

// The workload issuer served alone over TLS: a relying party that trusts the CA it made
// discovers it and verifies its tokens (the iss is the https URL); one that does not
// trust the CA cannot connect; nothing but the issuer's paths is served there.
func TestIssuerOverTLS(t *testing.T) {
	t.Parallel()
	l, err := web.ListenIssuerTLS("127.0.0.1:0")
	require.NoError(t, err)
	t.Cleanup(func() { l.Close(t.Context()) })
	keys, err := keyring.Parse(keyring.NewKeySpec("kek"))
	require.NoError(t, err)
	iss := identity.NewIssuer(dbtest.New(t), keys, l.URL, identity.Options{})
	mux := http.NewServeMux()
	mux.HandleFunc("GET /workload/.well-known/openid-configuration", func(w http.ResponseWriter, r *http.Request) { w.Write(iss.Discovery()) })
	mux.HandleFunc("GET /workload/jwks", func(w http.ResponseWriter, r *http.Request) {
		b, _ := iss.JWKS(r.Context())
		w.Write(b)
	})
	mux.HandleFunc("GET /", func(w http.ResponseWriter, r *http.Request) { w.Write([]byte("the portal")) })
	l.Serve(mux)

	pool := x509.NewCertPool()
	require.True(t, pool.AppendCertsFromPEM(l.CAPEM))
	client := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}}}
	provider, err := oidc.NewProvider(oidc.ClientContext(t.Context(), client), l.URL)
	require.NoError(t, err)
	token, _, err := iss.Mint(t.Context(), identity.Claims{OrganizationID: "o", EnvironmentID: "e", WorkspaceID: "w", RunID: "r", Phase: identity.PhasePlan})
	require.NoError(t, err)
	idt, err := provider.Verifier(&oidc.Config{ClientID: "sandbox"}).Verify(oidc.ClientContext(t.Context(), client), token)
	require.NoError(t, err)
	require.Equal(t, l.URL, idt.Issuer)

	res, err := client.Get(l.URL[:len(l.URL)-len(web.IssuerPath)] + "/")
	require.NoError(t, err)
	res.Body.Close()
	require.Equal(t, http.StatusNotFound, res.StatusCode, "only the issuer's paths")

	_, err = (&http.Client{Timeout: 5 * time.Second}).Get(l.URL + "/jwks")
	require.ErrorContains(t, err, "certificate", "a client that does not trust the CA cannot connect")
}
