package webtest

import (
	"context"
	"net/http"
	"net/url"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"gantry/models/authz"
	"gantry/models/db"
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
