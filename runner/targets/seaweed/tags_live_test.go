//go:build !fast

// Live: needs the pinned SeaweedFS (tools/seaweedfs, built into the user cache the first time: about ten CPU-minutes) and PostgreSQL.

package seaweed_test

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"encoding/json"
	"encoding/pem"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/go-jose/go-jose/v4"
	"github.com/go-jose/go-jose/v4/jwt"
	"github.com/stretchr/testify/require"

	"gantry/models/identity"
	"gantry/runner/targets/seaweed"
)

// flatTagsIssuer is an ES256 issuer over TLS that mints what Gantry's tokens do not carry: the
// session tags in a claim named "https://aws.amazon.com/tags/principal_tags", where SeaweedFS
// reads them (AWS and Gantry nest them: {"https://aws.amazon.com/tags": {"principal_tags": ...}}).
// It is the control that tells "SeaweedFS has no session tags" from "not in this claim".
type flatTagsIssuer struct {
	URL   string
	CAPEM []byte
	key   *ecdsa.PrivateKey
}

func newFlatTagsIssuer(t *testing.T) *flatTagsIssuer {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	require.NoError(t, err)
	f := &flatTagsIssuer{key: key}
	mux := http.NewServeMux()
	srv := httptest.NewUnstartedServer(mux)
	srv.StartTLS()
	t.Cleanup(srv.Close)
	f.URL = srv.URL
	f.CAPEM = pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw})
	discovery, err := json.Marshal(map[string]any{"issuer": f.URL, "jwks_uri": f.URL + "/jwks",
		"id_token_signing_alg_values_supported": []string{"ES256"}})
	require.NoError(t, err)
	jwks, err := json.Marshal(jose.JSONWebKeySet{Keys: []jose.JSONWebKey{{Key: &key.PublicKey, KeyID: "flat", Algorithm: "ES256", Use: "sig"}}})
	require.NoError(t, err)
	mux.HandleFunc("GET /.well-known/openid-configuration", func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write(discovery) })
	mux.HandleFunc("GET /jwks", func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write(jwks) })
	return f
}

func (f *flatTagsIssuer) mint(t *testing.T, ws string, tags map[string][]string) string {
	t.Helper()
	signer, err := jose.NewSigner(jose.SigningKey{Algorithm: jose.ES256, Key: jose.JSONWebKey{Key: f.key, KeyID: "flat"}},
		(&jose.SignerOptions{}).WithType("JWT"))
	require.NoError(t, err)
	now := time.Now()
	token, err := jwt.Signed(signer).Claims(jwt.Claims{Issuer: f.URL, Subject: "flat", Audience: jwt.Audience{seaweed.Audience},
		IssuedAt: jwt.NewNumericDate(now), Expiry: jwt.NewNumericDate(now.Add(5 * time.Minute))}).
		Claims(map[string]any{"gantry_ws": ws, "scope": "write", "https://aws.amazon.com/tags/principal_tags": tags}).Serialize()
	require.NoError(t, err)
	return token
}

// Session tags, the AWS way of letting a role policy see what an approval covered
// (docs/targets.md: deny s3:DeleteBucket unless aws:PrincipalTag/gantry_deletes is "true"), do
// not reach SeaweedFS's policies from Gantry's tokens, even with the tag key opted in
// (allowedPrincipalTagKeys): SeaweedFS reads them from the claim
// "https://aws.amazon.com/tags/principal_tags" only, and Gantry's tokens carry AWS's nested
// "https://aws.amazon.com/tags" → "principal_tags". So that role policy refuses every bucket
// deletion here, approved or not; the same policy works for a token carrying the flat claim. On
// this store the working rule is GantryRoles' (jwt:gantry_approved), tested in
// TestSTSExchangesGantryWorkloadTokens.
func TestSessionTagsOfGantryTokens(t *testing.T) {
	weed := weedBinary(t)
	iss := newGantryIssuer(t)
	flat := newFlatTagsIssuer(t)
	ws := "ws-" + randomID(t)
	buckets := []string{"arn:aws:s3:::gantry-${jwt:gantry_ws}-*", "arn:aws:s3:::gantry-${jwt:gantry_ws}-*/*"}
	awsPolicy := []seaweed.Statement{{Effect: "Allow", Actions: []string{"s3:*"}, Resources: buckets},
		{Effect: "Deny", Actions: []string{"s3:DeleteBucket"}, Resources: buckets,
			Conditions: seaweed.Conditions{"StringNotEquals": {"aws:PrincipalTag/" + identity.TagDeletes: {"true"}}}}}
	trust := seaweed.Conditions{"StringEquals": {"oidc:gantry_ws": {ws}, "oidc:scope": {"write"}}}
	tagKeys := []string{identity.TagDeletes, identity.TagReplaces, "gantry_ws"}
	var log lockedBuffer
	srv, err := seaweed.Start(t.Context(), seaweed.Options{Binary: weed, Log: &log, Dir: t.TempDir(),
		Providers: []seaweed.Provider{
			{Name: "gantry", Issuer: iss.URL, Audiences: []string{seaweed.Audience}, CAPEM: iss.CAPEM, PrincipalTagKeys: tagKeys},
			{Name: "flat", Issuer: flat.URL, Audiences: []string{seaweed.Audience}, CAPEM: flat.CAPEM, PrincipalTagKeys: tagKeys},
		},
		Roles: []seaweed.Role{
			{Name: "gantry-tags", Provider: "gantry", Trust: trust, Policy: awsPolicy},
			{Name: "flat-tags", Provider: "flat", Trust: trust, Policy: awsPolicy},
		}})
	require.NoError(t, err, "server log:\n%s", log.String())
	t.Cleanup(func() { require.NoError(t, srv.Stop()) })

	for _, c := range []struct {
		name, role, token, want string
	}{
		{"Gantry's apply token whose approval covered deletes (tag gantry_deletes=true, nested)", "gantry-tags",
			mint(t, iss.Issuer, claimsFor(ws, identity.PhaseApply, identity.ChangeCreate, identity.ChangeDelete)), "AccessDenied"},
		{"the flat claim saying gantry_deletes=false", "flat-tags",
			flat.mint(t, ws, map[string][]string{identity.TagDeletes: {"false"}}), "AccessDenied"},
		{"the flat claim saying gantry_deletes=true", "flat-tags",
			flat.mint(t, ws, map[string][]string{identity.TagDeletes: {"true"}}), "ok"},
	} {
		bucket := "gantry-" + ws + "-" + c.role + "-" + randomID(t)
		ops := []string{"create:" + bucket, "delete-bucket:" + bucket}
		steps := probe(t, phaseEnv(t, srv, srv.RoleARNs[c.role], c.token), ops...)
		require.Equal(t, "creds=ok create:"+bucket+"=ok delete-bucket:"+bucket+"="+c.want, results(steps, ops...), "%s: %v", c.name, steps)
	}
}
