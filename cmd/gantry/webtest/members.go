package webtest

import (
	"context"
	"io"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"gantry/models/apitoken"
	"gantry/models/authz"
	"gantry/models/db"
	"gantry/models/idempotency"
	"gantry/models/org"
	"gantry/models/session"
)

// Member is a member made for a test (not a demo user): the facts the decision rules
// read about a person.
type Member struct {
	UserID    string
	Name      string
	OrgID     string
	Role      authz.Role
	CloudLive bool
	Groups    []string
}

// Subject is the member as a service sees them, signed in at authTime.
func (m Member) Subject(authTime time.Time) authz.Subject {
	return authz.Subject{UserID: m.UserID, Name: m.Name, OrganizationID: m.OrgID, Role: m.Role, AuthenticatedAt: authTime}
}

// NewMember adds a member of organization slug with role, cloud.live and groups (as
// their last sign-in's ID token said), straight through the org service as the system.
func (a *App) NewMember(t testing.TB, slug, name string, role authz.Role, cloudLive bool, groups ...string) Member {
	t.Helper()
	ctx := context.Background()
	orgs := a.System.Orgs
	u, err := orgs.UpsertLoginUser(ctx, org.Login{Issuer: a.Issuer, Subject: "test-" + db.NewID("sub"), Email: db.NewID("m") + "@" + slug + ".test",
		Name: name, Groups: groups})
	require.NoError(t, err)
	require.NoError(t, orgs.EnsureMembership(ctx, a.Orgs[slug], u.ID, role))
	if cloudLive {
		require.NoError(t, orgs.EnsureCloudLive(ctx, a.Orgs[slug], u.ID))
	}
	return Member{UserID: u.ID, Name: name, OrgID: a.Orgs[slug], Role: role, CloudLive: cloudLive, Groups: groups}
}

// SessionFor is a browser signed in as user userID in organization orgID, whose last
// sign-in at the provider was at authTime: a session injected into the session store,
// for members the development provider does not know (CONVENTIONS: one real login
// through the provider, the rest with an injected session).
func (a *App) SessionFor(t testing.TB, userID, orgID string, authTime time.Time) *http.Client {
	t.Helper()
	ctx := context.Background()
	st := session.NewStore(a.DB, time.Hour, 12*time.Hour)
	_, anon, err := st.Create(ctx, session.Data{})
	require.NoError(t, err)
	token, sess, err := st.SignIn(ctx, anon, userID, &orgID)
	require.NoError(t, err)
	at := authTime.UTC()
	sess.Data.AuthTime = &at
	require.NoError(t, st.SaveData(ctx, sess))
	c := a.Client(t)
	u, err := url.Parse(a.URL)
	require.NoError(t, err)
	c.Jar.SetCookies(u, []*http.Cookie{{Name: "gantry_session", Value: token, Path: "/"}})
	return c
}

// Token issues member m an API token with scopes (valid a day) through the token
// service, as m; it returns the bearer secret.
func (a *App) Token(t testing.TB, m Member, scopes ...string) string {
	t.Helper()
	tok, err := a.System.Tokens.Issue(authz.WithSubject(context.Background(), m.Subject(time.Now())),
		apitoken.Issue{Name: "test-" + strings.Join(scopes, "-"), Scopes: scopes, Lifetime: 24 * time.Hour})
	require.NoError(t, err)
	return tok.Secret
}

// API sends an API request with a bearer token (no cookie, no CSRF token) and a JSON
// body ("" for none); a call that changes something gets a fresh Idempotency-Key.
func (a *App) API(t testing.TB, token, method, path, body string) *http.Response {
	t.Helper()
	key := ""
	if method != http.MethodGet && method != http.MethodHead {
		key = idempotency.NewKey()
	}
	return a.APIKeyed(t, token, key, method, path, body)
}

// APIKeyed is API with the Idempotency-Key given ("": none).
func (a *App) APIKeyed(t testing.TB, token, key, method, path, body string) *http.Response {
	t.Helper()
	var r io.Reader
	if body != "" {
		r = strings.NewReader(body)
	}
	req, err := http.NewRequest(method, a.URL+path, r)
	require.NoError(t, err)
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	if key != "" {
		req.Header.Set(idempotency.Header, key)
	}
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	return resp
}
