package web_test

import (
	"encoding/base64"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"gantry/cmd/gantry/webtest"
	"gantry/models/keyring"
	"gantry/models/ratelimit"
	"gantry/web"
)

// TestSignInAttacks: the sign-in cookie and the callback as an attacker tries them. A
// replayed callback signs no one in (in the browser that made it, its cookie is gone;
// anywhere else, with the cookie copied, the provider refuses its code again); a
// callback carried to another browser (login CSRF) finds nothing to match; NUL bytes in
// the state are refused at the edge before the callback reads anything (the sign-in in
// progress survives them); an expired sign-in, a cookie sealed with other keys, one
// altered and one with a nonce of the wrong length are refused as no sign-in (never a
// 500). Every refusal counts against the address: over the limit, 429.
func TestSignInAttacks(t *testing.T) {
	t.Parallel()
	app := webtest.StartWith(t, webtest.Options{TrustedProxies: trustLoopback,
		RateLimits: &web.RateLimits{Now: newTestClock().now, FailedSignIn: ratelimit.Rate{PerMinute: 1, Burst: 7}}})
	const attacker = "203.0.113.99"
	signedIn := func() int64 { return countRows(t, app, "SELECT count(*) FROM sessions WHERE user_id IS NOT NULL") }
	failed := func(c *http.Client, path, want string) {
		t.Helper()
		before := signedIn()
		resp := app.Get(t, c, path)
		body := webtest.ReadBody(t, resp)
		require.Equal(t, http.StatusBadRequest, resp.StatusCode, body)
		require.Contains(t, body, want)
		require.Equal(t, before, signedIn(), "no one is signed in")
	}
	pathOf := func(u *url.URL) string { return strings.TrimPrefix(u.String(), app.URL) }

	// A genuine sign-in, its cookie copied on the way.
	victim := browserFrom(t, app, attacker)
	action, id := app.StartLogin(t, victim)
	stolen := loginCookie(t, app, victim).Value
	callback := app.SubmitCredentials(t, victim, action, id, "admin@acme.test", "admin-acme")
	resp := app.Get(t, victim, pathOf(callback))
	webtest.ReadBody(t, resp)
	require.Equal(t, http.StatusSeeOther, resp.StatusCode, "signed in")
	require.Nil(t, loginCookie(t, app, victim), "the callback cleared the sign-in cookie")

	// 1, 2: replayed in the same browser, and elsewhere with the copied cookie.
	failed(victim, pathOf(callback), "this browser has no sign-in in progress")
	elsewhere := browserFrom(t, app, attacker)
	setLoginCookie(t, app, elsewhere, stolen)
	failed(elsewhere, pathOf(callback), "the identity provider refused the authorization code")

	// 3: login CSRF: the attacker's own callback, sent to a browser that has a sign-in
	// in progress of its own.
	mallory := browserFrom(t, app, attacker)
	action, id = app.StartLogin(t, mallory)
	planted := app.SubmitCredentials(t, mallory, action, id, "viewer@acme.test", "viewer-acme")
	target := browserFrom(t, app, attacker)
	app.StartLogin(t, target)
	failed(target, pathOf(planted), "the state returned by the identity provider does not match")

	// NUL bytes in the state: refused at the edge, not counted, and the sign-in in
	// progress is untouched.
	c := browserFrom(t, app, attacker)
	action, id = app.StartLogin(t, c)
	genuine := app.SubmitCredentials(t, c, action, id, "viewer@acme.test", "viewer-acme")
	nul := *genuine
	q := nul.Query()
	q.Set("state", "\x00"+q.Get("state"))
	nul.RawQuery = q.Encode()
	failed(c, pathOf(&nul), "contains characters Gantry does not accept")
	resp = app.Get(t, c, pathOf(genuine))
	webtest.ReadBody(t, resp)
	require.Equal(t, http.StatusSeeOther, resp.StatusCode, "the genuine callback still signs in")

	// 4: an expired sign-in (11 minutes old; only Gantry's keys could have sealed it).
	c = browserFrom(t, app, attacker)
	action, id = app.StartLogin(t, c)
	editLoginFlow(t, app, c, func(f *web.LoginFlow) { f.StartedAt = f.StartedAt.Add(-11 * time.Minute) })
	failed(c, pathOf(app.SubmitCredentials(t, c, action, id, "viewer@acme.test", "viewer-acme")), "the sign-in took too long")

	// 5, 6, 7: sealed with other keys, altered, a nonce of the wrong length.
	other, err := keyring.Parse(keyring.NewKeySpec("other"))
	require.NoError(t, err)
	forged, err := web.SealLoginFlow(other, web.LoginFlow{State: "s", Nonce: "n", Verifier: "v", StartedAt: time.Now()})
	require.NoError(t, err)
	c = browserFrom(t, app, attacker)
	app.StartLogin(t, c)
	genuineValue := loginCookie(t, app, c).Value
	parts := strings.Split(genuineValue, ".")
	require.Len(t, parts, 4)
	ciphertext, err := base64.RawURLEncoding.DecodeString(parts[3])
	require.NoError(t, err)
	ciphertext[0] ^= 1
	altered := strings.Join([]string{parts[0], parts[1], parts[2], base64.RawURLEncoding.EncodeToString(ciphertext)}, ".")
	shortNonce := strings.Join([]string{parts[0], parts[1], base64.RawURLEncoding.EncodeToString([]byte("short")), parts[3]}, ".")
	for _, value := range []string{forged, altered, shortNonce} {
		setLoginCookie(t, app, c, value)
		failed(c, "/auth/callback?state=s&code=c", "this browser has no sign-in in progress")
	}

	// Seven failures so far (the NUL bytes were refused before the callback): the eighth
	// is over the limit.
	resp = app.Get(t, browserFrom(t, app, attacker), "/auth/callback?state=s&code=c")
	webtest.ReadBody(t, resp)
	require.Equal(t, http.StatusTooManyRequests, resp.StatusCode)
	require.Equal(t, "60", resp.Header.Get("Retry-After"))
}

// TestLoginCookieAttributes: over https the sign-in cookie is __Host- (Secure, Path=/, no
// Domain: a subdomain cannot plant one); over http it goes to the callback only. Both are
// HttpOnly, SameSite=Lax and live as long as a sign-in may take; clearing sets MaxAge -1.
func TestLoginCookieAttributes(t *testing.T) {
	t.Parallel()
	secure := web.LoginCookie("https://gantry.example", "v")
	require.Equal(t, "__Host-gantry_login", secure.Name)
	require.True(t, secure.Secure)
	require.Equal(t, "/", secure.Path)
	require.Empty(t, secure.Domain)
	plain := web.LoginCookie("http://127.0.0.1:8080", "v")
	require.Equal(t, "gantry_login", plain.Name)
	require.False(t, plain.Secure)
	require.Equal(t, "/auth/callback", plain.Path)
	for _, ck := range []*http.Cookie{secure, plain} {
		require.True(t, ck.HttpOnly)
		require.Equal(t, http.SameSiteLaxMode, ck.SameSite)
		require.Equal(t, 600, ck.MaxAge)
		require.NoError(t, ck.Valid())
	}
	require.Equal(t, -1, web.LoginCookie("https://gantry.example", "").MaxAge)
}
