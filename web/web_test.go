package web_test

import (
	"encoding/json"
	"net/http"
	"net/url"
	"os"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"gantry/cmd/gantry/webtest"
	"gantry/models/audit"
	"gantry/models/authz"
	"gantry/models/db/dbtest"
	"gantry/models/idempotency"
	"gantry/models/org"
	"gantry/web"
)

func TestMain(m *testing.M) { os.Exit(dbtest.Main(m)) }

func TestLoginEndToEnd(t *testing.T) {
	t.Parallel()
	app := webtest.Start(t)
	c := app.LoggedIn(t, "admin@acme.test")
	body := webtest.ReadBody(t, app.Get(t, c, "/"))
	require.Contains(t, body, "Acme Corp")
	require.Contains(t, body, "Adam (Acme Corp admin)")

	// The sign-in is audited in the organization the user lands in.
	var signIns int64
	require.NoError(t, app.DB.Table("audit_events").Where("organization_id = ? AND action = 'user.signed_in'", app.Orgs["acme"]).Count(&signIns).Error)
	require.EqualValues(t, 1, signIns)

	// The session cookie is HttpOnly and SameSite=Lax, and the stored session id is only a hash.
	u, err := url.Parse(app.URL)
	require.NoError(t, err)
	var cookie *http.Cookie
	for _, ck := range c.Jar.Cookies(u) {
		if ck.Name == "gantry_session" {
			cookie = ck
		}
	}
	require.NotNil(t, cookie)
	var raw int64
	require.NoError(t, app.DB.Raw("SELECT count(*) FROM sessions WHERE encode(id_hash, 'escape') LIKE ?", "%"+cookie.Value+"%").Scan(&raw).Error)
	require.Zero(t, raw, "the cookie value must not be stored")

	// Starting a sign-in writes nothing: the sign-in in progress is a sealed cookie,
	// HttpOnly and SameSite=Lax, sent back to the callback only.
	before := countRows(t, app, "SELECT count(*) FROM sessions")
	resp := app.Get(t, app.Client(t), "/login")
	resp.Body.Close()
	require.Equal(t, http.StatusFound, resp.StatusCode)
	require.Equal(t, before, countRows(t, app, "SELECT count(*) FROM sessions"), "a sign-in start writes no session")
	var flow *http.Cookie
	for _, ck := range resp.Cookies() {
		require.NotEqual(t, "gantry_session", ck.Name, "no session before the sign-in succeeds")
		if ck.Name == "gantry_login" {
			flow = ck
		}
	}
	require.NotNil(t, flow)
	require.True(t, flow.HttpOnly)
	require.Equal(t, http.SameSiteLaxMode, flow.SameSite)
	require.Equal(t, "/auth/callback", flow.Path)
	require.Equal(t, 600, flow.MaxAge, "a sign-in may take 10 minutes")
	sent, err := resp.Location()
	require.NoError(t, err)
	require.NotContains(t, flow.Value, sent.Query().Get("state"), "the cookie is sealed: the state is not readable in it")
	opened, ok := web.OpenLoginFlow(app.Keys, flow.Value)
	require.True(t, ok)
	require.Equal(t, sent.Query().Get("state"), opened.State)
}

func TestLoginRefusesTamperedState(t *testing.T) {
	t.Parallel()
	app := webtest.Start(t)
	c := app.Client(t)
	action, id := app.StartLogin(t, c)
	callback := app.SubmitCredentials(t, c, action, id, "admin@acme.test", "admin-acme")

	tampered := *callback
	q := tampered.Query()
	q.Set("state", q.Get("state")+"x")
	tampered.RawQuery = q.Encode()
	resp := app.Get(t, c, strings.TrimPrefix(tampered.String(), app.URL))
	body := webtest.ReadBody(t, resp)
	require.Equal(t, http.StatusBadRequest, resp.StatusCode)
	require.Contains(t, body, "state returned by the identity provider does not match")

	// The flow was consumed: replaying the genuine callback does not sign in either.
	resp = app.Get(t, c, strings.TrimPrefix(callback.String(), app.URL))
	webtest.ReadBody(t, resp)
	require.Equal(t, http.StatusBadRequest, resp.StatusCode)
	requireSignedOut(t, app, c)
}

func TestLoginRefusesTamperedNonce(t *testing.T) {
	t.Parallel()
	app := webtest.Start(t)
	c := app.Client(t)
	action, id := app.StartLogin(t, c)
	// The nonce Gantry expects no longer matches the one the provider puts in the ID token
	// (resealed with Gantry's keys: only Gantry could make this cookie).
	editLoginFlow(t, app, c, func(f *web.LoginFlow) { f.Nonce = "tampered-nonce" })
	callback := app.SubmitCredentials(t, c, action, id, "admin@acme.test", "admin-acme")
	resp := app.Get(t, c, strings.TrimPrefix(callback.String(), app.URL))
	body := webtest.ReadBody(t, resp)
	require.Equal(t, http.StatusBadRequest, resp.StatusCode)
	require.Contains(t, body, "nonce does not match")
	requireSignedOut(t, app, c)
}

func TestLoginRefusesWrongPKCEVerifier(t *testing.T) {
	t.Parallel()
	app := webtest.Start(t)
	c := app.Client(t)
	action, id := app.StartLogin(t, c)
	editLoginFlow(t, app, c, func(f *web.LoginFlow) { f.Verifier = "not-the-verifier-that-made-the-challenge-xxxxxxxxxxxx" })
	callback := app.SubmitCredentials(t, c, action, id, "admin@acme.test", "admin-acme")
	resp := app.Get(t, c, strings.TrimPrefix(callback.String(), app.URL))
	body := webtest.ReadBody(t, resp)
	require.Equal(t, http.StatusBadRequest, resp.StatusCode)
	require.Contains(t, body, "refused the authorization code")
	requireSignedOut(t, app, c)
}

func TestLogoutEndsSession(t *testing.T) {
	t.Parallel()
	app := webtest.Start(t)
	c := app.LoggedIn(t, "viewer@acme.test")
	u, _ := url.Parse(app.URL)
	oldCookies := c.Jar.Cookies(u)
	require.NotEmpty(t, oldCookies)

	token := app.CSRF(t, c)
	resp := app.PostForm(t, c, "/logout", url.Values{"_csrf": {token}})
	webtest.ReadBody(t, resp)
	require.Equal(t, http.StatusSeeOther, resp.StatusCode)
	require.Equal(t, "/signed-out", resp.Header.Get("Location"))
	requireSignedOut(t, app, c)

	var sessions int64
	require.NoError(t, app.DB.Table("sessions").Where("user_id IS NOT NULL").Count(&sessions).Error)
	require.Zero(t, sessions)
	// Replaying the old cookie does not bring the session back.
	replay := app.Client(t)
	replay.Jar.SetCookies(u, oldCookies)
	requireSignedOut(t, app, replay)
}

func requireSignedOut(t *testing.T, app *webtest.App, c *http.Client) {
	t.Helper()
	resp := app.Get(t, c, "/environments")
	webtest.ReadBody(t, resp)
	require.Equal(t, http.StatusFound, resp.StatusCode)
	require.True(t, strings.HasPrefix(resp.Header.Get("Location"), "/login"), resp.Header.Get("Location"))
}

// TestTenantIsolation: an admin of Acme gets 404 for Globex's environment on every
// environment route, and Globex's environment does not change.
func TestTenantIsolation(t *testing.T) {
	t.Parallel()
	app := webtest.Start(t)
	c := app.LoggedIn(t, "admin@acme.test")
	foreign := app.OrgEnvironmentID(t, "globex", "production")
	token := app.CSRF(t, c)

	for _, path := range []string{"/environments/" + foreign, "/environments/" + foreign + "/edit", "/api/v1/environments/" + foreign} {
		resp := app.Get(t, c, path)
		webtest.ReadBody(t, resp)
		require.Equal(t, http.StatusNotFound, resp.StatusCode, path)
	}
	resp := app.PostForm(t, c, "/environments/"+foreign, url.Values{"_csrf": {token}, "name": {"taken-over"}, "tier": {"development"}, "requires_approval": {"off"}})
	webtest.ReadBody(t, resp)
	require.Equal(t, http.StatusNotFound, resp.StatusCode)

	req, _ := http.NewRequest(http.MethodPut, app.URL+"/api/v1/environments/"+foreign, strings.NewReader(`{"name":"taken-over","tier":"development"}`))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("X-CSRF-Token", token)
	req.Header.Set(idempotency.Header, idempotency.NewKey())
	apiResp, err := c.Do(req)
	require.NoError(t, err)
	var problem map[string]any
	require.NoError(t, json.NewDecoder(apiResp.Body).Decode(&problem))
	apiResp.Body.Close()
	require.Equal(t, http.StatusNotFound, apiResp.StatusCode)
	require.EqualValues(t, 404, problem["status"])

	var name string
	require.NoError(t, app.DB.Raw("SELECT name FROM environments WHERE id = ?", foreign).Scan(&name).Error)
	require.Equal(t, "production", name)
	// The unknown id behaves exactly like the foreign one.
	resp = app.Get(t, c, "/environments/env-doesnotexist")
	webtest.ReadBody(t, resp)
	require.Equal(t, http.StatusNotFound, resp.StatusCode)
}

// TestEnvironmentAdministrationRoles: viewer, operator and auditor are refused with 403
// on every environment administration route; admin and owner succeed.
func TestEnvironmentAdministrationRoles(t *testing.T) {
	t.Parallel()
	app := webtest.Start(t)
	envID := app.OrgEnvironmentID(t, "acme", "staging")
	for _, role := range []string{"viewer", "operator", "auditor", "admin", "owner"} {
		c := app.LoggedIn(t, role+"@acme.test")
		token := app.CSRF(t, c)
		allowed := role == "admin" || role == "owner"
		for _, path := range []string{"/environments", "/environments/new", "/environments/" + envID, "/environments/" + envID + "/edit", "/api/v1/environments"} {
			resp := app.Get(t, c, path)
			webtest.ReadBody(t, resp)
			if allowed {
				require.Equal(t, http.StatusOK, resp.StatusCode, "%s GET %s", role, path)
			} else {
				require.Equal(t, http.StatusForbidden, resp.StatusCode, "%s GET %s", role, path)
			}
		}
		create := app.PostForm(t, c, "/environments", url.Values{"_csrf": {token}, "name": {"by-" + role}, "tier": {"development"}})
		webtest.ReadBody(t, create)
		update := app.PostForm(t, c, "/environments/"+envID, url.Values{"_csrf": {token}, "name": {"staging"}, "tier": {"staging"}, "requires_approval": {"off", "on"}})
		webtest.ReadBody(t, update)
		if allowed {
			require.Equal(t, http.StatusSeeOther, create.StatusCode, role)
			require.Equal(t, http.StatusSeeOther, update.StatusCode, role)
		} else {
			require.Equal(t, http.StatusForbidden, create.StatusCode, role)
			require.Equal(t, http.StatusForbidden, update.StatusCode, role)
			var n int64
			require.NoError(t, app.DB.Table("environments").Where("name = ?", "by-"+role).Count(&n).Error)
			require.Zero(t, n)
		}
	}
}

// TestCSRF: a form post without a valid token is refused and changes nothing.
func TestCSRF(t *testing.T) {
	t.Parallel()
	app := webtest.Start(t)
	c := app.LoggedIn(t, "admin@acme.test")
	other := app.LoggedIn(t, "owner@acme.test")
	otherToken := app.CSRF(t, other)
	envID := app.OrgEnvironmentID(t, "acme", "development")

	before := counts(t, app)
	for name, token := range map[string]string{"missing": "", "wrong": "forged-token", "another session's": otherToken} {
		form := url.Values{"name": {"csrf-" + strings.ReplaceAll(name, "'", "")}, "tier": {"production"}}
		if token != "" {
			form.Set("_csrf", token)
		}
		resp := app.PostForm(t, c, "/environments", form)
		webtest.ReadBody(t, resp)
		require.Equal(t, http.StatusForbidden, resp.StatusCode, name)
		resp = app.PostForm(t, c, "/environments/"+envID, form)
		webtest.ReadBody(t, resp)
		require.Equal(t, http.StatusForbidden, resp.StatusCode, name)
	}
	req, _ := http.NewRequest(http.MethodPost, app.URL+"/api/v1/environments", strings.NewReader(`{"name":"csrf-api","tier":"development"}`))
	req.Header.Set("Content-Type", "application/json")
	resp, err := c.Do(req)
	require.NoError(t, err)
	webtest.ReadBody(t, resp)
	require.Equal(t, http.StatusForbidden, resp.StatusCode)
	require.Equal(t, before, counts(t, app), "a refused post must change nothing")

	// With the token the same post goes through: the refusal above was the token's doing.
	resp = app.PostForm(t, c, "/environments", url.Values{"_csrf": {app.CSRF(t, c)}, "name": {"csrf-ok"}, "tier": {"development"}})
	webtest.ReadBody(t, resp)
	require.Equal(t, http.StatusSeeOther, resp.StatusCode)
}

type rowCounts struct{ Environments, Audit int64 }

func counts(t *testing.T, app *webtest.App) rowCounts {
	t.Helper()
	var rc rowCounts
	require.NoError(t, app.DB.Table("environments").Count(&rc.Environments).Error)
	require.NoError(t, app.DB.Table("audit_events").Count(&rc.Audit).Error)
	return rc
}

// TestEnvironmentValidation: bad input is a 422 with a message on the field, and
// nothing is written.
func TestEnvironmentValidation(t *testing.T) {
	t.Parallel()
	app := webtest.Start(t)
	c := app.LoggedIn(t, "admin@acme.test")
	token := app.CSRF(t, c)
	cases := []struct {
		name, tier, field, message string
	}{
		{"", "staging", "name", "Enter a name."},
		{"Bad Name!", "staging", "name", "Use lower-case letters"},
		{strings.Repeat("a", 64), "staging", "name", "at most 63"},
		{"staging", "staging", "name", "already exists"},
		{"fine-name", "moon", "tier", "Choose development, staging or production."},
	}
	before := counts(t, app)
	for _, tc := range cases {
		resp := app.PostForm(t, c, "/environments", url.Values{"_csrf": {token}, "name": {tc.name}, "tier": {tc.tier}})
		body := webtest.ReadBody(t, resp)
		require.Equal(t, http.StatusUnprocessableEntity, resp.StatusCode, tc.name)
		require.Contains(t, body, `data-testid="error-`+tc.field+`"`, tc.name)
		require.Contains(t, body, tc.message, tc.name)
	}
	require.Equal(t, before, counts(t, app))

	// The JSON API answers 422 with the same field messages.
	req, _ := http.NewRequest(http.MethodPost, app.URL+"/api/v1/environments", strings.NewReader(`{"name":"staging","tier":"moon"}`))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("X-CSRF-Token", token)
	req.Header.Set(idempotency.Header, idempotency.NewKey())
	resp, err := c.Do(req)
	require.NoError(t, err)
	var problem struct {
		Status int               `json:"status"`
		Fields map[string]string `json:"fields"`
	}
	require.NoError(t, json.NewDecoder(resp.Body).Decode(&problem))
	resp.Body.Close()
	require.Equal(t, http.StatusUnprocessableEntity, resp.StatusCode)
	require.Contains(t, problem.Fields["name"], "already exists")
	require.Contains(t, problem.Fields["tier"], "Choose")
	require.Equal(t, before, counts(t, app))
}

// TestEnvironmentChangesAudited: every change is one audit event with its actor, the
// chain verifies, and the database refuses to edit or delete the log.
func TestEnvironmentChangesAudited(t *testing.T) {
	t.Parallel()
	app := webtest.Start(t)
	c := app.LoggedIn(t, "admin@acme.test")
	token := app.CSRF(t, c)

	resp := app.PostForm(t, c, "/environments", url.Values{"_csrf": {token}, "name": {"perf"}, "tier": {"production"}, "requires_approval": {"default"}})
	webtest.ReadBody(t, resp)
	require.Equal(t, http.StatusSeeOther, resp.StatusCode)
	var env struct {
		ID               string
		RequiresApproval bool
	}
	require.NoError(t, app.DB.Raw("SELECT id, requires_approval FROM environments WHERE organization_id = ? AND name = 'perf'", app.Orgs["acme"]).Scan(&env).Error)
	require.True(t, env.RequiresApproval, "production defaults to requiring approval")

	var viewerID string
	require.NoError(t, app.DB.Raw("SELECT id FROM users WHERE email = 'viewer@acme.test'").Scan(&viewerID).Error)
	edit := url.Values{"_csrf": {token}, "name": {"perf"}, "tier": {"production"}, "requires_approval": {"off"}, "restricted": {"on"}, "grants": {viewerID}}
	resp = app.PostForm(t, c, "/environments/"+env.ID, edit)
	webtest.ReadBody(t, resp)
	require.Equal(t, http.StatusSeeOther, resp.StatusCode)
	// The same edit again changes nothing and so records nothing.
	resp = app.PostForm(t, c, "/environments/"+env.ID, edit)
	webtest.ReadBody(t, resp)
	require.Equal(t, http.StatusSeeOther, resp.StatusCode)

	var events []audit.Event
	require.NoError(t, app.DB.Where("target_id = ?", env.ID).Order("seq").Find(&events).Error)
	require.Len(t, events, 2)
	require.Equal(t, "environment.created", events[0].Action)
	require.Equal(t, "environment.updated", events[1].Action)
	var adminID string
	require.NoError(t, app.DB.Raw("SELECT id FROM users WHERE email = 'admin@acme.test'").Scan(&adminID).Error)
	for _, ev := range events {
		require.Equal(t, adminID, ev.ActorID)
		require.Equal(t, "Adam (Acme Corp admin)", ev.ActorName)
	}
	var data struct {
		Before, After map[string]any
	}
	require.NoError(t, json.Unmarshal(events[1].Data, &data))
	require.Equal(t, true, data.Before["requires_approval"])
	require.Equal(t, false, data.After["requires_approval"])
	require.Equal(t, []any{viewerID}, data.After["grants"])

	n, err := audit.New(app.DB).Verify(t.Context(), app.Orgs["acme"])
	require.NoError(t, err)
	require.Greater(t, n, 2)

	require.ErrorContains(t, app.DB.Exec("UPDATE audit_events SET action = 'x' WHERE target_id = ?", env.ID).Error, "append-only")
	require.ErrorContains(t, app.DB.Exec("DELETE FROM audit_events WHERE target_id = ?", env.ID).Error, "append-only")
	require.ErrorContains(t, app.DB.Exec("TRUNCATE audit_events").Error, "append-only")
}

// TestSessionIdleTimeout: a session unused for longer than the idle timeout is over.
func TestSessionIdleTimeout(t *testing.T) {
	t.Parallel()
	app := webtest.Start(t)
	c := app.LoggedIn(t, "viewer@acme.test")
	resp := app.Get(t, c, "/")
	webtest.ReadBody(t, resp)
	require.Equal(t, http.StatusOK, resp.StatusCode)
	require.NoError(t, app.DB.Exec("UPDATE sessions SET last_seen_at = now() - interval '31 minutes' WHERE user_id IS NOT NULL").Error)
	requireSignedOut(t, app, c)
}

// TestErrorPagesAndHeaders: the error pages a person sees, JSON for the API, and the
// security headers on every answer.
func TestErrorPagesAndHeaders(t *testing.T) {
	t.Parallel()
	app := webtest.Start(t)
	c := app.LoggedIn(t, "viewer@acme.test")
	resp := app.Get(t, c, "/environments")
	body := webtest.ReadBody(t, resp)
	require.Equal(t, http.StatusForbidden, resp.StatusCode)
	require.Contains(t, body, "Not allowed")
	csp := resp.Header.Get("Content-Security-Policy")
	require.Contains(t, csp, "script-src 'self'")
	require.NotContains(t, csp, "unsafe-inline")
	require.Equal(t, "nosniff", resp.Header.Get("X-Content-Type-Options"))
	require.Equal(t, "DENY", resp.Header.Get("X-Frame-Options"))
	require.NotContains(t, body, "style=", "no inline style attributes")
	require.NotContains(t, body, "<script>", "no inline scripts")

	resp = app.Get(t, c, "/api/v1/environments")
	body = webtest.ReadBody(t, resp)
	require.Equal(t, http.StatusForbidden, resp.StatusCode)
	require.Equal(t, "application/problem+json", resp.Header.Get("Content-Type"), "an RFC 9457 problem document")
	require.Contains(t, body, `"status":403`)
	require.Contains(t, body, `"code":"FORBIDDEN"`)

	resp = app.Get(t, c, "/no/such/page")
	webtest.ReadBody(t, resp)
	require.Equal(t, http.StatusNotFound, resp.StatusCode)
}

// TestInvitationBecomesMembership: someone who belongs to no organization sees a page
// saying so; after an invitation for their verified address, signing in makes them a
// member with the invited role.
func TestInvitationBecomesMembership(t *testing.T) {
	t.Parallel()
	app := webtest.Start(t)
	c := app.Client(t)
	resp := app.LoginAs(t, c, webtest.NewcomerEmail, webtest.NewcomerPassword)
	body := webtest.ReadBody(t, resp)
	require.Equal(t, http.StatusForbidden, resp.StatusCode)
	require.Contains(t, body, "not a member of any organization")

	orgs := org.NewService(app.DB, audit.New(app.DB))
	require.NoError(t, orgs.Invite(t.Context(), app.Orgs["globex"], "NewComer@Example.test", authz.RoleOperator))

	c = app.Client(t)
	resp = app.LoginAs(t, c, webtest.NewcomerEmail, webtest.NewcomerPassword)
	body = webtest.ReadBody(t, resp)
	require.Equal(t, http.StatusOK, resp.StatusCode, body)
	require.Contains(t, body, "Globex")
	require.Contains(t, body, "operator")
	var pending int64
	require.NoError(t, app.DB.Table("invitations").Count(&pending).Error)
	require.Zero(t, pending, "an accepted invitation is used up")
	var accepted int64
	require.NoError(t, app.DB.Table("audit_events").Where("organization_id = ? AND action = 'invitation.accepted'", app.Orgs["globex"]).Count(&accepted).Error)
	require.EqualValues(t, 1, accepted)
}

// TestOrganizationSwitcher: a member of two organizations switches between them; an
// organization they do not belong to cannot be switched to.
func TestOrganizationSwitcher(t *testing.T) {
	t.Parallel()
	app := webtest.Start(t)
	var adminID string
	require.NoError(t, app.DB.Raw("SELECT id FROM users WHERE email = 'admin@acme.test'").Scan(&adminID).Error)
	orgs := org.NewService(app.DB, audit.New(app.DB))
	require.NoError(t, orgs.EnsureMembership(t.Context(), app.Orgs["globex"], adminID, authz.RoleViewer))

	c := app.LoggedIn(t, "admin@acme.test")
	body := webtest.ReadBody(t, app.Get(t, c, "/"))
	require.Contains(t, body, `id="org-switch"`)
	require.Contains(t, body, "<h1>Acme Corp</h1>")
	token := app.CSRF(t, c)

	resp := app.PostForm(t, c, "/org/switch", url.Values{"_csrf": {token}, "organization_id": {app.Orgs["globex"]}})
	webtest.ReadBody(t, resp)
	require.Equal(t, http.StatusSeeOther, resp.StatusCode)
	body = webtest.ReadBody(t, app.Get(t, c, "/"))
	require.Contains(t, body, "<h1>Globex</h1>")
	require.Contains(t, body, "Switched to Globex.")
	// As a viewer in Globex, environment administration is refused.
	resp = app.Get(t, c, "/environments")
	webtest.ReadBody(t, resp)
	require.Equal(t, http.StatusForbidden, resp.StatusCode)

	resp = app.PostForm(t, c, "/org/switch", url.Values{"_csrf": {token}, "organization_id": {"org-not-mine"}})
	webtest.ReadBody(t, resp)
	require.Equal(t, http.StatusNotFound, resp.StatusCode)
}
