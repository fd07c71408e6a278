package web_test

import (
	"context"
	"html"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"gantry/cmd/gantry/webtest"
	"gantry/models/idempotency"
	"gantry/models/run"
)

// stageRe reads one step of the run page's gate timeline: its status, name, actor and
// detail.
var stageRe = regexp.MustCompile(`(?s)<li class="[^"]*" data-testid="stage" data-status="([a-z-]+)">\s*<span class="stage-name">([^<]+)</span>(.*?)</li>`)

type shownStage struct{ status, body string }

// timelineOf reads the timeline of run id's page as c sees it, by step name.
func timelineOf(t *testing.T, app *webtest.App, c *http.Client, id string) (map[string]shownStage, []string) {
	t.Helper()
	page := webtest.ReadBody(t, app.Get(t, c, "/runs/"+id))
	out := map[string]shownStage{}
	var order []string
	for _, m := range stageRe.FindAllStringSubmatch(page, -1) {
		name := html.UnescapeString(strings.TrimSpace(m[2]))
		out[name] = shownStage{status: m[1], body: html.UnescapeString(m[3])}
		order = append(order, name)
	}
	require.Len(t, order, 9, "the timeline has its nine steps:\n%s", page)
	return out, order
}

// TestTimelineOfEveryEnding: for each way a run ends (succeeded, rejected, cancelled,
// expired, stale, blocked by policy, failed) every step of the timeline reads what
// happened: done, what ended the run (named as what it was), or "not reached"; none
// reads WAITING.
func TestTimelineOfEveryEnding(t *testing.T) {
	t.Parallel()
	app := webtest.Start(t)
	operator := app.LoggedIn(t, "operator@acme.test")
	admin := app.LoggedIn(t, "admin@acme.test")
	post := func(c *http.Client, path string, form url.Values) {
		t.Helper()
		resp := app.PostForm(t, c, path, form)
		body := webtest.ReadBody(t, resp)
		require.Equal(t, http.StatusSeeOther, resp.StatusCode, body)
	}
	ended := map[string]run.Run{}

	r := waitingIn(t, app, operator, "tl-succeeded")
	approve(t, app, admin, r)
	ended["succeeded"] = waitForState(t, app, r.ID, run.Succeeded)

	r = waitingIn(t, app, operator, "tl-rejected")
	form := decisionForm(t, app, admin, r)
	form.Set("reason", "not this quarter")
	post(admin, "/runs/"+r.ID+"/reject", form)
	ended["rejected"] = waitForState(t, app, r.ID, run.Rejected)

	r = waitingIn(t, app, operator, "tl-cancelled")
	post(operator, "/runs/"+r.ID+"/cancel", url.Values{"_csrf": {app.CSRF(t, operator)}, "idempotency_key": {idempotency.NewKey()},
		"confirm": {"yes"}, "reason": {"wrong bucket"}})
	ended["cancelled"] = waitForState(t, app, r.ID, run.Cancelled)

	r = waitingIn(t, app, operator, "tl-expired")
	// While it waits, its later steps are WAITING, not "not reached".
	shown, _ := timelineOf(t, app, admin, r.ID)
	require.Equal(t, "current", shown["Decision"].status)
	require.Contains(t, shown["Decision"].body, "decide by")
	for _, name := range []string{"Apply in an isolated worker", "State persisted (encrypted)", "Verification"} {
		require.Equal(t, "waiting", shown[name].status, name)
	}
	require.NoError(t, app.DB.Exec("UPDATE runs SET decision_deadline = now() - interval '1 second' WHERE id = ?", r.ID).Error)
	status, _, _ := postDecision(t, app, admin, "/runs/"+r.ID+"/approve", decisionForm(t, app, admin, r))
	require.Equal(t, http.StatusConflict, status)
	ended["expired"] = waitForState(t, app, r.ID, run.Expired)

	// The scheduled expiry (the expire job at the deadline) ends it with the same code.
	r = waitingIn(t, app, operator, "tl-expired-scheduled")
	require.NoError(t, app.DB.Exec("UPDATE runs SET decision_deadline = now() - interval '1 second' WHERE id = ?", r.ID).Error)
	_, err := app.System.Runs.Decisions.ExpireIfDue(context.Background(), r.ID, run.PendingApproval)
	require.NoError(t, err)
	ended["expired-scheduled"] = waitForState(t, app, r.ID, run.Expired)

	first := waitingIn(t, app, operator, "tl-stale")
	second := waitingIn(t, app, operator, "tl-stale")
	approve(t, app, admin, first)
	waitForState(t, app, first.ID, run.Succeeded)
	ended["stale"] = waitForState(t, app, second.ID, run.Stale)

	// us-east is against the organization's data residency: a hard-mandatory block.
	ended["blocked"] = waitForState(t, app, app.RequestRun(t, operator, bucketRequest(app.OrgEnvironmentID(t, "acme", "development"), "us-east")), run.PolicyBlocked)
	require.True(t, ended["blocked"].Finished())
	// A hard block is final, but a person who decides runs may still reject it with a
	// reason (DESIGN §2): it ends REJECTED, never approved.
	blockedReq := bucketRequest(app.OrgEnvironmentID(t, "acme", "development"), "us-east")
	blockedReq.Set("workspace", "tl-blocked-rejected")
	r = waitForState(t, app, app.RequestRun(t, operator, blockedReq), run.PolicyBlocked)
	status, _, body := postDecision(t, app, admin, "/runs/"+r.ID+"/approve", decisionForm(t, app, admin, r))
	require.Equal(t, http.StatusConflict, status, body)
	form = decisionForm(t, app, admin, r)
	form.Set("reason", "data must stay in the EU")
	post(admin, "/runs/"+r.ID+"/reject", form)
	ended["blocked-rejected"] = waitForState(t, app, r.ID, run.Rejected)

	// Last (it breaks planning for the organization): an org policy that does not
	// compile fails the plan gates.
	require.NoError(t, app.DB.Exec(`INSERT INTO org_policies (organization_id, name, version, title, enforcement, rego, tests, digest)
		VALUES (?, 'broken', 1, 'Broken', 'advisory', 'package gantry.org.broken\n\ndeny contains msg if {', '', 'x')`, app.Orgs["acme"]).Error)
	ended["failed"] = waitForState(t, app, app.RequestRun(t, operator, bucketRequest(app.OrgEnvironmentID(t, "acme", "development"), "eu-west")), run.Failed)

	const (
		request, config, plan, policy, cost = "Request", "Template and inputs validated, configuration generated", "Plan", "Policy decision", "Cost and impact estimate"
		decision, apply, persisted, verify  = "Decision", "Apply in an isolated worker", "State persisted (encrypted)", "Verification"
	)
	after := func(decided string) map[string]string {
		return map[string]string{request: "done", config: "done", plan: "done", policy: "done", cost: "done", decision: decided,
			apply: "not-reached", persisted: "not-reached", verify: "not-reached"}
	}
	want := map[string]map[string]string{
		"succeeded":         {request: "done", config: "done", plan: "done", policy: "done", cost: "done", decision: "done", apply: "done", persisted: "done", verify: "done"},
		"rejected":          after("rejected"),
		"cancelled":         after("cancelled"),
		"expired":           after("expired"),
		"expired-scheduled": after("expired"),
		"stale":             after("stale"),
		"blocked": {request: "done", config: "done", plan: "done", policy: "blocked", cost: "done", decision: "not-reached",
			apply: "not-reached", persisted: "not-reached", verify: "not-reached"},
		"blocked-rejected": {request: "done", config: "done", plan: "done", policy: "blocked", cost: "done", decision: "rejected",
			apply: "not-reached", persisted: "not-reached", verify: "not-reached"},
		"failed": {request: "done", config: "done", plan: "failed", policy: "not-reached", cost: "not-reached", decision: "not-reached",
			apply: "not-reached", persisted: "not-reached", verify: "not-reached"},
	}
	for ending, r := range ended {
		shown, order := timelineOf(t, app, admin, r.ID)
		for _, name := range order {
			require.NotEqual(t, "waiting", shown[name].status, "%s: %s reads WAITING", ending, name)
			require.Equal(t, want[ending][name], shown[name].status, "%s: %s", ending, name)
		}
	}

	// Every ending says why in its code: on the run, in the audit event of the move
	// that ended it, and in the API.
	wantEnding := map[string]run.Ending{"succeeded": run.EndVerified, "rejected": run.EndRejected, "cancelled": run.EndCancelled,
		"expired": run.EndApprovalExpired, "expired-scheduled": run.EndApprovalExpired, "stale": run.EndStateMoved,
		"blocked": run.EndPolicyHardBlocked, "blocked-rejected": run.EndRejected, "failed": run.EndPlanFailed}
	require.Len(t, wantEnding, len(ended))
	reader := app.Token(t, app.NewMember(t, "acme", "Rita Reader", "viewer", false), "read")
	for name, r := range ended {
		require.Equal(t, wantEnding[name], r.Ending, name)
		var logged string
		require.NoError(t, app.DB.Raw("SELECT data->>'ending' FROM audit_events WHERE target_id = ? AND action = ? ORDER BY id DESC LIMIT 1",
			r.ID, "run."+strings.ToLower(string(r.State))).Scan(&logged).Error)
		require.Equal(t, string(wantEnding[name]), logged, "%s: the audit event of the move", name)
		resp := app.API(t, reader, http.MethodGet, "/api/v1/runs/"+r.ID, "")
		body := webtest.ReadBody(t, resp)
		require.Equal(t, http.StatusOK, resp.StatusCode, body)
		require.Contains(t, body, `"ending":"`+string(wantEnding[name])+`"`, name)
		page := webtest.ReadBody(t, app.Get(t, admin, "/runs/"+r.ID))
		require.Contains(t, page, `data-testid="run-ending" data-ending="`+string(wantEnding[name])+`">Ended: `+html.EscapeString(wantEnding[name].Words()), name)
	}

	// What each ending step says.
	shown, _ = timelineOf(t, app, admin, ended["rejected"].ID)
	require.Contains(t, shown[decision].body, "by Adam (Acme Corp admin)")
	require.Contains(t, shown[decision].body, "not this quarter")
	require.Contains(t, shown[decision].body, ">rejected<", "named as a rejection, not a failure")
	shown, _ = timelineOf(t, app, admin, ended["cancelled"].ID)
	require.Contains(t, shown[decision].body, "by Olivia (Acme Corp operator)")
	require.Contains(t, shown[decision].body, "wrong bucket")
	shown, _ = timelineOf(t, app, admin, ended["succeeded"].ID)
	require.Regexp(t, `\d+ of \d+ rules passed`, shown[policy].body)
	require.Contains(t, shown[policy].body, `href="/runs/`+ended["succeeded"].ID+`/review"`)
	require.Regexp(t, `\+\$\d+\.\d\d per month`, shown[cost].body)
	require.Contains(t, shown[decision].body, "by Adam (Acme Corp admin)")
	shown, _ = timelineOf(t, app, admin, ended["blocked"].ID)
	require.Contains(t, shown[policy].body, "blocked for good by hard-mandatory allowed_regions")
	shown, _ = timelineOf(t, app, admin, ended["failed"].ID)
	require.Contains(t, shown[plan].body, "the plan gates could not run")
}

// TestStateNotesGoWithTheirState: what the APPROVED state means ("the apply must begin
// by …") is on the run page while the run is APPROVED and gone once it applied; the
// flash only reports what the person did.
func TestStateNotesGoWithTheirState(t *testing.T) {
	t.Parallel()
	app := webtest.Start(t)
	operator := app.LoggedIn(t, "operator@acme.test")
	admin := app.LoggedIn(t, "admin@acme.test")
	r := waitingIn(t, app, operator, "noted")
	app.StopQueue(t)
	approve(t, app, admin, r)
	waitForState(t, app, r.ID, run.Approved)
	page := webtest.ReadBody(t, app.Get(t, admin, "/runs/"+r.ID))
	require.Contains(t, page, "You approved noted "+r.Label()+".")
	require.Regexp(t, `data-testid="state-note">The apply starts by itself and must begin by \d\d:\d\d:\d\d UTC`, page)

	app.System.Queue.Start(context.Background())
	waitForState(t, app, r.ID, run.Succeeded)
	page = webtest.ReadBody(t, app.Get(t, admin, "/runs/"+r.ID))
	require.NotContains(t, page, `data-testid="state-note"`)
	require.NotContains(t, page, "must begin by")
}

// TestChangeStartsFromTheWorkspace: "Change" on a workspace opens the request form
// filled in with its environment, its name and the inputs of its last applied run;
// another organization's workspace is not found, and a workspace of another template
// is a bad request.
func TestChangeStartsFromTheWorkspace(t *testing.T) {
	t.Parallel()
	app := webtest.Start(t)
	operator := app.LoggedIn(t, "operator@acme.test")
	admin := app.LoggedIn(t, "admin@acme.test")
	req := bucketRequest(app.OrgEnvironmentID(t, "acme", "staging"), "eu-central")
	req.Set("workspace", "change-me")
	req.Set("inputs.retention_days", "45")
	r := waitForState(t, app, app.RequestRun(t, operator, req), run.PendingApproval)
	approve(t, app, admin, r)
	r = waitForState(t, app, r.ID, run.Succeeded)

	page := webtest.ReadBody(t, app.Get(t, operator, "/workspaces/"+r.WorkspaceID))
	// The workspace says what it holds: outputs, resources, and who wrote which version.
	require.Contains(t, page, `data-testid="workspace-outputs"`)
	require.Regexp(t, `<code>module\.[a-z_]+\.sandbox_bucket\.[a-z_]+</code></th><td>sandbox_bucket</td><td><code>[^<]+</code>`, page)
	require.Regexp(t, `<th scope="row">1</th><td><a href="/runs/`+r.ID+`">run #1</a>`, page)
	change := "/workspaces/" + r.WorkspaceID + "/change"
	require.Contains(t, page, `href="`+change+`" id="change-workspace"`)

	form := webtest.ReadBody(t, app.Get(t, operator, change))
	require.Contains(t, form, `id="environment" name="environment" value="`+r.EnvironmentID+`"`, "the workspace's environment, fixed")
	require.Contains(t, form, `name="workspace" value="change-me"`)
	require.Contains(t, form, `name="inputs.retention_days" value="45"`)
	require.Contains(t, form, `<option value="eu-central" selected>`)

	other := app.LoggedIn(t, "operator@globex.test")
	resp := app.Get(t, other, html.UnescapeString(change))
	webtest.ReadBody(t, resp)
	require.Equal(t, http.StatusNotFound, resp.StatusCode, "another organization's workspace")
	// An older link to the request form with a workspace leads to the change page, whose
	// template is the workspace's whatever the link said.
	resp = app.Get(t, operator, "/requests/new?template=postgres&workspace="+r.WorkspaceID)
	webtest.ReadBody(t, resp)
	require.Equal(t, http.StatusSeeOther, resp.StatusCode)
	require.Equal(t, change, resp.Header.Get("Location"))
}

// TestDestroyFromTheWorkspace: "Destroy…" on a workspace restates every resource its
// state holds and asks for the workspace's name; the destroy run it requests is risk 3
// (an owner, a fresh sign-in, DESTROY). A wrong name requests nothing; another
// organization's workspace is not found, and a viewer may not ask.
func TestDestroyFromTheWorkspace(t *testing.T) {
	t.Parallel()
	app := webtest.Start(t)
	operator := app.LoggedIn(t, "operator@acme.test")
	admin := app.LoggedIn(t, "admin@acme.test")
	req := bucketRequest(app.OrgEnvironmentID(t, "acme", "staging"), "eu-west")
	req.Set("workspace", "doomed")
	r := waitForState(t, app, app.RequestRun(t, operator, req), run.PendingApproval)
	approve(t, app, admin, r)
	r = waitForState(t, app, r.ID, run.Succeeded)
	destroyPath := "/workspaces/" + r.WorkspaceID + "/destroy"
	require.Contains(t, webtest.ReadBody(t, app.Get(t, operator, "/workspaces/"+r.WorkspaceID)), `href="`+destroyPath+`" id="destroy-workspace"`)

	page := webtest.ReadBody(t, app.Get(t, operator, destroyPath))
	require.Contains(t, page, "What the destroy removes (1)")
	require.Regexp(t, `<code>module\.[a-z_]+\.sandbox_bucket\.[a-z_]+</code>`, page)
	require.Contains(t, page, "risk 3")

	runs := func() int64 {
		return countRows(t, app, "SELECT count(*) FROM runs WHERE workspace_id = ?", r.WorkspaceID)
	}
	resp := app.PostForm(t, operator, destroyPath, url.Values{"_csrf": {app.CSRF(t, operator)}, "confirm": {"doomed-typo"}})
	body := webtest.ReadBody(t, resp)
	require.Equal(t, http.StatusUnprocessableEntity, resp.StatusCode, body)
	require.Contains(t, body, "Type the workspace&#39;s name, doomed, to confirm.")
	require.EqualValues(t, 1, runs(), "a wrong name requests nothing")

	other := app.LoggedIn(t, "operator@globex.test")
	for _, method := range []string{http.MethodGet, http.MethodPost} {
		var resp *http.Response
		if method == http.MethodGet {
			resp = app.Get(t, other, destroyPath)
		} else {
			resp = app.PostForm(t, other, destroyPath, url.Values{"_csrf": {app.CSRF(t, other)}, "confirm": {"doomed"}})
		}
		webtest.ReadBody(t, resp)
		require.Equal(t, http.StatusNotFound, resp.StatusCode, "%s by another organization", method)
	}
	viewer := app.LoggedIn(t, "viewer@acme.test")
	resp = app.PostForm(t, viewer, destroyPath, url.Values{"_csrf": {app.CSRF(t, viewer)}, "confirm": {"doomed"}})
	webtest.ReadBody(t, resp)
	require.Equal(t, http.StatusForbidden, resp.StatusCode)
	require.EqualValues(t, 1, runs())

	resp = app.PostForm(t, operator, destroyPath, url.Values{"_csrf": {app.CSRF(t, operator)}, "confirm": {"doomed"}})
	webtest.ReadBody(t, resp)
	require.Equal(t, http.StatusSeeOther, resp.StatusCode)
	d := waitForState(t, app, strings.TrimPrefix(resp.Header.Get("Location"), "/runs/"), run.PendingApproval)
	require.Equal(t, run.KindDestroy, d.Kind)
	require.Equal(t, "3", d.RiskLevel, "a destroy is risk 3")
	require.Equal(t, 1, d.PlanSummary.Delete)
	require.True(t, run.RequirementOf(d).Elevated)
}

// TestEditAndResubmitARejectedRun: a rejected run offers "Edit and resubmit", which
// opens the request form filled in with its request; another organization's run is not
// found.
func TestEditAndResubmitARejectedRun(t *testing.T) {
	t.Parallel()
	app := webtest.Start(t)
	operator := app.LoggedIn(t, "operator@acme.test")
	admin := app.LoggedIn(t, "admin@acme.test")
	req := bucketRequest(app.OrgEnvironmentID(t, "acme", "staging"), "eu-central")
	req.Set("workspace", "resubmitted")
	req.Set("inputs.retention_days", "400")
	r := waitForState(t, app, app.RequestRun(t, operator, req), run.PendingApproval)
	form := decisionForm(t, app, admin, r)
	form.Set("reason", "keep it under a year.")
	resp := app.PostForm(t, admin, "/runs/"+r.ID+"/reject", form)
	webtest.ReadBody(t, resp)
	require.Equal(t, http.StatusSeeOther, resp.StatusCode)
	waitForState(t, app, r.ID, run.Rejected)

	review := webtest.ReadBody(t, app.Get(t, operator, "/runs/"+r.ID+"/review"))
	link := "/requests/new?from_run=" + r.ID + "&amp;template=bucket"
	require.Contains(t, review, `href="`+link+`" id="edit-resubmit"`)
	require.Regexp(t, `This run was rejected by Adam \(Acme Corp admin\): keep it under a year\.<`, review, "one full stop after the reason")
	page := webtest.ReadBody(t, app.Get(t, operator, html.UnescapeString(link)))
	require.Regexp(t, `<option value="`+r.EnvironmentID+`" selected>`, page)
	require.Contains(t, page, `name="workspace" value="resubmitted"`)
	require.Contains(t, page, `name="inputs.retention_days" value="400"`)
	require.Contains(t, page, `<option value="eu-central" selected>`)

	other := app.LoggedIn(t, "operator@globex.test")
	resp = app.Get(t, other, html.UnescapeString(link))
	webtest.ReadBody(t, resp)
	require.Equal(t, http.StatusNotFound, resp.StatusCode)
}

// TestDidYouMeanANearWorkspace: a new workspace name two letters from an existing one
// in the same environment is refused with "did you mean", the typed values kept and a
// box to confirm the new name; confirmed, the request goes through and makes it.
func TestDidYouMeanANearWorkspace(t *testing.T) {
	t.Parallel()
	app := webtest.Start(t)
	operator := app.LoggedIn(t, "operator@acme.test")
	staging := app.OrgEnvironmentID(t, "acme", "staging")
	req := bucketRequest(staging, "eu-west")
	req.Set("workspace", "billing-prod")
	waitForState(t, app, app.RequestRun(t, operator, req), run.PendingApproval)

	typo := bucketRequest(staging, "eu-west")
	typo.Set("workspace", "billing-prd")
	typo.Set("_csrf", app.CSRF(t, operator))
	resp := app.PostForm(t, operator, "/requests", typo)
	body := webtest.ReadBody(t, resp)
	require.Equal(t, http.StatusUnprocessableEntity, resp.StatusCode)
	require.Contains(t, body, "There is no workspace billing-prd in staging, but there is billing-prod. Did you mean billing-prod?")
	require.Contains(t, body, `href="#new_workspace"`, "the summary links the confirmation")
	require.Contains(t, body, `id="new_workspace" name="new_workspace" value="true"`)
	require.Contains(t, body, `name="workspace" value="billing-prd"`, "what was typed is kept")
	require.Zero(t, countRows(t, app, "SELECT count(*) FROM workspaces WHERE name = 'billing-prd'"))

	// A name far from every other is not questioned; a confirmed near one goes through.
	typo.Set("new_workspace", "true")
	waitForState(t, app, app.RequestRun(t, operator, typo), run.PendingApproval)
	require.EqualValues(t, 1, countRows(t, app, "SELECT count(*) FROM workspaces WHERE name = 'billing-prd'"))
	far := bucketRequest(staging, "eu-west")
	far.Set("workspace", "analytics")
	waitForState(t, app, app.RequestRun(t, operator, far), run.PendingApproval)
}
