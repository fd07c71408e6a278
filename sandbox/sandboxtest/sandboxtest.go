// Package sandboxtest runs a sandbox cloud for tests: an in-process workload identity issuer (OIDC
// discovery and JWKS served by an httptest server, tokens signed with an ES256 key) and a cloud
// that trusts it. Gantry's own tests can use it to mint tokens the way Gantry's issuer does.
package sandboxtest

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-jose/go-jose/v4"
	"github.com/go-jose/go-jose/v4/jwt"

	"gantry/sandbox/cloud"
)

// Issuer is a test workload identity issuer.
type Issuer struct {
	URL   string
	Key   *ecdsa.PrivateKey
	KeyID string
	srv   *httptest.Server
	down  atomic.Bool
	// introspection: OfferIntrospection was called; revoked are the tokens it answers
	// inactive; asked counts the questions.
	introspection atomic.Bool
	revoked       sync.Map
	asked         atomic.Int64
}

// NewIssuer starts an issuer at the root of a test server; it stops when the test ends.
func NewIssuer(t testing.TB) *Issuer {
	t.Helper()
	return NewIssuerAt(t, "")
}

// NewIssuerAt starts an issuer under a path prefix, as Gantry serves its own (/workload).
func NewIssuerAt(t testing.TB, prefix string) *Issuer {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	iss := &Issuer{Key: key, KeyID: "test-key-1"}
	mux := http.NewServeMux()
	iss.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if iss.down.Load() {
			http.Error(w, "issuer down", http.StatusServiceUnavailable)
			return
		}
		mux.ServeHTTP(w, r)
	}))
	iss.URL = iss.srv.URL + prefix
	mux.HandleFunc("GET "+prefix+"/.well-known/openid-configuration", func(w http.ResponseWriter, _ *http.Request) {
		doc := map[string]any{
			"issuer":                                iss.URL,
			"jwks_uri":                              iss.URL + "/jwks",
			"authorization_endpoint":                iss.URL + "/authorize",
			"token_endpoint":                        iss.URL + "/token",
			"response_types_supported":              []string{"id_token"},
			"subject_types_supported":               []string{"public"},
			"id_token_signing_alg_values_supported": []string{"ES256"},
		}
		if iss.introspection.Load() {
			doc["introspection_endpoint"] = iss.URL + "/introspect"
		}
		writeJSON(w, doc)
	})
	mux.HandleFunc("POST "+prefix+"/introspect", iss.introspect)
	mux.HandleFunc("GET "+prefix+"/jwks", func(w http.ResponseWriter, _ *http.Request) {
		writeJSON(w, jose.JSONWebKeySet{Keys: []jose.JSONWebKey{{Key: &iss.Key.PublicKey, KeyID: iss.KeyID, Algorithm: "ES256", Use: "sig"}}})
	})
	t.Cleanup(iss.srv.Close)
	return iss
}

// OfferIntrospection makes the issuer offer token introspection (RFC 7662) as Gantry's
// does: its discovery document names an introspection_endpoint, which answers active for
// every token the issuer signed until Revoke names it. Call it before NewCloud: a cloud
// reads discovery once.
func (i *Issuer) OfferIntrospection() { i.introspection.Store(true) }

// Revoke makes introspection answer token inactive from now on (its grant ended).
func (i *Issuer) Revoke(token string) { i.revoked.Store(token, true) }

// Introspections counts the introspection questions the issuer was asked.
func (i *Issuer) Introspections() int64 { return i.asked.Load() }

// introspect answers whether the POSTed token is one this issuer signed and has not
// revoked.
func (i *Issuer) introspect(w http.ResponseWriter, r *http.Request) {
	i.asked.Add(1)
	token := r.PostFormValue("token")
	if token == "" {
		http.Error(w, "no token", http.StatusBadRequest)
		return
	}
	_, revoked := i.revoked.Load(token)
	active := false
	if tok, err := jwt.ParseSigned(token, []jose.SignatureAlgorithm{jose.ES256}); err == nil && !revoked {
		var c jwt.Claims
		active = tok.Claims(&i.Key.PublicKey, &c) == nil
	}
	writeJSON(w, map[string]bool{"active": active})
}

// SetDown makes the issuer answer 503 to everything (true) or serve again (false), to test a
// cloud that starts before its issuer.
func (i *Issuer) SetDown(down bool) { i.down.Store(down) }

// Claims of a workload identity token, as Gantry's issuer (models/identity) mints them. Zero
// fields get defaults: Subject from the other claims (org:O:env:E:ws:W:run:R:phase:P), Audience
// "sandbox", Issuer the issuer's URL, Expiry in 10 minutes, Scope "read"; an apply token's
// PlanDigest and Lease default to TestPlanDigest and 1 (Gantry's apply tokens always carry
// them) unless NoPlan is set.
type Claims struct {
	Org, Env, Workspace, Run, Phase, Scope string
	// PlanDigest (gantry_plan) and Lease (gantry_lease) name the plan an apply token applies
	// and the attempt at it.
	PlanDigest string
	Lease      int64
	// NoPlan leaves an apply token without gantry_plan and gantry_lease (to test refusal).
	NoPlan bool
	// Window is a break-glass token's window (gantry_window); its subject then names it
	// instead of a run.
	Window                    string
	Subject, Audience, Issuer string
	Expiry                    time.Time
	// Key signs the token instead of the issuer's key (to test a forged signature).
	Key *ecdsa.PrivateKey
}

// Mint signs a workload identity token.
func (i *Issuer) Mint(t testing.TB, c Claims) string {
	t.Helper()
	if c.Subject == "" {
		job := ":run:" + c.Run
		if c.Window != "" {
			job = ":window:" + c.Window
		}
		c.Subject = "org:" + c.Org + ":env:" + c.Env + ":ws:" + c.Workspace + job + ":phase:" + c.Phase
	}
	if c.Audience == "" {
		c.Audience = "sandbox"
	}
	if c.Issuer == "" {
		c.Issuer = i.URL
	}
	if c.Expiry.IsZero() {
		c.Expiry = time.Now().Add(10 * time.Minute)
	}
	if c.Scope == "" {
		c.Scope = "read"
	}
	if c.Phase == "apply" && !c.NoPlan {
		if c.PlanDigest == "" {
			c.PlanDigest = TestPlanDigest
		}
		if c.Lease == 0 {
			c.Lease = 1
		}
	}
	key := i.Key
	if c.Key != nil {
		key = c.Key
	}
	signer, err := jose.NewSigner(jose.SigningKey{Algorithm: jose.ES256, Key: jose.JSONWebKey{Key: key, KeyID: i.KeyID}}, (&jose.SignerOptions{}).WithType("JWT"))
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	tok, err := jwt.Signed(signer).Claims(jwt.Claims{
		Issuer: c.Issuer, Subject: c.Subject, Audience: jwt.Audience{c.Audience},
		IssuedAt: jwt.NewNumericDate(now), NotBefore: jwt.NewNumericDate(now.Add(-time.Minute)), Expiry: jwt.NewNumericDate(c.Expiry),
		ID: rand.Text(),
	}).Claims(map[string]any{
		"gantry_org": c.Org, "gantry_env": c.Env, "gantry_ws": c.Workspace,
		"gantry_run": c.Run, "gantry_window": c.Window, "gantry_phase": c.Phase, "scope": c.Scope,
		"gantry_plan": c.PlanDigest, "gantry_lease": c.Lease,
	}).Serialize()
	if err != nil {
		t.Fatal(err)
	}
	return tok
}

// Token mints a token for a workspace: scope "write" gets phase apply, "read" phase plan.
func (i *Issuer) Token(t testing.TB, org, env, ws, scope string) string {
	t.Helper()
	phase := "plan"
	if scope == "write" {
		phase = "apply"
	}
	return i.Mint(t, Claims{Org: org, Env: env, Workspace: ws, Run: "run-1", Phase: phase, Scope: scope})
}

// TestPlanDigest is the plan an apply token of Mint applies unless it names another.
const TestPlanDigest = "sha256:7e57000000000000000000000000000000000000000000000000000000000000"

// Cloud is a running sandbox cloud.
type Cloud struct {
	*cloud.Server
	URL        string
	DataDir    string
	AdminToken string
}

// NewCloud starts a sandbox cloud trusting the issuer, with a fresh data directory and an admin
// token; it stops when the test ends.
func NewCloud(t testing.TB, iss *Issuer) *Cloud {
	t.Helper()
	return NewCloudAt(t, iss, t.TempDir())
}

// NewCloudAt starts a sandbox cloud on an existing data directory.
func NewCloudAt(t testing.TB, iss *Issuer, dataDir string) *Cloud {
	t.Helper()
	c := &Cloud{DataDir: dataDir, AdminToken: "admin-" + rand.Text()}
	srv, err := cloud.New(context.Background(), cloud.Config{
		DataDir: dataDir, Issuer: iss.URL, AdminToken: c.AdminToken,
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
	})
	if err != nil {
		t.Fatal(err)
	}
	c.Server = srv
	hs := httptest.NewServer(srv)
	t.Cleanup(hs.Close)
	c.URL = hs.URL
	return c
}

func writeJSON(w http.ResponseWriter, v any) {
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(v)
}
