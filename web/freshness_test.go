package web_test

import (
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"gantry/cmd/gantry/webtest"
	"gantry/models/run"
)

// elevatedRun is a destroy of a bucket the operator made in development: risk 3, the
// owner decides, with a fresh sign-in.
func elevatedRun(t *testing.T, app *webtest.App) run.Run {
	t.Helper()
	operator := app.LoggedIn(t, "operator@acme.test")
	dev := app.OrgEnvironmentID(t, "acme", "development")
	waitForState(t, app, app.RequestRun(t, operator, bucketRequest(dev, "eu-west")), run.Succeeded)
	form := bucketRequest(dev, "eu-west")
	form.Set("kind", "destroy")
	r := waitForState(t, app, app.RequestRun(t, operator, form), run.PendingApproval)
	require.Equal(t, 3, *r.RiskClass)
	require.True(t, run.RequirementOf(r).Elevated)
	return r
}

// TestSignInWithoutAuthTimeIsNeverFresh: with a provider that leaves auth_time out of its
// ID tokens, the owner signs in (the sign-in works: no auth_time is stored, not "now")
// yet a risk-3 decision is refused as needing a fresh sign-in, and nothing is decided.
// Signing in again for it is refused too, with what to do: the provider must send
// auth_time; and the decision is still refused after it.
func TestSignInWithoutAuthTimeIsNeverFresh(t *testing.T) {
	t.Parallel()
	app := webtest.StartWith(t, webtest.Options{OmitAuthTime: true})
	r := elevatedRun(t, app)

	owner := app.LoggedIn(t, "owner@acme.test") // through the provider, just now
	require.Zero(t, countRows(t, app, `SELECT count(*) FROM sessions WHERE data ? 'auth_time'
		AND user_id = (SELECT id FROM users WHERE email = 'owner@acme.test')`), "no proof, no sign-in time")
	refused := func(why string) {
		t.Helper()
		page := webtest.ReadBody(t, app.Get(t, owner, "/runs/"+r.ID+"/review"))
		require.Contains(t, page, `id="reauthenticate"`, why)
		require.NotContains(t, page, `id="approve"`, why)
		resp := app.PostForm(t, owner, "/runs/"+r.ID+"/approve", decisionForm(t, app, owner, r))
		body := webtest.ReadBody(t, resp)
		require.Equal(t, http.StatusForbidden, resp.StatusCode, "%s: %s", why, body)
		require.Contains(t, body, "it needs a sign-in within the last 15 minutes")
		require.Zero(t, auditCount(t, app, r.ID, "run.approved"), why)
		require.Equal(t, run.PendingApproval, waitForState(t, app, r.ID, run.PendingApproval).State, why)
	}
	refused("a sign-in without auth_time")

	// "Sign in again to decide": the provider authenticates the owner, and still does
	// not say when.
	action, id := app.StartLoginAt(t, owner, "/login?"+url.Values{"reauth": {"1"}, "return_to": {"/runs/" + r.ID + "/review"}}.Encode())
	callback := app.SubmitCredentials(t, owner, action, id, "owner@acme.test", "owner-acme")
	resp := app.Get(t, owner, strings.TrimPrefix(callback.String(), app.URL))
	body := webtest.ReadBody(t, resp)
	require.Equal(t, http.StatusBadRequest, resp.StatusCode, body)
	require.Contains(t, body, "its ID token has no auth_time")
	require.Contains(t, body, "ask your Gantry administrator to have the provider send auth_time")
	refused("after signing in again without auth_time")
}
