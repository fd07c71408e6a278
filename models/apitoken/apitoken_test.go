package apitoken_test

import (
	"context"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"gorm.io/gorm"

	"gantry/models/apitoken"
	"gantry/models/audit"
	"gantry/models/authz"
	"gantry/models/db/dbtest"
	"gantry/models/errs"
	"gantry/models/org"
)

func TestMain(m *testing.M) { os.Exit(dbtest.Main(m)) }

type fixture struct {
	gdb     *gorm.DB
	orgs    *org.Service
	members *org.Members
	tokens  *apitoken.Service
	acme    string
	globex  string
	admin   authz.Subject
	op      authz.Subject
	viewer  authz.Subject
	rival   authz.Subject // globex's admin
}

func person(t *testing.T, f *fixture, orgID, name string, role authz.Role) authz.Subject {
	t.Helper()
	ctx := context.Background()
	u, err := f.orgs.UpsertLoginUser(ctx, org.Login{Issuer: "https://idp.example", Subject: name + "-" + orgID, Email: name + "@example.test", Name: name})
	require.NoError(t, err)
	require.NoError(t, f.orgs.EnsureMembership(ctx, orgID, u.ID, role))
	return authz.Subject{UserID: u.ID, Name: name, OrganizationID: orgID, Role: role}
}

func newFixture(t *testing.T) *fixture {
	t.Helper()
	gdb := dbtest.New(t)
	log := audit.New(gdb)
	f := &fixture{gdb: gdb, orgs: org.NewService(gdb, log)}
	f.members = org.NewMembers(gdb, log, nil)
	f.tokens = apitoken.NewService(gdb, log, f.orgs)
	ctx := context.Background()
	acme, err := f.orgs.EnsureOrganization(ctx, "acme", "Acme")
	require.NoError(t, err)
	globex, err := f.orgs.EnsureOrganization(ctx, "globex", "Globex")
	require.NoError(t, err)
	f.acme, f.globex = acme.ID, globex.ID
	f.admin = person(t, f, f.acme, "ada", authz.RoleAdmin)
	f.op = person(t, f, f.acme, "otto", authz.RoleOperator)
	f.viewer = person(t, f, f.acme, "vera", authz.RoleViewer)
	f.rival = person(t, f, f.globex, "rex", authz.RoleAdmin)
	return f
}

func as(s authz.Subject) context.Context { return authz.WithSubject(context.Background(), s) }

func auditActions(t *testing.T, gdb *gorm.DB, tokenID string) []string {
	t.Helper()
	var actions []string
	require.NoError(t, gdb.Table("audit_events").Where("target_type = 'api_token' AND target_id = ?", tokenID).Order("seq").Pluck("action", &actions).Error)
	return actions
}

// TestTokenIsHashedShownOnceAndActsAsItsHolderNarrowed: a token's secret is returned
// once and stored as a sha256 only; it authenticates as its holder with its scopes; its
// issue and first use are audited (a second use within a minute is not written again).
func TestTokenIsHashedShownOnceAndActsAsItsHolderNarrowed(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	issued, err := f.tokens.Issue(as(f.op), apitoken.Issue{Name: "deploy-pipeline", Scopes: []string{"plan", "read", "plan"}})
	require.NoError(t, err)
	require.True(t, strings.HasPrefix(issued.Secret, apitoken.Prefix), issued.Secret)
	require.Equal(t, []authz.Scope{authz.ScopeRead, authz.ScopePlan}, issued.Scopes, "sorted, once each")
	require.NotContains(t, issued.String(), issued.Secret)
	require.WithinDuration(t, time.Now().Add(apitoken.DefaultLifetime), issued.ExpiresAt, time.Minute)

	// The database holds no usable token: not the secret, not its random part.
	_, random, _ := strings.Cut(issued.Secret, ".")
	var dump string
	require.NoError(t, f.gdb.Raw("SELECT string_agg(t::text, '|') FROM api_tokens t").Scan(&dump).Error)
	require.NotContains(t, dump, random)
	var audits string
	require.NoError(t, f.gdb.Raw("SELECT string_agg(a::text, '|') FROM audit_events a").Scan(&audits).Error)
	require.NotContains(t, audits, random)

	subject, err := f.tokens.Authenticate(context.Background(), issued.Secret)
	require.NoError(t, err)
	require.Equal(t, f.op.UserID, subject.UserID)
	require.Equal(t, f.acme, subject.OrganizationID)
	require.Equal(t, authz.RoleOperator, subject.Role)
	require.Equal(t, issued.ID, subject.TokenID)
	require.True(t, subject.Can(authz.PermProvisioningPlan))
	require.False(t, subject.Can(authz.PermRunsApply), "an operator's plan token requests no apply")
	require.False(t, subject.Can(authz.PermProvisioningApply), "nor decides")
	_, err = f.tokens.Authenticate(context.Background(), issued.Secret)
	require.NoError(t, err)
	require.Equal(t, []string{"api_token.issued", "api_token.used"}, auditActions(t, f.gdb, issued.ID), "a second use within a minute is not written again")

	list, err := f.tokens.List(as(f.op))
	require.NoError(t, err)
	require.Len(t, list, 1)
	require.NotNil(t, list[0].LastUsedAt, "last use is shown")
	// A minute on, a use is recorded again: the last use moves and is audited.
	require.NoError(t, f.gdb.Exec("UPDATE api_tokens SET last_used_at = last_used_at - interval '2 minutes' WHERE id = ?", issued.ID).Error)
	_, err = f.tokens.Authenticate(context.Background(), issued.Secret)
	require.NoError(t, err)
	require.Equal(t, []string{"api_token.issued", "api_token.used", "api_token.used"}, auditActions(t, f.gdb, issued.ID))
	again, err := f.tokens.List(as(f.op))
	require.NoError(t, err)
	require.True(t, again[0].LastUsedAt.After(*list[0].LastUsedAt), "the last use moved")

	// A token makes no tokens.
	_, err = f.tokens.Issue(as(subject), apitoken.Issue{Name: "child", Scopes: []string{"read"}})
	require.ErrorIs(t, err, errs.ErrForbidden)

	// Wrong secret, wrong shape, unknown id: all 401 alike.
	for _, raw := range []string{issued.Secret + "x", strings.Replace(issued.Secret, ".", ".A", 1), "gantry_nope.secret", "bearer", "", issued.Secret[:len(issued.Secret)-1] + "\x00"} {
		_, err := f.tokens.Authenticate(context.Background(), raw)
		require.ErrorIs(t, err, apitoken.ErrBadToken, "%q", raw)
		require.Equal(t, errs.CodeUnauthenticated, errs.CodeOf(err))
	}
}

// TestExpiredRevokedOrOrphanedTokensAre401: a token stops working when it expires, is
// revoked, or its holder leaves the organization; its holder's role is read at each
// use, so a lowered role narrows the token at once.
func TestExpiredRevokedOrOrphanedTokensAre401(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := as(f.op)
	expiring, err := f.tokens.Issue(ctx, apitoken.Issue{Name: "short", Scopes: []string{"read"}})
	require.NoError(t, err)
	require.NoError(t, f.gdb.Exec("UPDATE api_tokens SET expires_at = now() - interval '1 second' WHERE id = ?", expiring.ID).Error)
	_, err = f.tokens.Authenticate(context.Background(), expiring.Secret)
	require.ErrorIs(t, err, apitoken.ErrBadToken)

	revoked, err := f.tokens.Issue(ctx, apitoken.Issue{Name: "revoked", Scopes: []string{"apply"}})
	require.NoError(t, err)
	_, err = f.tokens.Authenticate(context.Background(), revoked.Secret)
	require.NoError(t, err)
	require.NoError(t, f.tokens.Revoke(ctx, revoked.ID))
	require.NoError(t, f.tokens.Revoke(ctx, revoked.ID), "revoking twice is no error")
	_, err = f.tokens.Authenticate(context.Background(), revoked.Secret)
	require.ErrorIs(t, err, apitoken.ErrBadToken)
	require.Equal(t, []string{"api_token.issued", "api_token.used", "api_token.revoked"}, auditActions(t, f.gdb, revoked.ID))

	// The holder's role is read at each use.
	live, err := f.tokens.Issue(ctx, apitoken.Issue{Name: "live", Scopes: []string{"apply"}})
	require.NoError(t, err)
	// (org.Members.SetRole and Remove also send approvals back: the run service's part,
	// left out here, so the rows change directly.)
	require.NoError(t, f.gdb.Exec("UPDATE memberships SET role = 'viewer' WHERE user_id = ?", f.op.UserID).Error)
	subject, err := f.tokens.Authenticate(context.Background(), live.Secret)
	require.NoError(t, err)
	require.False(t, subject.Can(authz.PermRunsApply), "a viewer's token applies nothing, whatever its scope")
	// A removed member's tokens are gone with the membership.
	require.NoError(t, f.gdb.Exec("DELETE FROM memberships WHERE user_id = ?", f.op.UserID).Error)
	_, err = f.tokens.Authenticate(context.Background(), live.Secret)
	require.ErrorIs(t, err, apitoken.ErrBadToken)
}

// TestTokensStayInTheirOrganization: another organization's token is not found to revoke,
// a member sees and revokes only their own tokens, an admin all of the organization's.
func TestTokensStayInTheirOrganization(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	mine, err := f.tokens.Issue(as(f.op), apitoken.Issue{Name: "mine", Scopes: []string{"read"}})
	require.NoError(t, err)
	_, err = f.tokens.Issue(as(f.viewer), apitoken.Issue{Name: "theirs", Scopes: []string{"read"}})
	require.NoError(t, err)

	require.ErrorIs(t, f.tokens.Revoke(as(f.rival), mine.ID), errs.ErrNotFound, "another organization's admin")
	require.ErrorIs(t, f.tokens.Revoke(as(f.viewer), mine.ID), errs.ErrNotFound, "another member's token")
	list, err := f.tokens.List(as(f.viewer))
	require.NoError(t, err)
	require.Len(t, list, 1)
	require.Equal(t, "theirs", list[0].Name)
	list, err = f.tokens.List(as(f.admin))
	require.NoError(t, err)
	require.Len(t, list, 2, "an admin sees the organization's tokens")
	list, err = f.tokens.List(as(f.rival))
	require.NoError(t, err)
	require.Empty(t, list)
	require.NoError(t, f.tokens.Revoke(as(f.admin), mine.ID), "an admin revokes any of the organization's")
	_, err = f.tokens.Authenticate(context.Background(), mine.Secret)
	require.ErrorIs(t, err, apitoken.ErrBadToken)
}

// TestIssuingRefusesWhatCannotWork: field messages for a bad name, unknown or useless
// scopes and a lifetime out of bounds, with nothing stored; tokens for another person
// are refused; service accounts get tokens from admins only.
func TestIssuingRefusesWhatCannotWork(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	_, err := f.tokens.Issue(as(f.viewer), apitoken.Issue{Name: " \x00", Scopes: []string{"write", "apply"}, Lifetime: 400 * 24 * time.Hour})
	v, ok := errs.AsValidation(err)
	require.True(t, ok, "%v", err)
	require.Contains(t, v.Fields, "name")
	require.Contains(t, v.Fields["scopes"], `"write" is not a scope`)
	require.Contains(t, v.Fields, "lifetime")
	_, err = f.tokens.Issue(as(f.viewer), apitoken.Issue{Name: "ci", Scopes: []string{"apply"}})
	v, ok = errs.AsValidation(err)
	require.True(t, ok, "%v", err)
	require.Contains(t, v.Fields["scopes"], "gives a viewer nothing")
	_, err = f.tokens.Issue(as(f.op), apitoken.Issue{Name: "ci", Scopes: nil})
	_, ok = errs.AsValidation(err)
	require.True(t, ok)
	var n int64
	require.NoError(t, f.gdb.Table("api_tokens").Count(&n).Error)
	require.Zero(t, n, "nothing stored")

	_, err = f.tokens.Issue(as(f.op), apitoken.Issue{Name: "for-vera", Scopes: []string{"read"}, HolderID: f.viewer.UserID})
	require.ErrorIs(t, err, errs.ErrForbidden, "an operator makes tokens for nobody else")
	_, err = f.tokens.Issue(as(f.admin), apitoken.Issue{Name: "for-vera", Scopes: []string{"read"}, HolderID: f.viewer.UserID})
	require.ErrorIs(t, err, errs.ErrForbidden, "nor an admin for another person")

	_, err = f.members.AddServiceAccount(as(f.op), "deployer", authz.RoleOperator)
	require.ErrorIs(t, err, errs.ErrForbidden)
	_, err = f.members.AddServiceAccount(as(f.admin), "", authz.RoleOwner)
	v, ok = errs.AsValidation(err)
	require.True(t, ok, "%v", err)
	require.Contains(t, v.Fields, "name")
	require.Contains(t, v.Fields, "role")
	sa, err := f.members.AddServiceAccount(as(f.admin), "deployer", authz.RoleOperator)
	require.NoError(t, err)
	_, err = f.tokens.Issue(as(f.rival), apitoken.Issue{Name: "x", Scopes: []string{"read"}, HolderID: sa.ID})
	require.ErrorIs(t, err, errs.ErrNotFound, "another organization's service account")
	tok, err := f.tokens.Issue(as(f.admin), apitoken.Issue{Name: "deploy", Scopes: []string{"apply", "decide"}, HolderID: sa.ID, Lifetime: 2 * time.Hour})
	require.NoError(t, err)
	subject, err := f.tokens.Authenticate(context.Background(), tok.Secret)
	require.NoError(t, err)
	require.Equal(t, sa.ID, subject.UserID)
	require.True(t, subject.Can(authz.PermRunsApply))
	require.True(t, subject.Can(authz.PermProvisioningApply))
	require.False(t, subject.Can(authz.PermEnvironmentsManage))
	members, err := f.members.List(as(f.admin))
	require.NoError(t, err)
	found := false
	for _, m := range members {
		if m.UserID == sa.ID {
			found = m.ServiceAccount && m.Role == authz.RoleOperator
		}
	}
	require.True(t, found, "the service account is a member like anyone")
}
