package web_test

import (
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/labstack/echo/v4"
	"github.com/stretchr/testify/require"

	"gantry/cmd/gantry/webtest"
	"gantry/models/authz"
	"gantry/models/ratelimit"
	"gantry/models/run"
	"gantry/web"
)

// Rate limits on deciding (web/ratelimit.go), through the whole portal (failed sign-ins:
// signin_limits_test.go; wrong API tokens: token_limits_test.go): the clock is the
// test's, so nothing waits; client addresses are X-Forwarded-For headers, which these
// portals believe from the loopback peer the test connects from (trustLoopback), as from
// a reverse proxy in front of it.

// trustLoopback are the trusted proxies of a test that names client addresses in
// X-Forwarded-For: the test's own loopback peer.
var trustLoopback = []string{"127.0.0.0/8"}

// testClock is a time the test moves by hand; the server reads it concurrently.
type testClock struct {
	mu sync.Mutex
	t  time.Time
}

func newTestClock() *testClock { return &testClock{t: time.Date(2030, 1, 7, 9, 0, 0, 0, time.UTC)} }

func (c *testClock) now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *testClock) advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}

// sendFrom sends req from client address ip (as a proxy forwards it) with c.
func sendFrom(t *testing.T, c *http.Client, ip string, req *http.Request) *http.Response {
	t.Helper()
	req.Header.Set("X-Forwarded-For", ip)
	resp, err := c.Do(req)
	require.NoError(t, err)
	return resp
}

// postFrom posts a decision form from client address ip.
func postFrom(t *testing.T, app *webtest.App, c *http.Client, ip, path string, form url.Values) *http.Response {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, app.URL+path, strings.NewReader(form.Encode()))
	require.NoError(t, err)
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	return sendFrom(t, c, ip, req)
}

// TestDecisionsRateLimited: decisions are limited per session (a session over its limit
// is refused while another session is served), per address over every session behind
// it, and per API token; a refused decision changes nothing (the run still waits, no
// audit event, its idempotency key not used up), and goes through once the time has
// passed. The API's 429 is a problem document as its description says.
func TestDecisionsRateLimited(t *testing.T) {
	t.Parallel()
	clock := newTestClock()
	app := webtest.StartWith(t, webtest.Options{TrustedProxies: trustLoopback, RateLimits: &web.RateLimits{Now: clock.now,
		Decision: ratelimit.Rate{PerMinute: 1, Burst: 1}, DecisionPerIP: ratelimit.Rate{PerMinute: 1, Burst: 3}}})
	api := newAPIChecker(t, app)
	session := func(name string, role authz.Role) *http.Client {
		m := app.NewMember(t, "acme", name, role, false)
		return app.SessionFor(t, m.UserID, m.OrgID, time.Now())
	}
	requester, admin, owner := session("Rita Requester", authz.RoleOperator), session("Ada Admin", authz.RoleAdmin), session("Otto Owner", authz.RoleOwner)
	third, fourth := session("Tess Third", authz.RoleAdmin), session("Finn Fourth", authz.RoleAdmin)
	r := waitForState(t, app, app.RequestRun(t, requester, bucketRequest(app.OrgEnvironmentID(t, "acme", "staging"), "eu-west")), run.PendingApproval)
	stale := func(c *http.Client) url.Values {
		f := decisionForm(t, app, c, r)
		f.Set("plan_digest", "sha256:0000")
		f.Set("reason", "checked by the rate limit test")
		return f
	}
	const here, elsewhere = "198.51.100.1", "198.51.100.2"
	approve, reject, override := "/runs/"+r.ID+"/approve", "/runs/"+r.ID+"/reject", "/runs/"+r.ID+"/override"
	answered := func(resp *http.Response, status int, why string) string {
		t.Helper()
		body := webtest.ReadBody(t, resp)
		require.Equal(t, status, resp.StatusCode, "%s: %s", why, body)
		return body
	}

	// The admin's session spends its one decision on a stale one (409, as without a
	// limit); its next decision, a good one, is refused and changes nothing.
	answered(postFrom(t, app, admin, here, approve, stale(admin)), http.StatusConflict, "the first decision is decided")
	good := decisionForm(t, app, admin, r)
	resp := postFrom(t, app, admin, here, approve, good)
	require.Equal(t, "60", resp.Header.Get("Retry-After"))
	body := answered(resp, http.StatusTooManyRequests, "the session is over its limit")
	require.Contains(t, body, "was not recorded. Try again in 60 seconds.")
	require.Equal(t, run.PendingApproval, waitForState(t, app, r.ID, run.PendingApproval).State, "the run still waits")
	require.Zero(t, auditCount(t, app, r.ID, "run.approved"), "no decision audited")

	// Another session from the same address is served; so is a third, which uses the
	// address's last decision up: a fourth session is refused there (override too is a
	// decision), and served from elsewhere.
	answered(postFrom(t, app, owner, here, approve, stale(owner)), http.StatusConflict, "another session is not limited")
	answered(postFrom(t, app, third, here, reject, stale(third)), http.StatusConflict, "a third session is not limited")
	answered(postFrom(t, app, fourth, here, override, stale(fourth)), http.StatusTooManyRequests, "the address is over its limit")
	require.NotEqual(t, http.StatusTooManyRequests, postFrom(t, app, fourth, elsewhere, override, stale(fourth)).StatusCode,
		"the same session from another address")

	// The API: per token, a problem document with a stable code and Retry-After.
	decider := app.NewMember(t, "acme", "Tom Token", authz.RoleAdmin, false)
	token, other := app.Token(t, decider, "read", "decide"), app.Token(t, decider, "read", "decide")
	status, text := api.call(token, http.MethodGet, "/api/v1/runs/"+r.ID+"/review", nil)
	require.Equal(t, http.StatusOK, status, text)
	review := decodeJSON[struct{ Evidence map[string]any }](t, text)
	review.Evidence["plan_digest"] = "sha256:0000"
	body2 := map[string]any{"evidence": review.Evidence}
	status, text = api.call(token, http.MethodPost, "/api/v1/runs/"+r.ID+"/approve", body2)
	require.Equal(t, http.StatusConflict, status, text)
	status, text = api.call(token, http.MethodPost, "/api/v1/runs/"+r.ID+"/approve", body2)
	require.Equal(t, http.StatusTooManyRequests, status, text)
	p := decodeJSON[struct {
		Type, Code, Detail string
		Status             int
	}](t, text)
	require.Equal(t, "RATE_LIMITED", p.Code)
	require.Equal(t, "urn:gantry:problem:rate-limited", p.Type)
	require.Equal(t, http.StatusTooManyRequests, p.Status)
	require.Contains(t, p.Detail, "Try again in 60 seconds.")
	resp = app.API(t, token, http.MethodPost, "/api/v1/runs/"+r.ID+"/reject", `{"evidence":{},"reason":"x"}`)
	require.Equal(t, "60", resp.Header.Get("Retry-After"))
	require.Equal(t, "application/problem+json", resp.Header.Get("Content-Type"))
	answered(resp, http.StatusTooManyRequests, "reject is a decision too")
	status, text = api.call(other, http.MethodPost, "/api/v1/runs/"+r.ID+"/approve", body2)
	require.Equal(t, http.StatusConflict, status, "another token is not limited: %s", text)

	// Not a decision, not limited: the admin still reads the review.
	resp = app.Get(t, admin, "/runs/"+r.ID+"/review")
	answered(resp, http.StatusOK, "reading is not limited")

	// A minute on, the admin's refused decision goes through with its very form (its
	// idempotency key was not used up by the refusal).
	clock.advance(time.Minute)
	resp = postFrom(t, app, admin, here, approve, good)
	answered(resp, http.StatusSeeOther, "decided once the time has passed")
	require.EqualValues(t, 1, auditCount(t, app, r.ID, "run.approved"))
}

// TestClientAddress: the address per-IP limits count is the connection's peer unless a
// trusted proxy forwarded the request (X-Forwarded-For from anyone else is ignored: a
// client cannot name a new address with each request), and an IPv6 client is counted
// by its /64.
func TestClientAddress(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name    string
		trusted []string
		peer    string
		xff     string
		want    string
	}{
		{"no proxy", nil, "203.0.113.9", "", "203.0.113.9"},
		{"no proxies: loopback is not believed", nil, "127.0.0.1", "203.0.113.7", "127.0.0.1"},
		{"no proxies: a private peer is not believed", nil, "10.0.0.2", "198.51.100.4, 203.0.113.7", "10.0.0.2"},
		{"no proxies: link-local is not believed", nil, "169.254.1.1", "203.0.113.7", "169.254.1.1"},
		{"a public client naming itself", nil, "203.0.113.9", "198.51.100.4", "203.0.113.9"},
		{"proxies: none", []string{"none"}, "127.0.0.1", "203.0.113.7", "127.0.0.1"},
		{"a proxy on loopback, listed", []string{"127.0.0.0/8"}, "127.0.0.1", "203.0.113.7", "203.0.113.7"},
		{"an ingress on a listed pod network", []string{"10.42.0.0/16"}, "10.42.3.4", "198.51.100.4, 203.0.113.7", "203.0.113.7"},
		{"a listed proxy", []string{"192.0.2.0/24"}, "192.0.2.10", "203.0.113.7", "203.0.113.7"},
		{"a private peer not listed", []string{"192.0.2.0/24"}, "10.0.0.2", "203.0.113.7", "10.0.0.2"},
		{"a client behind a listed proxy naming a listed address", []string{"192.0.2.0/24"}, "192.0.2.10", "203.0.113.7, 192.0.2.99", "203.0.113.7"},
		{"IPv6 by its /64", nil, "2001:db8:1:2:3:4:5:6", "", "2001:db8:1:2::/64"},
		{"IPv4 in IPv6", []string{"127.0.0.0/8"}, "127.0.0.1", "::ffff:203.0.113.7", "203.0.113.7"},
	}
	for _, tc := range cases {
		extract, err := web.IPExtractor(tc.trusted)
		require.NoError(t, err, tc.name)
		e := echo.New()
		e.IPExtractor = extract
		req := httptest.NewRequest(http.MethodGet, "/login", nil)
		req.RemoteAddr = net.JoinHostPort(tc.peer, "40000")
		if tc.xff != "" {
			req.Header.Set("X-Forwarded-For", tc.xff)
		}
		require.Equal(t, tc.want, web.ClientAddress(e.NewContext(req, httptest.NewRecorder())), tc.name)
	}
	_, err := web.IPExtractor([]string{"10.0.0.0/8", "proxy.internal"})
	require.ErrorContains(t, err, `"proxy.internal" is not a network`)
}

// TestRateLimitDefaults: a zero limit takes its default, field by field; a negative one
// stays off; trusted proxies that are no networks stop the start.
func TestRateLimitDefaults(t *testing.T) {
	t.Parallel()
	base := web.Config{BaseURL: "https://gantry.example", Issuer: "https://id.example", ClientID: "gantry"}
	cfg, err := base.WithDefaults()
	require.NoError(t, err)
	require.Equal(t, ratelimit.Rate{PerMinute: 10, Burst: 10}, cfg.RateLimits.FailedSignIn)
	require.Equal(t, ratelimit.Rate{PerMinute: 10, Burst: 20}, cfg.RateLimits.FailedToken)
	require.Equal(t, ratelimit.Rate{PerMinute: 30, Burst: 10}, cfg.RateLimits.Decision)
	require.Equal(t, ratelimit.Rate{PerMinute: 60, Burst: 20}, cfg.RateLimits.DecisionPerIP)
	require.Empty(t, cfg.TrustedProxies, "no proxy is trusted unless configured")

	base.RateLimits = web.RateLimits{FailedSignIn: ratelimit.Rate{PerMinute: 100}, Decision: ratelimit.Rate{PerMinute: -1}}
	cfg, err = base.WithDefaults()
	require.NoError(t, err)
	require.Equal(t, ratelimit.Rate{PerMinute: 100, Burst: 10}, cfg.RateLimits.FailedSignIn)
	require.True(t, cfg.RateLimits.Decision.Off())
	require.Equal(t, ratelimit.Rate{PerMinute: 60, Burst: 20}, cfg.RateLimits.DecisionPerIP)

	base.TrustedProxies = []string{"10.0.0.0/33"}
	_, err = base.WithDefaults()
	require.Error(t, err)
}
