//go:build !fast

// Live: needs the zitadel/oidc example OpenID Provider (built from the module go.mod pins into the user cache the first time) and PostgreSQL.
package web_test

import (
	"net"
	"net/http"
	"net/url"
	"os"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"gantry/cmd/gantry/webtest"
	"gantry/models/audit"
	"gantry/models/authz"
	"gantry/models/org"
	"gantry/models/signin"
	"gantry/runner/tofu"
)

// TestSignInThroughAnotherOpenIDProvider signs in through an OpenID Provider Gantry did
// not write (the zitadel/oidc example server), which serves e-mail, email_verified and
// name only from its UserInfo endpoint: an invited, verified address becomes a member,
// with e-mail and name stored; a person with an unverified address lands on the "not a
// member" page, which says which address the provider asserted and that it did not count.
func TestSignInThroughAnotherOpenIDProvider(t *testing.T) {
	t.Parallel()
	root, err := tofu.RepoRoot(".")
	require.NoError(t, err)
	bin, err := webtest.EnsureExampleOP(t.Context(), root, os.Stderr)
	require.NoError(t, err)

	gantryLn, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	base := "http://" + gantryLn.Addr().String()
	op := webtest.StartExampleOP(t, bin, base+"/auth/callback", []webtest.ExampleOPUser{
		{ID: "u-alice", Username: "alice", Password: "alice-pass", FirstName: "Alice", LastName: "Liddell",
			Email: "alice@acme.example", EmailVerified: true, PreferredLanguage: "en"},
		// The example omits email_verified when it is false (omitempty): no claim at all.
		{ID: "u-carol", Username: "carol", Password: "carol-pass", FirstName: "Carol", LastName: "Cole",
			Email: "carol@acme.example", PreferredLanguage: "en"},
		{ID: "u-bob", Username: "bob", Password: "bob-pass", FirstName: "Bob", LastName: "Brown",
			Email: "bob@elsewhere.example", PreferredLanguage: "en"},
	})
	app := webtest.StartWith(t, webtest.Options{Listener: gantryLn, Provider: &op.Client, VerifiedDomains: []string{"acme.example"}})
	orgs := org.NewService(app.DB, audit.New(app.DB))
	for _, email := range []string{"alice@acme.example", "carol@acme.example", "bob@elsewhere.example"} {
		require.NoError(t, orgs.Invite(t.Context(), app.Orgs["globex"], email, authz.RoleOperator))
	}

	// Verified by the provider's email_verified, served only from UserInfo.
	resp := signInAtExampleOP(t, app, op, "alice", "alice-pass")
	body := webtest.ReadBody(t, resp)
	require.Equal(t, http.StatusOK, resp.StatusCode, body)
	require.Contains(t, body, "Globex")
	var alice org.User
	require.NoError(t, app.DB.Where("issuer = ? AND subject = ?", op.Issuer, "u-alice").Take(&alice).Error)
	require.Equal(t, "alice@acme.example", alice.Email)
	require.Equal(t, "Alice Liddell", alice.Name)
	require.Equal(t, signin.FromUserInfo, alice.LastSignIn.EmailFrom, "the example serves the profile only from UserInfo")
	require.Equal(t, signin.FromUserInfo, alice.LastSignIn.NameFrom)
	require.Equal(t, signin.ByEmailVerified, alice.LastSignIn.VerifiedBy)

	// No email_verified at all, a trusted domain: admitted, and the audit says by what.
	resp = signInAtExampleOP(t, app, op, "carol", "carol-pass")
	body = webtest.ReadBody(t, resp)
	require.Equal(t, http.StatusOK, resp.StatusCode, body)
	var data []string
	require.NoError(t, app.DB.Raw(`SELECT data::text FROM audit_events WHERE action = 'invitation.accepted' AND target_id = 'carol@acme.example'`).Scan(&data).Error)
	require.Len(t, data, 1)
	require.Contains(t, data[0], `"trusted_domain": "acme.example"`)
	require.Contains(t, data[0], `"verified_by": "trusted_domain"`)

	// No email_verified and an untrusted domain: not a member, and the page says why.
	resp = signInAtExampleOP(t, app, op, "bob", "bob-pass")
	body = webtest.ReadBody(t, resp)
	require.Equal(t, http.StatusForbidden, resp.StatusCode, body)
	require.Contains(t, body, "not a member of any organization")
	require.Contains(t, body, "bob@elsewhere.example")
	require.Contains(t, body, "the provider sent no email_verified, and elsewhere.example is not a trusted domain")
	var pending int64
	require.NoError(t, app.DB.Table("invitations").Where("email = 'bob@elsewhere.example'").Count(&pending).Error)
	require.EqualValues(t, 1, pending, "an unverified address accepts no invitation")
}

// signInAtExampleOP signs a new browser in at Gantry through the example provider's
// login form, and returns Gantry's last answer.
func signInAtExampleOP(t *testing.T, app *webtest.App, op webtest.ExampleOP, username, password string) *http.Response {
	t.Helper()
	c := app.Client(t)
	req, _ := http.NewRequest(http.MethodGet, app.URL+"/login", nil)
	resp := webtest.Follow(t, c, req, nil)
	page := webtest.ReadBody(t, resp)
	require.Equal(t, http.StatusOK, resp.StatusCode, page)
	_, id, ok := strings.Cut(page, `name="id" value="`)
	require.True(t, ok, "the example's login page has no auth request id: %s", page)
	id, _, _ = strings.Cut(id, `"`)
	form := url.Values{"id": {id}, "username": {username}, "password": {password}}
	req, _ = http.NewRequest(http.MethodPost, strings.TrimSuffix(op.Issuer, "/")+"/login/username", strings.NewReader(form.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	return webtest.Follow(t, c, req, nil)
}
