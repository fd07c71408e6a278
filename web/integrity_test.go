package web_test

import (
	"context"
	"net/http"
	"net/url"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"gantry/cmd/gantry/webtest"
	"gantry/models/authz"
	"gantry/models/db/dbtest"
	"gantry/models/errs"
	"gantry/models/idempotency"
	"gantry/models/run"
	"gantry/models/state/statetest"
)

// Holes an independent review of the decision path found, each closed and held here.

// TestInvitationNeverChangesAMember: an invitation makes a member, never changes one:
// an admin cannot demote an owner (or anyone) by inviting their address.
func TestInvitationNeverChangesAMember(t *testing.T) {
	t.Parallel()
	app := webtest.Start(t)
	admin := app.LoggedIn(t, "admin@acme.test")
	resp := app.PostForm(t, admin, "/members/invite", memberForm(t, app, admin, url.Values{"email": {"owner@acme.test"}, "role": {"viewer"}}))
	body := webtest.ReadBody(t, resp)
	require.Equal(t, http.StatusUnprocessableEntity, resp.StatusCode)
	require.Contains(t, body, "already a member")
	// Even an invitation made behind the page (the bootstrap path) leaves the role be.
	require.NoError(t, app.System.Orgs.Invite(context.Background(), app.Orgs["acme"], "owner@acme.test", authz.RoleViewer))
	app.LoggedIn(t, "owner@acme.test")
	var role string
	require.NoError(t, app.DB.Raw("SELECT m.role FROM memberships m JOIN users u ON u.id = m.user_id WHERE u.email = 'owner@acme.test'").Scan(&role).Error)
	require.Equal(t, "owner", role)
	// An owner's open invitation is an owner's to change.
	owner := app.NewMember(t, "acme", "Inviting Owner", authz.RoleOwner, false)
	require.NoError(t, app.System.Members.Invite(authz.WithSubject(context.Background(), owner.Subject(time.Now())), "next.owner@acme.test", authz.RoleOwner))
	resp = app.PostForm(t, admin, "/members/invite", memberForm(t, app, admin, url.Values{"email": {"next.owner@acme.test"}, "role": {"viewer"}}))
	webtest.ReadBody(t, resp)
	require.Equal(t, http.StatusForbidden, resp.StatusCode)
}

// TestLateDecisionOverHTTPExpiresTheRun: through the page (inside the idempotency
// key's transaction) a decision after the deadline answers APPROVAL_EXPIRED and the run
// ends EXPIRED; the key stays unused.
func TestLateDecisionOverHTTPExpiresTheRun(t *testing.T) {
	t.Parallel()
	app := webtest.Start(t)
	operator := app.LoggedIn(t, "operator@acme.test")
	admin := app.LoggedIn(t, "admin@acme.test")
	r := waitingIn(t, app, operator, "late")
	require.NoError(t, app.DB.Exec("UPDATE runs SET decision_deadline = now() - interval '1 second' WHERE id = ?", r.ID).Error)
	form := decisionForm(t, app, admin, r)
	status, code, body := postDecision(t, app, admin, "/runs/"+r.ID+"/approve", form)
	require.Equal(t, http.StatusConflict, status, body)
	require.Equal(t, errs.CodeApprovalExpired, code)
	r = waitForState(t, app, r.ID, run.Expired)
	require.Contains(t, r.StateReason, "after the deadline")
	require.Zero(t, countRows(t, app, "SELECT count(*) FROM idempotency_keys WHERE key = ?", form.Get(idempotency.Field)))
	require.Zero(t, decisionsRecorded(t, app, r.ID))
}

// TestApprovalGivenAgainAfterAVoidApplies: an approval voided (its apply job already ran
// and found nothing to do) and given again gets an apply job of its own, and applies.
func TestApprovalGivenAgainAfterAVoidApplies(t *testing.T) {
	t.Parallel()
	app := webtest.Start(t)
	operator := app.LoggedIn(t, "operator@acme.test")
	r := waitingIn(t, app, operator, "again")
	app.StopQueue(t)
	first := app.NewMember(t, "acme", "First Admin", authz.RoleAdmin, false)
	second := app.NewMember(t, "acme", "Second Admin", authz.RoleAdmin, false)
	owner := app.NewMember(t, "acme", "Demoting Owner", authz.RoleOwner, false)
	r = approvedBy(t, app, r, first)
	require.NoError(t, app.System.Members.SetRole(authz.WithSubject(context.Background(), owner.Subject(time.Now())), first.UserID, authz.RoleViewer))
	r = waitForState(t, app, r.ID, run.PendingApproval)
	// The first approval's apply job ran meanwhile: it found the run waiting and finished.
	_, err := app.System.Runs.Applies.BeginApply(context.Background(), r.ID, byHand)
	require.ErrorIs(t, err, run.ErrSkip)
	require.NoError(t, app.DB.Exec("UPDATE river_job SET state = 'completed', finalized_at = now() WHERE kind = 'run.apply' AND args->>'run_id' = ?", r.ID).Error)
	approvedBy(t, app, r, second)
	require.EqualValues(t, 1, countRows(t, app, "SELECT count(*) FROM river_job WHERE kind = 'run.apply' AND args->>'run_id' = ? AND state <> 'completed'", r.ID),
		"the second approval has an apply job of its own")
	app.System.Queue.Start(context.Background())
	waitForState(t, app, r.ID, run.Succeeded)
}

// TestRunsAreLockedBeforeTheAuditChain: one lock order everywhere: rows, then the
// organization's audit chain (which the first audit event takes and holds to the
// commit). A transaction that changes several runs (a member's demotion voiding
// approvals, a state write marking runs STALE) locks them all before auditing, so one
// that waits for a run holds no chain lock, and a decision holding that run (row, then
// chain) finishes: no deadlock.
func TestRunsAreLockedBeforeTheAuditChain(t *testing.T) {
	t.Parallel()
	app := webtest.Start(t)
	ctx := context.Background()
	operator := app.LoggedIn(t, "operator@acme.test")
	approved := waitingIn(t, app, operator, "order-void")
	waiting := waitingIn(t, app, operator, "order-stale")
	writer := waitingIn(t, app, operator, "order-stale") // its job writes the state
	app.StopQueue(t)
	approver := app.NewMember(t, "acme", "Voided Admin", authz.RoleAdmin, false)
	owner := app.NewMember(t, "acme", "Demoting Owner", authz.RoleOwner, false)
	approved = approvedBy(t, app, approved, approver)
	chainFree := func() bool {
		probe := app.DB.Begin()
		defer probe.Rollback()
		var free bool
		require.NoError(t, probe.Raw("SELECT pg_try_advisory_xact_lock(hashtextextended('audit:' || ?, 0))", approved.OrganizationID).Scan(&free).Error)
		return free
	}
	for _, change := range []struct {
		name string
		run  run.Run
		do   func() error
	}{
		{"demotion", approved, func() error {
			return app.System.Members.SetRole(authz.WithSubject(ctx, owner.Subject(time.Now())), approver.UserID, authz.RoleViewer)
		}},
		{"state write", waiting, func() error {
			user, pass, err := app.System.StateStore.IssueCredentials(ctx, writer.OrganizationID, writer.WorkspaceID, writer.ID, "apply", time.Minute)
			if err != nil {
				return err
			}
			cred, err := app.System.State.Authenticate(ctx, user, pass)
			if err != nil {
				return err
			}
			return app.System.State.Write(ctx, cred, waiting.WorkspaceID, "", statetestState())
		}},
	} {
		name := change.name
		// A decision on the run, between its row lock and its audit event.
		holder := app.DB.Begin()
		require.NoError(t, holder.Exec("SELECT id FROM runs WHERE id = ? FOR UPDATE", change.run.ID).Error)
		done := make(chan error, 1)
		go func() { done <- change.do() }()
		// The change waits for the run held here (counting only this holder's waiters: other
		// tests share the server).
		dbtest.WaitBlockedBy(t, app.DB, dbtest.BackendPID(t, holder), 1, func() (bool, any) {
			select {
			case err := <-done:
				return true, err
			default:
				return false, nil
			}
		})
		require.True(t, chainFree(), "%s waits for a run holding no audit chain lock", name)
		require.NoError(t, holder.Exec("SELECT pg_advisory_xact_lock(hashtextextended('audit:' || ?, 0))", change.run.OrganizationID).Error,
			"the decision audits: no deadlock")
		require.NoError(t, holder.Commit().Error)
		require.NoError(t, <-done, name)
	}
	require.Equal(t, run.PendingApproval, waitForState(t, app, approved.ID, run.PendingApproval).State, "the approval was voided")
	require.Equal(t, run.Stale, waitForState(t, app, waiting.ID, run.Stale).State, "the waiting run went STALE")
}

// TestPlanAgainKeepsFourEyes: whoever requested a run, directly or by planning it
// again, never decides the run planned again from it where four eyes applies.
func TestPlanAgainKeepsFourEyes(t *testing.T) {
	t.Parallel()
	app := webtest.Start(t)
	author := app.NewMember(t, "acme", "Author Admin", authz.RoleAdmin, false)
	clicker := app.NewMember(t, "acme", "Clicking Operator", authz.RoleOperator, false)
	asAuthor := authz.WithSubject(context.Background(), author.Subject(time.Now()))
	asClicker := authz.WithSubject(context.Background(), clicker.Subject(time.Now()))
	prod := app.OrgEnvironmentID(t, "acme", "production")
	r, err := app.System.Runs.Requests.Request(asAuthor, run.Request{EnvironmentID: prod, Workspace: "four-eyes", Template: "bucket", Kind: run.KindApply,
		Inputs: map[string]string{"name": "four-eyes", "retention_days": "30", "region": "eu-west"}})
	require.NoError(t, err)
	r = waitForState(t, app, r.ID, run.PendingApproval)
	require.NoError(t, app.DB.Exec("UPDATE runs SET state = 'STALE' WHERE id = ?", r.ID).Error)
	again, err := app.System.Runs.Decisions.PlanAgain(asClicker, r.ID)
	require.NoError(t, err)
	again = waitForState(t, app, again.ID, run.PendingApproval)
	require.Equal(t, []string{author.UserID}, again.PriorRequesters)
	for _, who := range []context.Context{asAuthor, asClicker} {
		_, err = app.System.Runs.Decisions.Approve(who, again.ID, run.Approval{Evidence: run.EvidenceOf(again)})
		require.Equal(t, errs.CodeForbidden, errs.CodeOf(err), "%v", err)
		_, err = app.System.Runs.Decisions.Reject(who, again.ID, run.EvidenceOf(again), "no")
		require.Equal(t, errs.CodeForbidden, errs.CodeOf(err), "%v", err)
	}
}

// TestLastOwnerStaysUnderConcurrentDemotions: two owners demoting each other at once
// leave one owner.
func TestLastOwnerStaysUnderConcurrentDemotions(t *testing.T) {
	t.Parallel()
	app := webtest.Start(t)
	org := app.Orgs["acme"]
	require.NoError(t, app.DB.Exec("UPDATE memberships SET role = 'admin' WHERE organization_id = ? AND role = 'owner'", org).Error)
	for range 8 {
		a := app.NewMember(t, "acme", "Owner A", authz.RoleOwner, false)
		b := app.NewMember(t, "acme", "Owner B", authz.RoleOwner, false)
		var wg sync.WaitGroup
		for _, p := range [][2]webtest.Member{{a, b}, {b, a}} {
			wg.Add(1)
			go func() {
				defer wg.Done()
				_ = app.System.Members.SetRole(authz.WithSubject(context.Background(), p[0].Subject(time.Now())), p[1].UserID, authz.RoleAdmin)
			}()
		}
		wg.Wait()
		require.EqualValues(t, 1, countRows(t, app, "SELECT count(*) FROM memberships WHERE organization_id = ? AND role = 'owner'", org))
		require.NoError(t, app.DB.Exec("UPDATE memberships SET role = 'admin' WHERE organization_id = ? AND role = 'owner'", org).Error)
	}
}

// statetestState is a first state version of a workspace.
func statetestState() []byte {
	return statetest.StateJSON(1, "7c0e1f2a-0000-4000-8000-00000000beef", "written")
}

// TestCancelNeedsConfirmationAndStaysDistinctFromReject: cancelling through the page
// needs the confirmation page's "yes" (without it: 422, nothing changes); a cancel and
// a rejection end in different states, write different audit events, and say so on the
// run page.
func TestCancelNeedsConfirmationAndStaysDistinctFromReject(t *testing.T) {
	t.Parallel()
	app := webtest.Start(t)
	operator := app.LoggedIn(t, "operator@acme.test")
	admin := app.LoggedIn(t, "admin@acme.test")
	cancelled := waitingIn(t, app, operator, "cancel-me")
	rejected := waitingIn(t, app, operator, "reject-me")

	unconfirmed := url.Values{"_csrf": {app.CSRF(t, operator)}, "idempotency_key": {idempotency.NewKey()}, "reason": {"wrong bucket"}}
	status, code, body := postDecision(t, app, operator, "/runs/"+cancelled.ID+"/cancel", unconfirmed)
	require.Equal(t, http.StatusUnprocessableEntity, status, body)
	require.Equal(t, errs.CodeInvalidInput, code)
	require.Equal(t, run.PendingApproval, waitForState(t, app, cancelled.ID, run.PendingApproval).State)
	require.Zero(t, countRows(t, app, "SELECT count(*) FROM audit_events WHERE target_id = ? AND action = 'run.cancelled'", cancelled.ID))

	confirmed := url.Values{"_csrf": {app.CSRF(t, operator)}, "idempotency_key": {idempotency.NewKey()}, "reason": {"wrong bucket"}, "confirm": {"yes"}}
	status, _, body = postDecision(t, app, operator, "/runs/"+cancelled.ID+"/cancel", confirmed)
	require.Equal(t, http.StatusSeeOther, status, body)
	form := decisionForm(t, app, admin, rejected)
	form.Set("reason", "not this quarter")
	status, _, body = postDecision(t, app, admin, "/runs/"+rejected.ID+"/reject", form)
	require.Equal(t, http.StatusSeeOther, status, body)

	c := waitForState(t, app, cancelled.ID, run.Cancelled)
	r := waitForState(t, app, rejected.ID, run.Rejected)
	require.Nil(t, c.RejectedBy, "a cancel is not a rejection")
	require.NotNil(t, r.RejectedBy)
	for _, tc := range []struct {
		id, action, other string
	}{{c.ID, "run.cancelled", "run.rejected"}, {r.ID, "run.rejected", "run.cancelled"}} {
		require.EqualValues(t, 1, countRows(t, app, "SELECT count(*) FROM audit_events WHERE target_id = ? AND action = ?", tc.id, tc.action), tc.action)
		require.Zero(t, countRows(t, app, "SELECT count(*) FROM audit_events WHERE target_id = ? AND action = ?", tc.id, tc.other), tc.other)
	}
	require.EqualValues(t, 1, countRows(t, app, "SELECT count(*) FROM audit_events WHERE target_id = ? AND action = 'run.cancelled' AND data->>'cancellation_reason' = 'wrong bucket'", c.ID),
		"the cancel's reason is recorded")
	cancelPage := webtest.ReadBody(t, app.Get(t, admin, "/runs/"+c.ID))
	rejectPage := webtest.ReadBody(t, app.Get(t, admin, "/runs/"+r.ID))
	require.Contains(t, cancelPage, shownState(run.Cancelled))
	require.NotContains(t, cancelPage, "REJECTED")
	require.NotContains(t, cancelPage, shownState(run.Rejected))
	require.Contains(t, rejectPage, shownState(run.Rejected))
	require.NotContains(t, rejectPage, "CANCELLED")
	require.NotContains(t, rejectPage, shownState(run.Cancelled))
}
