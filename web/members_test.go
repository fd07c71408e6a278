package web_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/url"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"gantry/cmd/gantry/webtest"
	"gantry/models/authz"
	"gantry/models/db/dbtest"
	"gantry/models/environment"
	"gantry/models/errs"
	"gantry/models/risk"
	"gantry/models/run"
)

// memberForm is a members page form with its CSRF token.
func memberForm(t *testing.T, app *webtest.App, c *http.Client, values url.Values) url.Values {
	t.Helper()
	values.Set("_csrf", app.CSRF(t, c))
	return values
}

// waitingIn plans a run of workspace for requester, waiting for a decision.
func waitingIn(t *testing.T, app *webtest.App, requester *http.Client, workspace string) run.Run {
	t.Helper()
	req := bucketRequest(app.OrgEnvironmentID(t, "acme", "staging"), "eu-west")
	req.Set("workspace", workspace)
	return waitForState(t, app, app.RequestRun(t, requester, req), run.PendingApproval)
}

// approvedBy approves r as approver; its apply does not start (the caller stopped the
// queue).
func approvedBy(t *testing.T, app *webtest.App, r run.Run, approver webtest.Member) run.Run {
	t.Helper()
	_, err := app.System.Runs.Decisions.Approve(authz.WithSubject(context.Background(), approver.Subject(time.Now())), r.ID,
		run.Approval{Evidence: run.EvidenceOf(r)})
	require.NoError(t, err)
	return waitForState(t, app, r.ID, run.Approved)
}

// TestMembersPage: admins and owners manage members; taking rights away (a lower role,
// removal, cloud.live revoked) sends that member's approvals that have not started
// applying back to wait for a decision, with the reason; every change is audited.
func TestMembersPage(t *testing.T) {
	t.Parallel()
	app := webtest.Start(t)
	operator := app.LoggedIn(t, "operator@acme.test")
	admin := app.LoggedIn(t, "admin@acme.test")
	owner := app.LoggedIn(t, "owner@acme.test")

	// The groups of a sign-in are kept per user (the provider sends them).
	var groups string
	require.NoError(t, app.DB.Raw("SELECT groups::text FROM users WHERE email = 'admin@acme.test'").Scan(&groups).Error)
	require.JSONEq(t, `["acme-platform-leads"]`, groups)

	resp := app.Get(t, operator, "/members")
	webtest.ReadBody(t, resp)
	require.Equal(t, http.StatusForbidden, resp.StatusCode, "operators do not manage members")
	page := webtest.ReadBody(t, app.Get(t, admin, "/members"))
	require.Contains(t, page, "acme-platform-leads", "the page shows each member's groups")
	require.NotContains(t, page, `data-testid="grant-cloud-live"`, "only owners grant cloud.live")
	require.Contains(t, webtest.ReadBody(t, app.Get(t, owner, "/members")), `data-testid="grant-cloud-live"`)

	waiting := map[string]run.Run{}
	for _, ws := range []string{"void-role", "void-remove", "void-cloud-live", "keep"} {
		waiting[ws] = waitingIn(t, app, operator, ws)
	}
	app.StopQueue(t) // approved runs wait for their apply

	for _, tc := range []struct {
		name   string
		by     *http.Client
		path   string
		values url.Values
		reason string
	}{
		{"demoted", admin, "role", url.Values{"role": {"viewer"}}, "changed their role from admin to viewer"},
		{"removed", admin, "remove", url.Values{"confirm": {"yes"}}, "removed them from the organization"},
		{"cloud.live revoked", owner, "cloud-live", url.Values{"cloud_live": {"off"}}, "revoked their live-cloud entitlement"},
	} {
		approver := app.NewMember(t, "acme", "Approver "+tc.name, authz.RoleAdmin, true)
		r := approvedBy(t, app, waiting["void-"+tc.path], approver)
		resp := app.PostForm(t, tc.by, "/members/"+approver.UserID+"/"+tc.path, memberForm(t, app, tc.by, tc.values))
		webtest.ReadBody(t, resp)
		require.Equal(t, http.StatusSeeOther, resp.StatusCode, tc.name)
		r = waitForState(t, app, r.ID, run.PendingApproval)
		require.Contains(t, r.StateReason, "is void", tc.name)
		require.Contains(t, r.StateReason, tc.reason, tc.name)
		require.Nil(t, r.ApprovedBy, "%s: no approval fields stay", tc.name)
		require.Empty(t, r.ApprovedPlanDigest)
		require.EqualValues(t, 2, auditCount(t, app, r.ID, "run.pending_approval"), "%s: waiting again is audited", tc.name)
	}
	for _, action := range []string{"membership.role_changed", "membership.removed", "membership.cloud_live_revoked"} {
		require.NotEmpty(t, auditEvents(t, app, "acme", action), action)
	}

	// A raise voids nothing; only owners make owners; the last owner stays.
	raised := app.NewMember(t, "acme", "Raised", authz.RoleOperator, true)
	kept := approvedBy(t, app, waiting["keep"], raised)
	resp = app.PostForm(t, admin, "/members/"+raised.UserID+"/role", memberForm(t, app, admin, url.Values{"role": {"admin"}}))
	webtest.ReadBody(t, resp)
	require.Equal(t, http.StatusSeeOther, resp.StatusCode)
	require.Equal(t, run.Approved, waitForState(t, app, kept.ID, run.Approved).State)
	resp = app.PostForm(t, admin, "/members/"+raised.UserID+"/role", memberForm(t, app, admin, url.Values{"role": {"owner"}}))
	webtest.ReadBody(t, resp)
	require.Equal(t, http.StatusForbidden, resp.StatusCode, "admins do not make owners")
	var ownerID string
	require.NoError(t, app.DB.Raw("SELECT id FROM users WHERE email = 'owner@acme.test'").Scan(&ownerID).Error)
	err := app.System.Members.SetRole(authz.WithSubject(context.Background(), authz.Subject{UserID: ownerID, Name: "Alice",
		OrganizationID: app.Orgs["acme"], Role: authz.RoleOwner}), ownerID, authz.RoleAdmin)
	require.ErrorIs(t, err, errs.ErrConflict, "the last owner cannot step down")

	// Invitations: a bad address comes back at its field; a good one is listed and can
	// be withdrawn.
	resp = app.PostForm(t, admin, "/members/invite", memberForm(t, app, admin, url.Values{"email": {"not-an-address"}, "role": {"operator"}}))
	body := webtest.ReadBody(t, resp)
	require.Equal(t, http.StatusUnprocessableEntity, resp.StatusCode)
	require.Contains(t, body, `data-testid="error-email"`)
	resp = app.PostForm(t, admin, "/members/invite", memberForm(t, app, admin, url.Values{"email": {"new.person@acme.test"}, "role": {"operator"}}))
	webtest.ReadBody(t, resp)
	require.Equal(t, http.StatusSeeOther, resp.StatusCode)
	require.Contains(t, webtest.ReadBody(t, app.Get(t, admin, "/members")), "new.person@acme.test")
	resp = app.PostForm(t, admin, "/members/invitations/revoke", memberForm(t, app, admin, url.Values{"email": {"new.person@acme.test"}}))
	webtest.ReadBody(t, resp)
	require.Equal(t, http.StatusSeeOther, resp.StatusCode)
	require.NotContains(t, webtest.ReadBody(t, app.Get(t, admin, "/members")), "new.person@acme.test")
	for _, action := range []string{"invitation.created", "invitation.revoked"} {
		require.EqualValues(t, 1, countRows(t, app, "SELECT count(*) FROM audit_events WHERE organization_id = ? AND action = ? AND target_id = 'new.person@acme.test'",
			app.Orgs["acme"], action), action)
	}

	// Grants on restricted environments, per member.
	env, err := app.System.Environments.Create(authz.WithSubject(context.Background(), authz.System(app.Orgs["acme"])),
		environment.Input{Name: "vault", Tier: "production", Restricted: true})
	require.NoError(t, err)
	grantee := app.NewMember(t, "acme", "Grantee", authz.RoleOperator, false)
	resp = app.PostForm(t, admin, "/members/"+grantee.UserID+"/grants", memberForm(t, app, admin, url.Values{"grants": {env.ID}}))
	webtest.ReadBody(t, resp)
	require.Equal(t, http.StatusSeeOther, resp.StatusCode)
	require.EqualValues(t, 1, countRows(t, app, "SELECT count(*) FROM environment_grants WHERE environment_id = ? AND user_id = ?", env.ID, grantee.UserID))
	require.NotEmpty(t, auditEvents(t, app, "acme", "environment.grant_added"))
	// Another tenant's member is not found.
	var globexUser string
	require.NoError(t, app.DB.Raw("SELECT id FROM users WHERE email = 'operator@globex.test'").Scan(&globexUser).Error)
	resp = app.PostForm(t, admin, "/members/"+globexUser+"/role", memberForm(t, app, admin, url.Values{"role": {"viewer"}}))
	webtest.ReadBody(t, resp)
	require.Equal(t, http.StatusNotFound, resp.StatusCode)
}

// TestEscalationActs: a row naming the environment's owners, with an escalation to
// admins after an hour. Before the hour only the owners decide; after it admins do too,
// by the database clock (no job needed); the escalation job records it exactly once per
// run and row however often it runs; the review page and the inbox say so.
func TestEscalationActs(t *testing.T) {
	t.Parallel()
	app := webtest.Start(t)
	ctx := context.Background()
	owner := app.NewMember(t, "acme", "Matrix Owner", authz.RoleOwner, true)
	m := risk.Default()
	for i := range m.Decisions {
		if m.Decisions[i].Level == risk.Level1Protected {
			m.Decisions[i].Approver, m.Decisions[i].Escalation, m.Decisions[i].EscalateAfterHours = risk.ApproverEnvOwners, risk.ApproverAdmin, 1
		}
	}
	_, err := app.System.Matrix.Save(authz.WithSubject(ctx, owner.Subject(time.Now())), m, "named owners decide staging")
	require.NoError(t, err)
	staging := app.OrgEnvironmentID(t, "acme", "staging")
	groups := []string{"qa-leads"}
	_, err = app.System.Environments.Update(authz.WithSubject(ctx, owner.Subject(time.Now())), staging,
		environment.Input{Name: "staging", Tier: "staging", OwnerGroups: &groups})
	require.NoError(t, err)

	operator := app.LoggedIn(t, "operator@acme.test")
	r := waitForState(t, app, app.RequestRun(t, operator, bucketRequest(staging, "eu-west")), run.PendingApproval)
	require.Equal(t, string(risk.ApproverEnvOwners), r.RequiredApprover)
	require.Equal(t, "admin", r.Escalation)
	require.Equal(t, 60, r.EscalateAfterMinutes)
	// The job that records the escalation is scheduled for the moment it applies.
	var scheduled time.Time
	require.NoError(t, app.DB.Raw("SELECT scheduled_at FROM river_job WHERE kind = 'run.escalate' AND args->>'run_id' = ?", r.ID).Scan(&scheduled).Error)
	require.WithinDuration(t, r.WaitingSince.Add(time.Hour), scheduled, time.Second)

	admin := app.NewMember(t, "acme", "Escalated Admin", authz.RoleAdmin, true)
	asAdmin := authz.WithSubject(ctx, admin.Subject(time.Now()))
	p, err := app.System.Runs.Decisions.Permissions(asAdmin, r)
	require.NoError(t, err)
	require.False(t, p.Approve.Allowed(), "before the hour an admin is not a named owner")
	require.Contains(t, p.Approve.Reason(), "from ")
	// The job finds nothing to do before it is due.
	_, err = app.System.Runs.Decisions.EscalateIfDue(ctx, r.ID)
	require.ErrorIs(t, err, run.ErrSkip)

	// An hour later, by the database clock.
	require.NoError(t, app.DB.Exec("UPDATE runs SET waiting_since = waiting_since - interval '61 minutes' WHERE id = ?", r.ID).Error)
	r = waitForState(t, app, r.ID, run.PendingApproval)
	p, err = app.System.Runs.Decisions.Permissions(asAdmin, r)
	require.NoError(t, err)
	require.True(t, p.Approve.Allowed(), "escalated: admins decide too: %s", p.Approve.Reason())
	require.True(t, p.Deciders.Escalated)

	// Five at once, whatever the machine's pace: the test holds the run's row, so each
	// queues for it, and lets it go only once all five wait.
	const escalations = 5
	holder := app.DB.Begin()
	t.Cleanup(func() { holder.Rollback() }) // a failing test lets the contenders go too
	require.NoError(t, holder.Exec("SELECT id FROM runs WHERE id = ? FOR UPDATE", r.ID).Error)
	escalateErrs := make([]error, escalations)
	var finished atomic.Int32
	var wg sync.WaitGroup
	for i := range escalations {
		wg.Go(func() {
			defer finished.Add(1)
			_, escalateErrs[i] = app.System.Runs.Decisions.EscalateIfDue(ctx, r.ID)
		})
	}
	dbtest.WaitBlockedBy(t, app.DB, dbtest.BackendPID(t, holder), escalations, func() (bool, any) {
		return finished.Load() > 0, "an escalation ended while the run was held"
	})
	require.NoError(t, holder.Rollback().Error)
	wg.Wait()
	for i, err := range escalateErrs {
		require.NoError(t, err, "escalation %d", i)
	}
	require.EqualValues(t, 1, auditCount(t, app, r.ID, "run.escalated"), "recorded exactly once per run and row")
	var escalated run.Run
	require.NoError(t, app.DB.Where("id = ?", r.ID).Take(&escalated).Error)
	require.True(t, escalated.UpdatedAt.After(r.UpdatedAt), "the escalation is a new version of the run: live pages show it")
	require.EqualValues(t, 1, countRows(t, app, "SELECT count(*) FROM run_escalations WHERE run_id = ?", r.ID))
	var data string
	require.NoError(t, app.DB.Raw("SELECT data::text FROM audit_events WHERE target_id = ? AND action = 'run.escalated'", r.ID).Scan(&data).Error)
	var ev map[string]any
	require.NoError(t, json.Unmarshal([]byte(data), &ev))
	require.Equal(t, "1-protected", ev["level"])
	require.Equal(t, "environment_owners", ev["approver"])
	require.Equal(t, "admin", ev["escalation"])

	adminPage := app.SessionFor(t, admin.UserID, admin.OrgID, time.Now())
	review := webtest.ReadBody(t, app.Get(t, adminPage, "/runs/"+r.ID+"/review"))
	require.Contains(t, review, `data-testid="escalated"`)
	require.Contains(t, review, "escalated: now also an admin or owner")
	require.Contains(t, review, `id="approve"`)
	inbox := webtest.ReadBody(t, app.Get(t, adminPage, "/approvals"))
	require.Contains(t, inbox, "decided by a named owner of the environment")
	require.Contains(t, inbox, `data-testid="escalated"`)
	_, err = app.System.Runs.Decisions.Approve(asAdmin, r.ID, run.Approval{Evidence: run.EvidenceOf(r)})
	require.NoError(t, err)
}

// TestOverridesExpireWithTheDecisionWindow: an override holds until the decision
// deadline of the run it was given to; an apply that starts after it does not start, and
// a soft block nobody overrides expires with its window.
func TestOverridesExpireWithTheDecisionWindow(t *testing.T) {
	t.Parallel()
	app := webtest.Start(t)
	operator := app.LoggedIn(t, "operator@acme.test")
	admin := app.LoggedIn(t, "admin@acme.test")
	staging := app.OrgEnvironmentID(t, "acme", "staging")
	r := waitForState(t, app, app.RequestRun(t, operator, postgresRequest(staging, "orders", "small", "3")), run.PolicyBlocked)
	require.NotNil(t, r.DecisionDeadline, "a soft block waits within the decision window")
	ev := evaluationOf(t, app, r)
	resp := app.PostForm(t, admin, "/runs/"+r.ID+"/override", overrideForm(t, app, admin, r, "database_protection",
		ruleVersion(t, ev, "database_protection"), "backups come from the nightly export"))
	webtest.ReadBody(t, resp)
	require.Equal(t, http.StatusSeeOther, resp.StatusCode)
	var expires time.Time
	require.NoError(t, app.DB.Raw("SELECT expires_at FROM policy_overrides WHERE run_id = ?", r.ID).Scan(&expires).Error)
	require.WithinDuration(t, *r.DecisionDeadline, expires, time.Millisecond, "the override holds as long as the run's decision window")

	r = waitForState(t, app, r.ID, run.PendingApproval)
	blocked := waitForState(t, app, app.RequestRun(t, operator, postgresRequest(staging, "billing", "small", "3")), run.PolicyBlocked)
	app.StopQueue(t)
	// Approved by someone else than who overrode it (four eyes).
	approve(t, app, app.LoggedIn(t, "owner@acme.test"), r)
	// The window closes between the approval and the apply.
	require.NoError(t, app.DB.Exec("UPDATE policy_overrides SET expires_at = now() - interval '1 second' WHERE run_id = ?", r.ID).Error)
	_, err := app.System.Runs.Applies.BeginApply(context.Background(), r.ID, byHand)
	require.ErrorIs(t, err, run.ErrSkip)
	r = waitForState(t, app, r.ID, run.Failed)
	require.Contains(t, r.StateReason, "the override of database_protection expired")
	require.Contains(t, r.StateReason, "nothing was applied")

	// A soft block left alone expires at its deadline.
	require.NoError(t, app.DB.Exec("UPDATE runs SET decision_deadline = now() - interval '1 second' WHERE id = ?", blocked.ID).Error)
	_, err = app.System.Runs.Decisions.ExpireIfDue(context.Background(), blocked.ID, run.PolicyBlocked)
	require.NoError(t, err)
	require.Equal(t, run.Expired, waitForState(t, app, blocked.ID, run.Expired).State)
}
