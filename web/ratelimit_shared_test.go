package web_test

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"gantry/cmd/gantry/webtest"
	"gantry/models/authz"
	"gantry/models/idempotency"
	"gantry/models/ratelimit"
	"gantry/models/run"
	"gantry/web"
)

// TestDecisionLimitSharedByReplicas: two replicas on one database count one caller's
// decisions in the same bucket (models/ratelimit, in the database). A burst of 10 from
// one browser session, alternating replicas, spends the session's budget (30 a minute
// after 10, the default), and the 11th, on either replica, meets 429 with Retry-After;
// the same for an API token, whose 11th is a problem document. The refused decisions
// changed nothing: the runs still wait, no approval is audited, the API call's
// Idempotency-Key is not kept, and once the time has passed the very same requests go
// through, once. The replicas share the test's clock as they share the database's.
func TestDecisionLimitSharedByReplicas(t *testing.T) {
	t.Parallel()
	clock := newTestClock()
	off := ratelimit.Rate{PerMinute: -1}
	limits := &web.RateLimits{Now: clock.now, FailedSignIn: off, DecisionPerIP: off, Decision: ratelimit.Rate{PerMinute: 30, Burst: 10}}
	a := webtest.StartWith(t, webtest.Options{RateLimits: limits})
	b := webtest.RestartWith(t, a, webtest.Options{RateLimits: limits})
	replicas := []*webtest.App{a, b}

	requester := a.NewMember(t, "acme", "Rita Requester", authz.RoleOperator, false)
	decider := a.NewMember(t, "acme", "Ada Admin", authz.RoleAdmin, false)
	staging := a.OrgEnvironmentID(t, "acme", "staging")
	rc := a.SessionFor(t, requester.UserID, requester.OrgID, time.Now())
	byForm := waitForState(t, a, a.RequestRun(t, rc, bucketRequest(staging, "eu-west")), run.PendingApproval)
	byAPI := waitForState(t, a, a.RequestRun(t, rc, bucketRequest(staging, "eu-central")), run.PendingApproval)

	// The session: one cookie, good on both replicas (sessions are in the database too).
	session := a.SessionFor(t, decider.UserID, decider.OrgID, time.Now())
	approve := "/runs/" + byForm.ID + "/approve"
	for i := range 10 {
		stale := decisionForm(t, a, session, byForm)
		stale.Set("plan_digest", "sha256:0000")
		resp := replicas[i%2].PostForm(t, session, approve, stale)
		body := webtest.ReadBody(t, resp)
		require.Equal(t, http.StatusConflict, resp.StatusCode, "decision %d, on replica %d, is decided (stale): %s", i+1, i%2+1, body)
	}
	good := decisionForm(t, a, session, byForm)
	for i, app := range replicas {
		resp := app.PostForm(t, session, approve, good)
		body := webtest.ReadBody(t, resp)
		require.Equal(t, http.StatusTooManyRequests, resp.StatusCode, "the 11th decision, on replica %d: %s", i+1, body)
		require.Equal(t, "2", resp.Header.Get("Retry-After"))
		require.Contains(t, body, "was not recorded. Try again in 2 seconds.")
	}
	require.Equal(t, run.PendingApproval, waitForState(t, a, byForm.ID, run.PendingApproval).State, "the run still waits")
	require.Zero(t, auditCount(t, a, byForm.ID, "run.approved"), "no approval audited")

	// The API: a token's burst over both replicas, its 11th a problem document.
	token := a.Token(t, decider, "read", "decide")
	evidence := func(r run.Run, digest string) string {
		status, text := newAPIChecker(t, a).call(token, http.MethodGet, "/api/v1/runs/"+r.ID+"/review", nil)
		require.Equal(t, http.StatusOK, status, text)
		review := decodeJSON[struct{ Evidence map[string]any }](t, text)
		if digest != "" {
			review.Evidence["plan_digest"] = digest
		}
		body, err := json.Marshal(map[string]any{"evidence": review.Evidence})
		require.NoError(t, err)
		return string(body)
	}
	stale, right := evidence(byAPI, "sha256:0000"), evidence(byAPI, "")
	approveAPI := "/api/v1/runs/" + byAPI.ID + "/approve"
	for i := range 10 {
		resp := replicas[i%2].API(t, token, http.MethodPost, approveAPI, stale)
		body := webtest.ReadBody(t, resp)
		require.Equal(t, http.StatusConflict, resp.StatusCode, "API decision %d, on replica %d: %s", i+1, i%2+1, body)
	}
	key := idempotency.NewKey()
	resp := b.APIKeyed(t, token, key, http.MethodPost, approveAPI, right)
	body := webtest.ReadBody(t, resp)
	require.Equal(t, http.StatusTooManyRequests, resp.StatusCode, body)
	require.Equal(t, "2", resp.Header.Get("Retry-After"))
	require.Equal(t, "application/problem+json", resp.Header.Get("Content-Type"))
	p := decodeJSON[struct{ Type, Code, Detail string }](t, body)
	require.Equal(t, "RATE_LIMITED", p.Code)
	require.Equal(t, "urn:gantry:problem:rate-limited", p.Type)
	require.True(t, strings.HasSuffix(p.Detail, "Try again in 2 seconds."), p.Detail)
	require.Zero(t, countRows(t, a, "SELECT count(*) FROM idempotency_keys WHERE key = ?", key), "the refused call kept no key")
	require.Zero(t, auditCount(t, a, byAPI.ID, "run.approved"))

	// Two seconds on, each replica lets one through: the refused requests, unchanged.
	clock.advance(2 * time.Second)
	resp = b.PostForm(t, session, approve, good)
	body = webtest.ReadBody(t, resp)
	require.Equal(t, http.StatusSeeOther, resp.StatusCode, body)
	resp = a.APIKeyed(t, token, key, http.MethodPost, approveAPI, right)
	body = webtest.ReadBody(t, resp)
	require.Equal(t, http.StatusOK, resp.StatusCode, body)
	require.EqualValues(t, 1, auditCount(t, a, byForm.ID, "run.approved"))
	require.EqualValues(t, 1, auditCount(t, a, byAPI.ID, "run.approved"))
}

// TestRateLimitsFailClosed: when the buckets cannot be read, a limited request is
// refused as a server error (web/ratelimit.go says why): a failed sign-in that cannot be
// counted answers 500 and writes no session, a decision is not recorded. Once the buckets answer again,
// the same decision goes through.
func TestRateLimitsFailClosed(t *testing.T) {
	t.Parallel()
	app := webtest.StartWith(t, webtest.Options{RateLimits: &web.RateLimits{Now: newTestClock().now}})
	requester := app.NewMember(t, "acme", "Rita Requester", authz.RoleOperator, false)
	decider := app.NewMember(t, "acme", "Ada Admin", authz.RoleAdmin, false)
	rc := app.SessionFor(t, requester.UserID, requester.OrgID, time.Now())
	r := waitForState(t, app, app.RequestRun(t, rc, bucketRequest(app.OrgEnvironmentID(t, "acme", "staging"), "eu-west")), run.PendingApproval)
	session := app.SessionFor(t, decider.UserID, decider.OrgID, time.Now())
	good := decisionForm(t, app, session, r)

	// The buckets' table out of reach, as a failing database would leave it.
	require.NoError(t, app.DB.Exec("ALTER TABLE rate_limit_buckets RENAME TO rate_limit_buckets_away").Error)
	sessions := countRows(t, app, "SELECT count(*) FROM sessions")
	resp := app.Get(t, app.Client(t), "/auth/callback?state=forged&code=forged")
	body := webtest.ReadBody(t, resp)
	require.Equal(t, http.StatusInternalServerError, resp.StatusCode, body)
	require.Equal(t, sessions, countRows(t, app, "SELECT count(*) FROM sessions"), "a sign-in refused writes no session")
	resp = app.PostForm(t, session, "/runs/"+r.ID+"/approve", good)
	body = webtest.ReadBody(t, resp)
	require.Equal(t, http.StatusInternalServerError, resp.StatusCode, body)
	require.Equal(t, run.PendingApproval, waitForState(t, app, r.ID, run.PendingApproval).State)
	require.Zero(t, auditCount(t, app, r.ID, "run.approved"))

	require.NoError(t, app.DB.Exec("ALTER TABLE rate_limit_buckets_away RENAME TO rate_limit_buckets").Error)
	resp = app.PostForm(t, session, "/runs/"+r.ID+"/approve", good)
	body = webtest.ReadBody(t, resp)
	require.Equal(t, http.StatusSeeOther, resp.StatusCode, body)
	require.EqualValues(t, 1, auditCount(t, app, r.ID, "run.approved"))
}
