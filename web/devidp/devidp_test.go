package devidp

import (
	"context"
	"crypto/rsa"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"net/url"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/coreos/go-oidc/v3/oidc"
	"github.com/go-jose/go-jose/v4"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/oauth2"
)

const (
	clientID     = "gantry-web"
	clientSecret = "dev-secret"
	// Registered but never served: the RP's client stops before following it.
	redirectURI   = "http://127.0.0.1:1/auth/callback"
	postLogoutURI = "http://127.0.0.1:1/signed-out"
)

var alice = User{Subject: "alice-owner", Email: "alice@acme.test", Name: "Alice Owner", Password: "alice-pw", Note: "Acme Corp — owner",
	Groups: []string{"platform-leads", "on-call"}}

// startIdP serves a provider on a real loopback listener, because the issuer
// must equal the served URL.
func startIdP(t *testing.T, path string, extra ...Client) (*Provider, string) {
	t.Helper()
	return startIdPWith(t, path, func(*Config) {}, extra...)
}

// startIdPWith is startIdP with edit applied to the provider's config.
func startIdPWith(t *testing.T, path string, edit func(*Config), extra ...Client) (*Provider, string) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	issuer := "http://" + ln.Addr().String() + path
	cfg := Config{
		Issuer: issuer,
		Clients: append([]Client{{
			ID: clientID, Secret: clientSecret,
			RedirectURIs: []string{redirectURI}, PostLogoutRedirectURIs: []string{postLogoutURI},
		}}, extra...),
		Users: []User{alice, {Subject: "bob-viewer", Email: "bob@acme.test", Name: "Bob", Password: "bob-pw", Note: "viewer"}},
	}
	edit(&cfg)
	p, err := New(cfg)
	require.NoError(t, err)
	srv := httptest.NewUnstartedServer(p)
	srv.Listener.Close()
	srv.Listener = ln
	srv.Start()
	t.Cleanup(srv.Close)
	return p, issuer
}

// rp is a relying party driving the flow like a browser would.
type rp struct {
	t        *testing.T
	ctx      context.Context
	provider *oidc.Provider
	conf     oauth2.Config
	browser  *http.Client
}

func newRP(t *testing.T, issuer string) *rp {
	ctx := t.Context()
	provider, err := oidc.NewProvider(ctx, issuer)
	require.NoError(t, err)
	jar, err := cookiejar.New(nil)
	require.NoError(t, err)
	return &rp{
		t: t, ctx: ctx, provider: provider,
		conf: oauth2.Config{
			ClientID: clientID, ClientSecret: clientSecret, RedirectURL: redirectURI,
			Endpoint: provider.Endpoint(),
			Scopes:   []string{oidc.ScopeOpenID, "profile", "email"},
		},
		browser: &http.Client{
			Jar: jar,
			// Follow the IdP's own redirects, but stop at the RP callback
			// (or post-logout URI), which nobody serves.
			CheckRedirect: func(req *http.Request, _ []*http.Request) error {
				if u := req.URL.String(); strings.HasPrefix(u, redirectURI) || strings.HasPrefix(u, postLogoutURI) {
					return http.ErrUseLastResponse
				}
				return nil
			},
		},
	}
}

var formID = regexp.MustCompile(`name="id" value="([^"]+)"`)

// openLogin starts an authorization and returns the login page's request id.
func (r *rp) openLogin(authURL string) string {
	resp, err := r.browser.Get(authURL)
	require.NoError(r.t, err)
	body := readBody(r.t, resp)
	require.Equal(r.t, http.StatusOK, resp.StatusCode, body)
	require.True(r.t, strings.HasSuffix(resp.Request.URL.Path, "/login"), "authorize must redirect to the login page, got %s", resp.Request.URL)
	assert.Contains(r.t, resp.Header.Get("Content-Security-Policy"), "default-src 'self'")
	m := formID.FindStringSubmatch(body)
	require.NotNil(r.t, m, "login form without auth request id:\n%s", body)
	return m[1]
}

func (r *rp) submitLogin(issuer, id, username, password string) (*http.Response, string) {
	resp, err := r.browser.PostForm(issuer+"/login", url.Values{"id": {id}, "username": {username}, "password": {password}})
	require.NoError(r.t, err)
	return resp, readBody(r.t, resp)
}

// login runs authorize → login → callback and returns the code, checking state.
func (r *rp) login(issuer string, opts ...oauth2.AuthCodeOption) string {
	state := oauth2.GenerateVerifier()
	id := r.openLogin(r.conf.AuthCodeURL(state, opts...))
	resp, body := r.submitLogin(issuer, id, alice.Email, alice.Password)
	require.Equal(r.t, http.StatusFound, resp.StatusCode, body)
	loc, err := url.Parse(resp.Header.Get("Location"))
	require.NoError(r.t, err)
	require.True(r.t, strings.HasPrefix(loc.String(), redirectURI), "redirected to %s", loc)
	require.Equal(r.t, state, loc.Query().Get("state"))
	require.NotEmpty(r.t, loc.Query().Get("code"), "no code in %s", loc)
	return loc.Query().Get("code")
}

func readBody(t *testing.T, resp *http.Response) string {
	t.Helper()
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return string(b)
}

func TestHappyPath(t *testing.T) {
	for name, style := range map[string]oauth2.AuthStyle{
		"client_secret_basic": oauth2.AuthStyleInHeader,
		"client_secret_post":  oauth2.AuthStyleInParams,
	} {
		t.Run(name, func(t *testing.T) {
			_, issuer := startIdP(t, "")
			r := newRP(t, issuer)
			r.conf.Endpoint.AuthStyle = style
			verifier, nonce := oauth2.GenerateVerifier(), oauth2.GenerateVerifier()
			code := r.login(issuer, oauth2.S256ChallengeOption(verifier), oidc.Nonce(nonce))

			tok, err := r.conf.Exchange(r.ctx, code, oauth2.VerifierOption(verifier))
			require.NoError(t, err)
			raw, _ := tok.Extra("id_token").(string)
			require.NotEmpty(t, raw)
			idt, err := r.provider.Verifier(&oidc.Config{ClientID: clientID}).Verify(r.ctx, raw)
			require.NoError(t, err)
			assert.Equal(t, nonce, idt.Nonce)
			assert.Equal(t, alice.Subject, idt.Subject)
			var claims struct {
				Email         string   `json:"email"`
				EmailVerified bool     `json:"email_verified"`
				Name          string   `json:"name"`
				Groups        []string `json:"groups"`
			}
			require.NoError(t, idt.Claims(&claims))
			assert.Equal(t, alice.Email, claims.Email)
			assert.True(t, claims.EmailVerified)
			assert.Equal(t, alice.Name, claims.Name)
			assert.Equal(t, alice.Groups, claims.Groups, "the ID token carries the groups claim")

			info, err := r.provider.UserInfo(r.ctx, oauth2.StaticTokenSource(tok))
			require.NoError(t, err)
			assert.Equal(t, alice.Subject, info.Subject)
			assert.Equal(t, alice.Email, info.Email)

			// Codes are single use.
			_, err = r.conf.Exchange(r.ctx, code, oauth2.VerifierOption(verifier))
			assert.Error(t, err)

			// RP-initiated logout returns to the registered URI with state.
			var disc struct {
				EndSession string `json:"end_session_endpoint"`
			}
			require.NoError(t, r.provider.Claims(&disc))
			logout := disc.EndSession + "?" + url.Values{
				"id_token_hint": {raw}, "post_logout_redirect_uri": {postLogoutURI}, "state": {"bye"},
			}.Encode()
			resp, err := r.browser.Get(logout)
			require.NoError(t, err)
			readBody(t, resp)
			require.Equal(t, http.StatusFound, resp.StatusCode)
			assert.Equal(t, postLogoutURI+"?state=bye", resp.Header.Get("Location"))
			// Logout revoked the access token.
			_, err = r.provider.UserInfo(r.ctx, oauth2.StaticTokenSource(tok))
			assert.Error(t, err)
		})
	}
}

func TestWrongPassword(t *testing.T) {
	_, issuer := startIdP(t, "")
	r := newRP(t, issuer)
	verifier := oauth2.GenerateVerifier()
	id := r.openLogin(r.conf.AuthCodeURL("s", oauth2.S256ChallengeOption(verifier)))

	resp, body := r.submitLogin(issuer, id, alice.Email, "nope")
	assert.Equal(t, http.StatusUnauthorized, resp.StatusCode)
	assert.Empty(t, resp.Header.Get("Location"))
	assert.Equal(t, issuer+"/login", resp.Request.URL.String(), "no redirect on failure")
	assert.Contains(t, body, "wrong username or password")
	assert.Contains(t, body, `id="sign-in"`, "form shown again")
	assert.NotContains(t, body, "code=")

	// The callback refuses to issue a code for the unfinished request.
	resp, err := r.browser.Get(issuer + "/authorize/callback?id=" + url.QueryEscape(id))
	require.NoError(t, err)
	readBody(t, resp)
	assert.Empty(t, mustURL(t, resp.Header.Get("Location")).Query().Get("code"))

	// The same request still completes with the right password, by subject.
	resp, body = r.submitLogin(issuer, id, alice.Subject, alice.Password)
	require.Equal(t, http.StatusFound, resp.StatusCode, body)
	assert.NotEmpty(t, mustURL(t, resp.Header.Get("Location")).Query().Get("code"))
}

func TestWrongPKCEVerifier(t *testing.T) {
	_, issuer := startIdP(t, "")
	r := newRP(t, issuer)
	verifier := oauth2.GenerateVerifier()
	code := r.login(issuer, oauth2.S256ChallengeOption(verifier))

	_, err := r.conf.Exchange(r.ctx, code, oauth2.VerifierOption(oauth2.GenerateVerifier()))
	var re *oauth2.RetrieveError
	require.ErrorAs(t, err, &re)
	assert.Equal(t, "invalid_grant", re.ErrorCode)

	_, err = r.conf.Exchange(r.ctx, code) // no verifier at all
	assert.Error(t, err)
}

func TestPKCERequired(t *testing.T) {
	_, issuer := startIdP(t, "")
	r := newRP(t, issuer)
	for name, opts := range map[string][]oauth2.AuthCodeOption{
		"none":  nil,
		"plain": {oauth2.SetAuthURLParam("code_challenge", oauth2.GenerateVerifier()), oauth2.SetAuthURLParam("code_challenge_method", "plain")},
	} {
		resp, err := r.browser.Get(r.conf.AuthCodeURL("s", opts...))
		require.NoError(t, err, name)
		readBody(t, resp)
		loc := mustURL(t, resp.Header.Get("Location"))
		assert.Equal(t, http.StatusFound, resp.StatusCode, name)
		assert.Equal(t, "invalid_request", loc.Query().Get("error"), name)
		assert.Empty(t, loc.Query().Get("code"), name)
	}
}

func TestRejectsUnknownClientAndRedirect(t *testing.T) {
	_, issuer := startIdP(t, "")
	r := newRP(t, issuer)
	noFollow := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	for name, mutate := range map[string]func(*oauth2.Config){
		"unknown client_id": func(c *oauth2.Config) { c.ClientID = "intruder" },
		"bad redirect_uri":  func(c *oauth2.Config) { c.RedirectURL = "http://evil.test/cb" },
	} {
		conf := r.conf
		mutate(&conf)
		resp, err := noFollow.Get(conf.AuthCodeURL("s", oauth2.S256ChallengeOption(oauth2.GenerateVerifier())))
		require.NoError(t, err, name)
		readBody(t, resp)
		assert.Equal(t, http.StatusBadRequest, resp.StatusCode, name)
		assert.Empty(t, resp.Header.Get("Location"), name)
	}
}

func TestJWKS(t *testing.T) {
	p, issuer := startIdP(t, "")
	r := newRP(t, issuer)
	var disc struct {
		JWKS string `json:"jwks_uri"`
	}
	require.NoError(t, r.provider.Claims(&disc))
	resp, err := http.Get(disc.JWKS)
	require.NoError(t, err)
	defer resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode)
	var set jose.JSONWebKeySet
	require.NoError(t, json.NewDecoder(resp.Body).Decode(&set))
	require.Len(t, set.Keys, 1)
	k := set.Keys[0]
	assert.Equal(t, p.store.key.id, k.KeyID)
	assert.NotEmpty(t, k.KeyID)
	assert.Equal(t, "RS256", k.Algorithm)
	assert.Equal(t, "sig", k.Use)
	pub, ok := k.Key.(*rsa.PublicKey)
	require.True(t, ok, "key is %T", k.Key)
	assert.Equal(t, 2048, pub.N.BitLen())
	assert.True(t, k.IsPublic())
}

func TestLoginPage(t *testing.T) {
	_, issuer := startIdP(t, "")
	r := newRP(t, issuer)
	resp, err := r.browser.Get(r.conf.AuthCodeURL("s", oauth2.S256ChallengeOption(oauth2.GenerateVerifier())))
	require.NoError(t, err)
	body := readBody(t, resp)
	for _, want := range []string{
		`<label for="username">`, `<label for="password">`, `id="username"`, `id="password"`,
		`<button id="sign-in" type="submit">Sign in</button>`,
		alice.Email, alice.Name, "Acme Corp — owner", alice.Password, "bob@acme.test",
	} {
		assert.Contains(t, body, want)
	}
	assert.NotContains(t, body, "style=")
	assert.NotContains(t, body, "<style")
	assert.NotContains(t, body, "<script")

	css, err := http.Get(issuer + "/devidp.css")
	require.NoError(t, err)
	readBody(t, css)
	assert.Equal(t, http.StatusOK, css.StatusCode)
	assert.Contains(t, css.Header.Get("Content-Type"), "text/css")

	resp, err = http.Get(issuer + "/login?authRequestID=bogus")
	require.NoError(t, err)
	body = readBody(t, resp)
	assert.Equal(t, http.StatusBadRequest, resp.StatusCode)
	assert.NotContains(t, body, `id="sign-in"`)
}

func TestLogoutWithoutClientShowsPage(t *testing.T) {
	_, issuer := startIdP(t, "")
	resp, err := http.Get(issuer + "/end_session")
	require.NoError(t, err)
	body := readBody(t, resp)
	assert.Equal(t, http.StatusOK, resp.StatusCode)
	assert.Equal(t, "/logged-out", resp.Request.URL.Path)
	assert.Contains(t, body, "signed out")

	// An unregistered post-logout URI is refused rather than followed.
	noFollow := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	resp, err = noFollow.Get(issuer + "/end_session?" + url.Values{"client_id": {clientID}, "post_logout_redirect_uri": {"http://evil.test/"}}.Encode())
	require.NoError(t, err)
	readBody(t, resp)
	assert.Equal(t, http.StatusBadRequest, resp.StatusCode)
}

func TestAuthRequestExpires(t *testing.T) {
	p, issuer := startIdP(t, "")
	r := newRP(t, issuer)
	id := r.openLogin(r.conf.AuthCodeURL("s", oauth2.S256ChallengeOption(oauth2.GenerateVerifier())))
	p.store.mu.Lock()
	p.store.now = func() time.Time { return time.Now().Add(authRequestTTL + time.Second) }
	p.store.mu.Unlock()
	resp, body := r.submitLogin(issuer, id, alice.Email, alice.Password)
	assert.Equal(t, http.StatusBadRequest, resp.StatusCode)
	assert.Contains(t, body, "expired")
	assert.Empty(t, resp.Header.Get("Location"))
}

func TestIssuerWithPath(t *testing.T) {
	_, issuer := startIdP(t, "/idp")
	r := newRP(t, issuer) // discovery must report the issuer with its path
	verifier := oauth2.GenerateVerifier()
	code := r.login(issuer, oauth2.S256ChallengeOption(verifier))
	tok, err := r.conf.Exchange(r.ctx, code, oauth2.VerifierOption(verifier))
	require.NoError(t, err)
	raw, _ := tok.Extra("id_token").(string)
	_, err = r.provider.Verifier(&oidc.Config{ClientID: clientID}).Verify(r.ctx, raw)
	require.NoError(t, err)
}

// A client without a secret is public: PKCE alone authenticates the exchange.
func TestPublicClient(t *testing.T) {
	_, issuer := startIdP(t, "", Client{ID: "gantry-cli", RedirectURIs: []string{redirectURI}})
	r := newRP(t, issuer)
	r.conf.ClientID, r.conf.ClientSecret = "gantry-cli", ""
	r.conf.Endpoint.AuthStyle = oauth2.AuthStyleInParams
	verifier := oauth2.GenerateVerifier()
	code := r.login(issuer, oauth2.S256ChallengeOption(verifier))
	tok, err := r.conf.Exchange(r.ctx, code, oauth2.VerifierOption(verifier))
	require.NoError(t, err)
	raw, _ := tok.Extra("id_token").(string)
	_, err = r.provider.Verifier(&oidc.Config{ClientID: "gantry-cli"}).Verify(r.ctx, raw)
	require.NoError(t, err)

	// The confidential client still needs its secret.
	r2 := newRP(t, issuer)
	r2.conf.ClientSecret = "wrong"
	code = r2.login(issuer, oauth2.S256ChallengeOption(verifier))
	_, err = r2.conf.Exchange(r2.ctx, code, oauth2.VerifierOption(verifier))
	assert.Error(t, err)
}

func TestConfigValidation(t *testing.T) {
	ok := Config{
		Issuer:  "http://127.0.0.1:5556",
		Clients: []Client{{ID: "c", RedirectURIs: []string{"http://127.0.0.1:1/cb"}}},
		Users:   []User{alice},
	}
	_, err := New(ok)
	require.NoError(t, err)
	for name, mutate := range map[string]func(*Config){
		"trailing slash":   func(c *Config) { c.Issuer += "/" },
		"relative issuer":  func(c *Config) { c.Issuer = "/idp" },
		"no clients":       func(c *Config) { c.Clients = nil },
		"no redirect uris": func(c *Config) { c.Clients = []Client{{ID: "c"}} },
		"duplicate email":  func(c *Config) { c.Users = []User{alice, {Subject: "x", Email: "ALICE@acme.test", Password: "p"}} },
		"no password":      func(c *Config) { c.Users = []User{{Subject: "x", Email: "x@y"}} },
	} {
		c := ok
		mutate(&c)
		_, err := New(c)
		assert.Error(t, err, name)
	}
}

func mustURL(t *testing.T, s string) *url.URL {
	t.Helper()
	u, err := url.Parse(s)
	require.NoError(t, err)
	return u
}
