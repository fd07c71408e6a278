package web_test

import (
	"bufio"
	"encoding/json"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"gantry/cmd/gantry/webtest"
	"gantry/models/demo"
	"gantry/web"
)

// Signing in from one address (web/failures.go, web/loginflow.go): what succeeds counts
// nothing and a start writes nothing, so an office behind one NAT signs in at any pace;
// what fails counts against the address. Client addresses are X-Forwarded-For headers
// from the loopback peer, which these portals trust (trustLoopback).

// fromAddress sends every request as a proxy forwards it from client address ip.
type fromAddress struct {
	ip   string
	base http.RoundTripper
}

func (f fromAddress) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("X-Forwarded-For", f.ip)
	return f.base.RoundTrip(r)
}

// browserFrom is a fresh browser-like client whose requests come from client address ip.
func browserFrom(t *testing.T, app *webtest.App, ip string) *http.Client {
	t.Helper()
	c := app.Client(t)
	c.Transport = fromAddress{ip: ip, base: http.DefaultTransport}
	return c
}

// loginCookie is browser c's sign-in in progress (nil: none).
func loginCookie(t *testing.T, app *webtest.App, c *http.Client) *http.Cookie {
	t.Helper()
	u, err := url.Parse(app.URL + "/auth/callback")
	require.NoError(t, err)
	for _, ck := range c.Jar.Cookies(u) {
		if ck.Name == "gantry_login" {
			return ck
		}
	}
	return nil
}

// setLoginCookie gives browser c the sign-in cookie value.
func setLoginCookie(t *testing.T, app *webtest.App, c *http.Client, value string) {
	t.Helper()
	u, err := url.Parse(app.URL + "/auth/callback")
	require.NoError(t, err)
	c.Jar.SetCookies(u, []*http.Cookie{{Name: "gantry_login", Value: value, Path: "/auth/callback"}})
}

// editLoginFlow changes browser c's sign-in in progress and seals it again with the
// portal's keys (what only the portal could do).
func editLoginFlow(t *testing.T, app *webtest.App, c *http.Client, edit func(*web.LoginFlow)) {
	t.Helper()
	ck := loginCookie(t, app, c)
	require.NotNil(t, ck, "no sign-in in progress")
	flow, ok := web.OpenLoginFlow(app.Keys, ck.Value)
	require.True(t, ok)
	edit(&flow)
	value, err := web.SealLoginFlow(app.Keys, flow)
	require.NoError(t, err)
	setLoginCookie(t, app, c, value)
}

// forgedCallback starts a sign-in with c for real and returns from the provider with a
// code it never issued: an exchange the provider refuses.
func forgedCallback(t *testing.T, app *webtest.App, c *http.Client) *http.Response {
	t.Helper()
	resp := app.Get(t, c, "/login")
	webtest.ReadBody(t, resp)
	require.Equal(t, http.StatusFound, resp.StatusCode)
	sent, err := resp.Location()
	require.NoError(t, err)
	return app.Get(t, c, "/auth/callback?"+url.Values{"state": {sent.Query().Get("state")}, "code": {"forged-code"}}.Encode())
}

// logLines are the lines of a JSON log that hold all of parts.
func logLines(t *testing.T, log string, parts ...string) []map[string]any {
	t.Helper()
	var out []map[string]any
	sc := bufio.NewScanner(strings.NewReader(log))
	for sc.Scan() {
		keep := true
		for _, p := range parts {
			keep = keep && strings.Contains(sc.Text(), p)
		}
		if keep {
			var line map[string]any
			require.NoError(t, json.Unmarshal(sc.Bytes(), &line))
			out = append(out, line)
		}
	}
	return out
}

// TestOfficeSignsInWhileFailedCallbacksAreLimited: 100 people behind one office address
// sign in through the development provider within one minute (the limits' clock does not
// move) and every one is signed in, with no session written before a sign-in succeeds.
// Then 20 callbacks that fail from the office (a sign-in started for real, returned with
// a code the provider never issued): the default limit answers the first 10 for what
// they are, and the rest 429 with Retry-After and a page saying when to sign in again;
// from the 12th on before the exchange with the provider. While refused, even a genuine
// return from the office is refused before its exchange; another address signs in, and a
// minute later the office does again.
func TestOfficeSignsInWhileFailedCallbacksAreLimited(t *testing.T) {
	t.Parallel()
	clock := newTestClock()
	var log lockedBuffer
	app := webtest.StartWith(t, webtest.Options{Log: &log, TrustedProxies: trustLoopback, RateLimits: &web.RateLimits{Now: clock.now}})
	const office, elsewhere = "203.0.113.7", "198.51.100.9"
	users := demo.Users()

	before := countRows(t, app, "SELECT count(*) FROM sessions")
	for i := range 100 {
		app.Login(t, browserFrom(t, app, office), users[i%len(users)].Email) // requires the signed-in dashboard
	}
	require.Equal(t, before+100, countRows(t, app, "SELECT count(*) FROM sessions WHERE user_id IS NOT NULL"), "100 signed-in sessions")
	require.Zero(t, countRows(t, app, "SELECT count(*) FROM sessions WHERE user_id IS NULL"), "no session is written before a sign-in succeeds")

	var limitedID string
	for i := range 20 {
		resp := forgedCallback(t, app, browserFrom(t, app, office))
		body := webtest.ReadBody(t, resp)
		if i < 10 {
			require.Equal(t, http.StatusBadRequest, resp.StatusCode, "failure %d is answered for what it is: %s", i+1, body)
			require.Contains(t, body, "refused the authorization code")
			continue
		}
		require.Equal(t, http.StatusTooManyRequests, resp.StatusCode, "failure %d is over the limit: %s", i+1, body)
		require.Equal(t, "6", resp.Header.Get("Retry-After"), "10 a minute: the next in 6 s")
		require.Contains(t, resp.Header.Get("Content-Type"), "text/html")
		require.Contains(t, body, "Too many requests")
		require.Contains(t, body, "Too many sign-ins failed from your network in a short time")
		require.Contains(t, body, "Try again in 6 seconds.")
		require.Contains(t, body, `href="/login"`, "the way on is signing in again")
		limitedID = resp.Header.Get("X-Request-Id")
	}
	// The 11th failure was exchanged (and refused) before it met the limit; none after it.
	require.Len(t, logLines(t, log.String(), `"msg":"oidc code exchange refused"`), 11)

	// While refused, a genuine return from the office is refused too, before its exchange.
	c := browserFrom(t, app, office)
	action, id := app.StartLogin(t, c)
	callback := app.SubmitCredentials(t, c, action, id, "admin@acme.test", "admin-acme")
	resp := app.Get(t, c, strings.TrimPrefix(callback.String(), app.URL))
	webtest.ReadBody(t, resp)
	require.Equal(t, http.StatusTooManyRequests, resp.StatusCode)
	require.Len(t, logLines(t, log.String(), `"msg":"oidc code exchange refused"`), 11, "no exchange while refused")

	// Another address signs in; a minute later the office does again.
	app.Login(t, browserFrom(t, app, elsewhere), "viewer@acme.test")
	clock.advance(time.Minute)
	app.Login(t, browserFrom(t, app, office), "viewer@acme.test")

	// The refusal is logged with its request id and the address, never a cookie.
	lines := logLines(t, log.String(), `"msg":"rate limited"`, limitedID)
	require.Len(t, lines, 1)
	require.Equal(t, "failed sign-ins", lines[0]["limit"])
	require.Equal(t, office, lines[0]["remote_ip"])
	require.Equal(t, "/auth/callback", lines[0]["route"])
	require.NotContains(t, log.String(), "gantry_login=", "no sign-in cookie in the log")
}
