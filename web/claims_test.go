package web_test

import (
	"net/http"
	"testing"

	"github.com/stretchr/testify/require"

	"gantry/cmd/gantry/webtest"
	"gantry/models/audit"
	"gantry/models/authz"
	"gantry/models/org"
	"gantry/models/signin"
)

// TestInvitationFromUserInfoClaims: a provider that serves e-mail, name and groups only
// from its UserInfo endpoint (OIDC Core §5.4): the invited, verified address becomes a
// member, with e-mail, name and the claims' sources stored for the diagnostics.
func TestInvitationFromUserInfoClaims(t *testing.T) {
	t.Parallel()
	app := webtest.StartWith(t, webtest.Options{ClaimsOnlyFromUserInfo: true})
	orgs := org.NewService(app.DB, audit.New(app.DB))
	require.NoError(t, orgs.Invite(t.Context(), app.Orgs["globex"], webtest.NewcomerEmail, authz.RoleOperator))

	c := app.Client(t)
	resp := app.LoginAs(t, c, webtest.NewcomerEmail, webtest.NewcomerPassword)
	body := webtest.ReadBody(t, resp)
	require.Equal(t, http.StatusOK, resp.StatusCode, body)
	require.Contains(t, body, "Globex")

	var u org.User
	require.NoError(t, app.DB.Where("subject = ?", "newcomer").Take(&u).Error)
	require.Equal(t, webtest.NewcomerEmail, u.Email)
	require.Equal(t, "Nora Newcomer", u.Name)
	require.NotNil(t, u.LastSignIn)
	a := *u.LastSignIn
	require.Equal(t, signin.FromUserInfo, a.EmailFrom)
	require.Equal(t, signin.FromUserInfo, a.NameFrom)
	require.Contains(t, a.UserInfo, "asked: ")
	require.True(t, a.Verified)
	require.Equal(t, signin.ByEmailVerified, a.VerifiedBy)
}

// TestClaimsFromIDTokenSkipUserInfo: a provider that puts every claim Gantry reads in
// the ID token is not asked again (UserInfo at most once, only when needed).
func TestClaimsFromIDTokenSkipUserInfo(t *testing.T) {
	t.Parallel()
	app := webtest.Start(t)
	app.LoggedIn(t, "operator@acme.test")
	var u org.User
	require.NoError(t, app.DB.Where("email = ?", "operator@acme.test").Take(&u).Error)
	require.NotNil(t, u.LastSignIn)
	require.Equal(t, signin.FromIDToken, u.LastSignIn.EmailFrom)
	require.Contains(t, u.LastSignIn.UserInfo, "not asked")
}
