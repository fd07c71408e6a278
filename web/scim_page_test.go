package web_test

import (
	"net/http"
	"net/url"
	"regexp"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"gantry/cmd/gantry/webtest"
	"gantry/models/authz"
)

var scimSecret = regexp.MustCompile(`data-testid="scim-secret-value">([^<]+)<`)

// TestSCIMTokenPage: an owner makes the organization's SCIM token on /settings/scim and
// sees it once; admins and operators can neither see the page nor make one; another
// organization's owner touches only their own; rotating ends the old token at once.
func TestSCIMTokenPage(t *testing.T) {
	t.Parallel()
	app := webtest.Start(t)
	owner := app.NewMember(t, "acme", "Opal Owner", authz.RoleOwner, false)
	c := app.SessionFor(t, owner.UserID, owner.OrgID, time.Now())

	page := func(c *http.Client) (int, string) {
		resp := app.Get(t, c, "/settings/scim")
		return resp.StatusCode, webtest.ReadBody(t, resp)
	}
	rotate := func(c *http.Client) (*http.Response, string) {
		resp := app.PostForm(t, c, "/settings/scim", url.Values{"_csrf": {app.CSRF(t, c)}})
		return resp, webtest.ReadBody(t, resp)
	}
	users := func(token string) int {
		status, _ := scimCall(t, app, token, "GET", "/scim/v2/Users", "")
		return status
	}

	status, body := page(c)
	require.Equal(t, http.StatusOK, status, body)
	require.Contains(t, body, "/scim/v2</code>")
	require.Contains(t, body, "None yet")
	require.Contains(t, body, "Make a SCIM token")
	require.NotContains(t, body, "scim-secret-value")
	members := webtest.ReadBody(t, app.Get(t, c, "/members"))
	require.Contains(t, members, `href="/settings/scim"`, "the owner finds the page from /members")

	resp, body := rotate(c)
	require.Equal(t, http.StatusCreated, resp.StatusCode, body)
	require.Equal(t, "no-store", resp.Header.Get("Cache-Control"))
	m := scimSecret.FindStringSubmatch(body)
	require.NotNil(t, m, "the new token is shown: %s", body)
	first := m[1]
	require.Contains(t, body, "will not be shown again")
	require.Equal(t, http.StatusOK, users(first), "the token shown works")

	status, body = page(c)
	require.Equal(t, http.StatusOK, status)
	require.NotContains(t, body, first, "the token is shown once")
	require.Contains(t, body, "by Opal Owner")
	require.Contains(t, body, "Rotate the SCIM token")
	require.Contains(t, body, "ends the current token at once")

	for _, role := range []authz.Role{authz.RoleAdmin, authz.RoleOperator} {
		other := app.NewMember(t, "acme", "Not Owner "+string(role), role, false)
		oc := app.SessionFor(t, other.UserID, other.OrgID, time.Now())
		status, body := page(oc)
		require.Equal(t, http.StatusForbidden, status, "%s sees the page: %s", role, body)
		require.NotContains(t, body, "SCIM token</button>", "%s sees a button", role)
		resp, body := rotate(oc)
		require.Equal(t, http.StatusForbidden, resp.StatusCode, "%s makes a token: %s", role, body)
		require.NotRegexp(t, scimSecret, body)
		require.NotContains(t, webtest.ReadBody(t, app.Get(t, oc, "/members")), `href="/settings/scim"`, "%s sees the link", role)
	}
	require.Equal(t, http.StatusOK, users(first), "refused attempts changed nothing")

	globex := app.NewMember(t, "globex", "Gil Globex", authz.RoleOwner, false)
	gc := app.SessionFor(t, globex.UserID, globex.OrgID, time.Now())
	status, body = page(gc)
	require.Equal(t, http.StatusOK, status)
	require.Contains(t, body, "None yet", "globex's owner sees acme's token: %s", body)
	resp, body = rotate(gc)
	require.Equal(t, http.StatusCreated, resp.StatusCode, body)
	require.Equal(t, http.StatusOK, users(first), "globex's rotation ends acme's token")

	resp, body = rotate(c)
	require.Equal(t, http.StatusCreated, resp.StatusCode, body)
	second := scimSecret.FindStringSubmatch(body)[1]
	require.NotEqual(t, first, second)
	require.Equal(t, http.StatusUnauthorized, users(first), "the old token works after rotation")
	require.Equal(t, http.StatusOK, users(second))
}
