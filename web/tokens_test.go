package web_test

import (
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"gantry/cmd/gantry/webtest"
	"gantry/models/authz"
)

// TestAPITokensOnTheAPI: a bearer token authenticates the JSON API only, with no cookie
// and no CSRF token; it does what its scopes allow within its holder's role (403
// beyond), stops at once when revoked or expired (401), and another organization's
// objects are not found (404).
func TestAPITokensOnTheAPI(t *testing.T) {
	t.Parallel()
	app := webtest.Start(t)
	admin := app.NewMember(t, "acme", "Tia Token", authz.RoleAdmin, false)
	read, manage := app.Token(t, admin, "read"), app.Token(t, admin, "admin")

	// Environments are managed by admins: a read token authenticates (not 401) and is
	// refused what its scope does not reach; the admin token lists them.
	resp := app.API(t, read, http.MethodGet, "/api/v1/environments", "")
	body := webtest.ReadBody(t, resp)
	require.Equal(t, http.StatusForbidden, resp.StatusCode, body)
	resp = app.API(t, manage, http.MethodGet, "/api/v1/environments", "")
	body = webtest.ReadBody(t, resp)
	require.Equal(t, http.StatusOK, resp.StatusCode, body)
	require.Contains(t, body, `"name":"staging"`)
	require.Equal(t, "no-store", resp.Header.Get("Cache-Control"))
	require.Empty(t, resp.Header.Values("Set-Cookie"), "a token request makes no session")

	created := `{"name":"token-made","tier":"development"}`
	resp = app.API(t, read, http.MethodPost, "/api/v1/environments", created)
	body = webtest.ReadBody(t, resp)
	require.Equal(t, http.StatusForbidden, resp.StatusCode, "a read token manages nothing: %s", body)
	require.Equal(t, "application/problem+json", resp.Header.Get("Content-Type"))
	require.Contains(t, body, `"code":"FORBIDDEN"`)
	resp = app.API(t, manage, http.MethodPost, "/api/v1/environments", created)
	body = webtest.ReadBody(t, resp)
	require.Equal(t, http.StatusCreated, resp.StatusCode, "an admin token needs no CSRF token: %s", body)

	// Another organization's environment is not found, as for a person.
	resp = app.API(t, manage, http.MethodGet, "/api/v1/environments/"+app.OrgEnvironmentID(t, "globex", "staging"), "")
	body = webtest.ReadBody(t, resp)
	require.Equal(t, http.StatusNotFound, resp.StatusCode, body)

	// Unknown, malformed or missing: 401 with a Bearer challenge.
	for _, tok := range []string{"gantry_nope.nope", read + "x", "not-a-token", ""} {
		resp = app.API(t, tok, http.MethodGet, "/api/v1/environments", "")
		body = webtest.ReadBody(t, resp)
		require.Equal(t, http.StatusUnauthorized, resp.StatusCode, "%q: %s", tok, body)
		require.Contains(t, body, `"code":"UNAUTHENTICATED"`)
	}
	// A token is for the API: the pages want a person's sign-in.
	for _, page := range []string{"/", "/settings/tokens", "/runs"} {
		resp = app.API(t, read, http.MethodGet, page, "")
		webtest.ReadBody(t, resp)
		require.Equal(t, http.StatusUnauthorized, resp.StatusCode, page)
	}
	// A bad token next to a good session cookie is still refused: the token decides.
	c := app.SessionFor(t, admin.UserID, admin.OrgID, time.Now())
	req, err := http.NewRequest(http.MethodGet, app.URL+"/api/v1/environments", nil)
	require.NoError(t, err)
	req.Header.Set("Authorization", "Bearer gantry_nope.nope")
	resp, err = c.Do(req)
	require.NoError(t, err)
	webtest.ReadBody(t, resp)
	require.Equal(t, http.StatusUnauthorized, resp.StatusCode)

	// Revoked and expired tokens stop at once.
	tokens, err := app.System.Tokens.List(authz.WithSubject(t.Context(), admin.Subject(time.Now())))
	require.NoError(t, err)
	require.Len(t, tokens, 2)
	for _, tok := range tokens {
		if tok.Scopes[0] == authz.ScopeRead {
			require.NoError(t, app.System.Tokens.Revoke(authz.WithSubject(t.Context(), admin.Subject(time.Now())), tok.ID))
		} else {
			require.NoError(t, app.DB.Exec("UPDATE api_tokens SET expires_at = now() WHERE id = ?", tok.ID).Error)
		}
	}
	for _, tok := range []string{read, manage} {
		resp = app.API(t, tok, http.MethodGet, "/api/v1/environments", "")
		body = webtest.ReadBody(t, resp)
		require.Equal(t, http.StatusUnauthorized, resp.StatusCode, body)
		require.Contains(t, resp.Header.Get("WWW-Authenticate"), `error="invalid_token"`)
	}
}

var tokenSecret = regexp.MustCompile(`data-testid="token-secret-value">([^<]+)<`)

// TestTokensPage: a person makes a token on the settings page (field messages and
// nothing stored for a bad form), sees its secret once, uses it on the API, and revokes
// it.
func TestTokensPage(t *testing.T) {
	t.Parallel()
	app := webtest.Start(t)
	c := app.LoggedIn(t, "admin@acme.test")
	csrf := app.CSRF(t, c)

	resp := app.Get(t, c, "/settings/tokens")
	body := webtest.ReadBody(t, resp)
	require.Equal(t, http.StatusOK, resp.StatusCode)
	require.Contains(t, body, "No tokens yet.")
	require.Contains(t, body, "Service accounts", "an admin manages service accounts")

	resp = app.PostForm(t, c, "/settings/tokens", url.Values{"_csrf": {csrf}, "name": {""}, "days": {"0"}, "scopes": {"owner"}})
	body = webtest.ReadBody(t, resp)
	require.Equal(t, http.StatusUnprocessableEntity, resp.StatusCode)
	for _, field := range []string{"name", "scopes", "lifetime"} {
		require.Contains(t, body, `data-testid="error-`+field+`"`, field)
	}
	require.Contains(t, body, "&#34;owner&#34; is not a scope")
	require.EqualValues(t, 0, countRows(t, app, "SELECT count(*) FROM api_tokens"))

	resp = app.PostForm(t, c, "/settings/tokens", url.Values{"_csrf": {csrf}, "name": {"deploy-pipeline"}, "days": {"7"}, "scopes": {"read", "admin"}})
	body = webtest.ReadBody(t, resp)
	require.Equal(t, http.StatusCreated, resp.StatusCode, body)
	require.Equal(t, "no-store", resp.Header.Get("Cache-Control"))
	m := tokenSecret.FindStringSubmatch(body)
	require.NotNil(t, m, body)
	secret := m[1]
	require.True(t, strings.HasPrefix(secret, "gantry_"))

	resp = app.API(t, secret, http.MethodGet, "/api/v1/environments", "")
	webtest.ReadBody(t, resp)
	require.Equal(t, http.StatusOK, resp.StatusCode)

	body = webtest.ReadBody(t, app.Get(t, c, "/settings/tokens"))
	require.NotContains(t, body, secret, "shown once")
	require.Contains(t, body, `data-testid="token-deploy-pipeline" data-state="active"`)
	id := regexp.MustCompile(`action="/settings/tokens/(tok-[^/"]+)/revoke"`).FindStringSubmatch(body)
	require.NotNil(t, id, body)

	// Another member cannot revoke it (not found); its holder can.
	other := app.LoggedIn(t, "viewer@acme.test")
	resp = app.PostForm(t, other, "/settings/tokens/"+id[1]+"/revoke", url.Values{"_csrf": {app.CSRF(t, other)}})
	webtest.ReadBody(t, resp)
	require.Equal(t, http.StatusNotFound, resp.StatusCode)
	resp = app.PostForm(t, c, "/settings/tokens/"+id[1]+"/revoke", url.Values{"_csrf": {csrf}})
	webtest.ReadBody(t, resp)
	require.Equal(t, http.StatusSeeOther, resp.StatusCode)
	resp = app.API(t, secret, http.MethodGet, "/api/v1/environments", "")
	webtest.ReadBody(t, resp)
	require.Equal(t, http.StatusUnauthorized, resp.StatusCode)
	body = webtest.ReadBody(t, app.Get(t, c, "/settings/tokens"))
	require.Contains(t, body, `data-testid="token-deploy-pipeline" data-state="revoked"`)
}
