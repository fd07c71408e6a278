package web_test

import (
	"html"
	"net/http"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"gantry/cmd/gantry/webtest"
	"gantry/models/errs"
	"gantry/models/run"
)

// Policy blocks a person can act on (issue 37): a blocked run says first which rules
// failed and why, in full, and offers "Edit and resubmit"; the approver's panel offers
// the override there; and where four eyes applies, whoever overrode does not also
// approve.

// backupRule is the message database_protection gives a staging database kept with too
// few days of backups.
const backupRule = "backup_retention_days must be at least 7 in staging"

// TestBlockedRunIsResubmittedWithAFix: the requester's run page shows the failed rule
// and its message above everything else and links "Edit and resubmit"; the form comes
// filled in with the blocked request, and the fixed value goes through the policy.
func TestBlockedRunIsResubmittedWithAFix(t *testing.T) {
	t.Parallel()
	app := webtest.Start(t)
	operator := app.LoggedIn(t, "operator@acme.test")
	staging := app.OrgEnvironmentID(t, "acme", "staging")
	r := waitForState(t, app, app.RequestRun(t, operator, postgresRequest(staging, "orders", "small", "1")), run.PolicyBlocked)
	require.Equal(t, "soft_failed", r.PolicyOutcome)

	page := webtest.ReadBody(t, app.Get(t, operator, "/runs/"+r.ID))
	block := strings.Index(page, `data-testid="policy-block"`)
	require.Positive(t, block, "the run page shows the block")
	require.Less(t, block, strings.Index(page, `data-testid="review-summary"`), "the block comes before the rest")
	require.Less(t, block, strings.Index(page, `data-testid="timeline"`))
	require.Contains(t, page, `data-testid="blocked-rule" data-rule="database_protection"`)
	require.Contains(t, page, backupRule)
	require.Contains(t, page, "Soft-mandatory")
	require.NotContains(t, page, `id="review-override"`, "the requester overrides nothing")
	link := "/requests/new?from_run=" + r.ID + "&amp;template=postgres"
	require.Contains(t, page, `href="`+link+`" id="edit-resubmit"`)

	// A viewer requests nothing, so is offered nothing; an admin is sent to the review
	// to override.
	viewer := app.LoggedIn(t, "viewer@acme.test")
	page = webtest.ReadBody(t, app.Get(t, viewer, "/runs/"+r.ID))
	require.Contains(t, page, backupRule)
	require.NotContains(t, page, `id="edit-resubmit"`)
	admin := app.LoggedIn(t, "admin@acme.test")
	page = webtest.ReadBody(t, app.Get(t, admin, "/runs/"+r.ID))
	require.Contains(t, page, `href="/runs/`+r.ID+`/review" id="review-override"`)

	form := webtest.ReadBody(t, app.Get(t, operator, html.UnescapeString(link)))
	require.Contains(t, form, `name="inputs.backup_retention_days" value="1"`)
	require.Contains(t, form, `name="workspace" value="orders"`)
	fixed := postgresRequest(staging, "orders", "small", "7")
	again := waitForState(t, app, app.RequestRun(t, operator, fixed), run.PendingApproval)
	require.Equal(t, "pass", again.PolicyOutcome)
	require.Equal(t, r.WorkspaceID, again.WorkspaceID)
}

// TestOverriderDoesNotApprove: an admin overrides the soft failure from the review
// page's panel; four eyes applies in staging, so that admin is refused the approval
// (403, with the reason in words), is not counted among who may decide it, and another
// admin-or-above approves it.
func TestOverriderDoesNotApprove(t *testing.T) {
	t.Parallel()
	app := webtest.Start(t)
	operator := app.LoggedIn(t, "operator@acme.test")
	admin := app.LoggedIn(t, "admin@acme.test")
	staging := app.OrgEnvironmentID(t, "acme", "staging")
	r := waitForState(t, app, app.RequestRun(t, operator, postgresRequest(staging, "ledger", "small", "1")), run.PolicyBlocked)

	// The review opens with the block and its override form; the policy table lists
	// the failed rule first.
	page := webtest.ReadBody(t, app.Get(t, admin, "/runs/"+r.ID+"/review"))
	block := strings.Index(page, `data-testid="policy-block"`)
	require.Positive(t, block)
	require.Less(t, block, strings.Index(page, `data-testid="risk"`))
	require.Contains(t, page, `data-testid="override-form"`)
	require.Contains(t, page, "Reason for overriding database_protection (10+ characters)")
	require.Contains(t, page, "blocks it until its failed rules are overridden with a reason", "the bar above says what to do")
	rows := strings.Index(page, `data-testid="policy-row"`)
	require.Positive(t, rows)
	require.True(t, strings.HasPrefix(page[rows:], `data-testid="policy-row" data-rule="database_protection" data-passed="false"`),
		"the failed rule heads the table: %s", page[rows:rows+120])

	// A short reason comes back at its field, what was typed kept.
	ev := evaluationOf(t, app, r)
	version := ruleVersion(t, ev, "database_protection")
	resp := app.PostForm(t, admin, "/runs/"+r.ID+"/override", overrideForm(t, app, admin, r, "database_protection", version, "nightly"))
	body := webtest.ReadBody(t, resp)
	require.Equal(t, http.StatusUnprocessableEntity, resp.StatusCode)
	require.Contains(t, body, `id="override-database_protection-error"`)
	require.Contains(t, body, ">nightly</textarea>")

	resp = app.PostForm(t, admin, "/runs/"+r.ID+"/override", overrideForm(t, app, admin, r, "database_protection", version, "exported nightly to the archive"))
	webtest.ReadBody(t, resp)
	require.Equal(t, http.StatusSeeOther, resp.StatusCode)
	r = waitForState(t, app, r.ID, run.PendingApproval)
	require.True(t, run.RequirementOf(r).FourEyes)

	const why = "You overrode a policy failure of this run: four eyes means someone else approves it."
	page = webtest.ReadBody(t, app.Get(t, admin, "/runs/"+r.ID+"/review"))
	require.NotContains(t, page, `id="approve"`)
	require.Contains(t, page, why)
	status, code, body := postDecision(t, app, admin, "/runs/"+r.ID+"/approve", decisionForm(t, app, admin, r))
	require.Equal(t, http.StatusForbidden, status, body)
	require.Equal(t, errs.CodeForbidden, code)
	require.Contains(t, body, why)
	require.Zero(t, countRows(t, app, `SELECT count(*) FROM run_deciders WHERE run_id = ? AND decides
		AND user_id = (SELECT id FROM users WHERE email = 'admin@acme.test')`, r.ID), "not waiting for the overrider")
	require.EqualValues(t, 1, countRows(t, app, `SELECT count(*) FROM run_deciders WHERE run_id = ? AND decides
		AND user_id = (SELECT id FROM users WHERE email = 'owner@acme.test')`, r.ID))
	require.Equal(t, run.PendingApproval, waitForState(t, app, r.ID, run.PendingApproval).State, "the refusal recorded nothing")

	owner := app.LoggedIn(t, "owner@acme.test")
	approve(t, app, owner, r)
	waitForState(t, app, r.ID, run.Succeeded)
}
