package main

import (
	"bytes"
	"io"
	"net"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/coreos/go-oidc/v3/oidc"
	"github.com/stretchr/testify/require"
	"golang.org/x/oauth2"

	"gantry/bench"
)

var (
	devOIDCIssuer = regexp.MustCompile(`development OpenID Provider: (http://\S+)`)
	devOIDCSecret = regexp.MustCompile(`client secret \(generated.*\): ([0-9a-f]+)`)
	loginFormID   = regexp.MustCompile(`name="id" value="([^"]+)"`)
	// banner ends the start-up output of gantry dev and gantry dev-oidc.
	banner = regexp.MustCompile(`(?m)^Press Ctrl-C`)
)

// startDevOIDC runs this test binary as `gantry dev-oidc` with args and env, waits for
// its banner and returns the issuer it announced and its output up to the banner.
func startDevOIDC(t *testing.T, args []string, env ...string) (issuer, out string) {
	t.Helper()
	p := startMain(t, env, syscall.SIGINT, append([]string{"dev-oidc", "--addr", "127.0.0.1:0"}, args...)...)
	// Woken by its output; its exit fails the wait at once.
	bench.Eventually(t, "gantry dev-oidc's banner", 30*time.Second, func() (bool, any) {
		p.alive(t, "gantry dev-oidc to come up")
		return banner.MatchString(p.out.String()), bench.Later(func() string { return "its output:\n" + p.out.String() })
	}, bench.Wake(p.out.Wrote()))
	out = p.out.String()
	m := devOIDCIssuer.FindStringSubmatch(out)
	require.NotNil(t, m, out)
	return m[1], out
}

// signInThrough runs the authorization code flow with PKCE against the provider at
// issuer as a browser and a relying party would (go-oidc discovery, the login form,
// the code exchange with the client secret) and returns the verified ID token's claims.
func signInThrough(t *testing.T, issuer, clientID, secret, redirect, username, password string) (sub string, claims map[string]any) {
	t.Helper()
	ctx := t.Context()
	provider, err := oidc.NewProvider(ctx, issuer)
	require.NoError(t, err, "discovery")
	conf := oauth2.Config{ClientID: clientID, ClientSecret: secret, RedirectURL: redirect, Endpoint: provider.Endpoint(),
		Scopes: []string{oidc.ScopeOpenID, "profile", "email"}}
	jar, err := cookiejar.New(nil)
	require.NoError(t, err)
	browser := &http.Client{Jar: jar, CheckRedirect: func(req *http.Request, _ []*http.Request) error {
		if strings.HasPrefix(req.URL.String(), redirect) {
			return http.ErrUseLastResponse // the relying party's callback: nobody serves it here
		}
		return nil
	}}
	verifier, state, nonce := oauth2.GenerateVerifier(), oauth2.GenerateVerifier(), oauth2.GenerateVerifier()
	resp, err := browser.Get(conf.AuthCodeURL(state, oauth2.S256ChallengeOption(verifier), oidc.Nonce(nonce)))
	require.NoError(t, err)
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode, string(body))
	id := loginFormID.FindSubmatch(body)
	require.NotNil(t, id, "no login form:\n%s", body)

	resp, err = browser.PostForm(issuer+"/login", url.Values{"id": {string(id[1])}, "username": {username}, "password": {password}})
	require.NoError(t, err)
	resp.Body.Close()
	require.Equal(t, http.StatusFound, resp.StatusCode, "the sign-in ends at the client's callback")
	loc, err := url.Parse(resp.Header.Get("Location"))
	require.NoError(t, err)
	require.True(t, strings.HasPrefix(loc.String(), redirect), loc.String())
	require.Equal(t, state, loc.Query().Get("state"))

	tok, err := conf.Exchange(ctx, loc.Query().Get("code"), oauth2.VerifierOption(verifier))
	require.NoError(t, err, "token exchange")
	rawID, _ := tok.Extra("id_token").(string)
	idt, err := provider.Verifier(&oidc.Config{ClientID: clientID}).Verify(ctx, rawID)
	require.NoError(t, err, "ID token verification")
	require.Equal(t, nonce, idt.Nonce)
	require.NoError(t, idt.Claims(&claims))
	return idt.Subject, claims
}

// TestDevOIDCCommand: the standalone development provider serves discovery and a whole
// sign-in (authorization code, PKCE, client secret, ID token verified by go-oidc) for the
// client and users it was given on its command line and in its environment.
func TestDevOIDCCommand(t *testing.T) {
	t.Parallel()
	const redirect = "http://127.0.0.1:1/auth/callback"

	t.Run("users file and secret from the environment", func(t *testing.T) {
		t.Parallel()
		users := filepath.Join(t.TempDir(), "users.json")
		require.NoError(t, os.WriteFile(users, []byte(`[{"subject": "olga", "email": "olga@initech.test", "name": "Olga Ops",
			"password": "olga-pw", "groups": ["platform"]}]`), 0o600))
		issuer, banner := startDevOIDC(t, []string{"--client-id", "portal", "--redirect-uris", "http://other.test/cb, " + redirect, "--users", users},
			"GANTRY_DEV_OIDC_CLIENT_SECRET=s3cret")
		require.NotContains(t, banner, "s3cret", "a secret it was given is never printed")
		sub, claims := signInThrough(t, issuer, "portal", "s3cret", redirect, "olga@initech.test", "olga-pw")
		require.Equal(t, "olga", sub)
		require.Equal(t, "olga@initech.test", claims["email"])
		require.Equal(t, true, claims["email_verified"])
		require.Equal(t, []any{"platform"}, claims["groups"])
	})

	t.Run("defaults: gantry dev's demo users and a generated secret", func(t *testing.T) {
		t.Parallel()
		issuer, banner := startDevOIDC(t, []string{"--redirect-uris", redirect})
		m := devOIDCSecret.FindStringSubmatch(banner)
		require.NotNil(t, m, "the generated secret is printed:\n%s", banner)
		_, claims := signInThrough(t, issuer, devClientID, m[1], redirect, "admin@acme.test", "admin-acme")
		require.Equal(t, "admin@acme.test", claims["email"])
	})

	t.Run("an issuer with a path", func(t *testing.T) {
		t.Parallel()
		// The issuer is what clients use: here the provider is reached under /idp, as
		// behind a path-routing proxy, and serves itself there.
		ln := freeLoopbackAddr(t)
		issuer, _ := startDevOIDC(t, []string{"--addr", ln, "--issuer", "http://" + ln + "/idp", "--redirect-uris", redirect},
			"GANTRY_DEV_OIDC_CLIENT_SECRET=x")
		require.Equal(t, "http://"+ln+"/idp", issuer)
		sub, _ := signInThrough(t, issuer, devClientID, "x", redirect, "admin@acme.test", "admin-acme")
		require.NotEmpty(t, sub)
	})

	t.Run("a misspelt key in the users file is refused", func(t *testing.T) {
		t.Parallel()
		users := filepath.Join(t.TempDir(), "users.json")
		require.NoError(t, os.WriteFile(users, []byte(`[{"subject": "a", "email": "a@x.test", "password": "p", "grups": ["x"]}]`), 0o600))
		var out, errOut bytes.Buffer
		require.Equal(t, 1, run([]string{"dev-oidc", "--addr", "127.0.0.1:0", "--users", users}, &out, &errOut))
		require.Contains(t, errOut.String(), `unknown field "grups"`)
	})
}

// freeLoopbackAddr returns a loopback address nobody listens on (for a flag that needs
// the port before the process starts).
func freeLoopbackAddr(t *testing.T) string {
	t.Helper()
	ln, err := (&net.ListenConfig{}).Listen(t.Context(), "tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := ln.Addr().String()
	require.NoError(t, ln.Close())
	return addr
}
