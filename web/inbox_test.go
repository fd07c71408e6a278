package web_test

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"gantry/cmd/gantry/webtest"
	"gantry/models/authz"
	"gantry/models/environment"
	"gantry/models/run"
)

// inboxLists says in which list of the personal inbox c finds run id: "you",
// "others" or "" (neither).
func inboxLists(t *testing.T, app *webtest.App, c *http.Client, id string) string {
	t.Helper()
	page := webtest.ReadBody(t, app.Get(t, c, "/approvals"))
	you, others, ok := strings.Cut(page, `id="for-others-title"`)
	require.True(t, ok, page)
	switch row := `data-testid="run-` + id + `"`; {
	case strings.Contains(you, row):
		require.NotContains(t, others, row, "a run is in one list only")
		return "you"
	case strings.Contains(others, row):
		return "others"
	}
	return ""
}

// TestInboxFollowsTheRules: the personal inbox is kept by the run service as runs,
// members and environments change: a waiting run is under "Waiting for you" for who may
// decide it and under "Waiting for others" for the requester; a demotion, a removed
// grant, a decision take it away; a grant, a promotion give it.
func TestInboxFollowsTheRules(t *testing.T) {
	t.Parallel()
	app := webtest.Start(t)
	operator := app.LoggedIn(t, "operator@acme.test")
	admin := app.LoggedIn(t, "admin@acme.test")
	r := waitingIn(t, app, operator, "inbox")
	require.Equal(t, "others", inboxLists(t, app, operator, r.ID), "the requester never decides her own run")
	require.Equal(t, "you", inboxLists(t, app, admin, r.ID))
	page := webtest.ReadBody(t, app.Get(t, admin, "/approvals"))
	require.Contains(t, page, "inbox "+r.Label(), "workspace-qualified label")
	require.Regexp(t, `data-testid="time-left">6\x{a0}d 23\x{a0}h`, page)
	require.Contains(t, page, `data-testid="changes">1 to add<`)

	// A member of another role, changed through the members service.
	owner := app.NewMember(t, "acme", "Inbox Owner", authz.RoleOwner, true)
	ownerCtx := authz.WithSubject(context.Background(), owner.Subject(time.Now()))
	colleague := app.NewMember(t, "acme", "Inbox Colleague", authz.RoleViewer, false)
	colleagueCtx := authz.WithSubject(context.Background(), colleague.Subject(time.Now()))
	listed := func(ctx context.Context) bool { return listedRun(t, app, ctx, r.ID) }
	require.False(t, listed(colleagueCtx), "a viewer decides nothing")
	require.NoError(t, app.System.Members.SetRole(ownerCtx, colleague.UserID, authz.RoleOperator))
	colleagueCtx = authz.WithSubject(context.Background(), authz.Subject{UserID: colleague.UserID, Name: colleague.Name, OrganizationID: colleague.OrgID, Role: authz.RoleOperator})
	require.True(t, listed(colleagueCtx), "promoted: the run waits for them too")
	require.NoError(t, app.System.Members.SetRole(ownerCtx, colleague.UserID, authz.RoleViewer))
	require.False(t, listed(colleagueCtx), "demoted: gone")

	// A restricted environment: a grant gives, its removal takes.
	protected := true
	secure, err := app.System.Environments.Create(ownerCtx, environment.Input{Name: "inbox-secure", Tier: "staging", Restricted: true,
		RequiresApproval: &protected})
	require.NoError(t, err)
	require.NoError(t, app.System.Members.SetRole(ownerCtx, colleague.UserID, authz.RoleOperator))
	var operatorID string
	require.NoError(t, app.DB.Raw("SELECT id FROM users WHERE email = 'operator@acme.test'").Scan(&operatorID).Error)
	require.NoError(t, app.System.Environments.SetMemberGrants(ownerCtx, operatorID, []string{secure.ID}))
	req := bucketRequest(secure.ID, "eu-west")
	req.Set("workspace", "inbox-secure")
	hidden := waitForState(t, app, app.RequestRun(t, operator, req), run.PendingApproval)
	require.False(t, listedRun(t, app, colleagueCtx, hidden.ID), "no grant: not even seen")
	others, err := app.System.Runs.Inbox.WaitingForOthers(colleagueCtx, nil, run.MaxInboxPage)
	require.NoError(t, err)
	for _, e := range others {
		require.NotEqual(t, hidden.ID, e.ID, "a restricted run is not shown to a member without a grant")
	}
	require.NoError(t, app.System.Environments.SetMemberGrants(ownerCtx, colleague.UserID, []string{secure.ID}))
	require.True(t, listedRun(t, app, colleagueCtx, hidden.ID), "granted: the run waits for them")
	require.NoError(t, app.System.Environments.SetMemberGrants(ownerCtx, colleague.UserID, nil))
	require.False(t, listedRun(t, app, colleagueCtx, hidden.ID), "grant removed: gone")

	// A decision takes the run off every list.
	approve(t, app, admin, r)
	require.Equal(t, "", inboxLists(t, app, admin, r.ID))
	require.Equal(t, "", inboxLists(t, app, operator, r.ID))
}

func listedRun(t *testing.T, app *webtest.App, ctx context.Context, id string) bool {
	t.Helper()
	entries, err := app.System.Runs.Inbox.WaitingForYou(ctx, nil, run.MaxInboxPage)
	require.NoError(t, err)
	for _, e := range entries {
		if e.ID == id {
			return true
		}
	}
	return false
}
