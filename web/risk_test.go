package web_test

import (
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"gantry/cmd/gantry/webtest"
	"gantry/models/run"
)

// riskInbox reads c's inbox with query: the rows of "Waiting for you" and of "Waiting for
// others", in the page's order, and the page.
func riskInbox(t *testing.T, app *webtest.App, c *http.Client, query string) (you, others []string, body string) {
	t.Helper()
	body = getList(t, app, c, "/approvals"+query).body
	split := strings.Index(body, `id="for-others-title"`)
	require.Positive(t, split, body)
	for _, m := range listRow.FindAllStringSubmatchIndex(body, -1) {
		if m[0] < split {
			you = append(you, body[m[2]+len("run-"):m[3]])
		} else {
			others = append(others, body[m[2]+len("run-"):m[3]])
		}
	}
	return you, others, body
}

// waitingOnLanding is the runs the landing page lists as waiting for c's decision, in
// its order.
func waitingOnLanding(t *testing.T, app *webtest.App, c *http.Client) []string {
	t.Helper()
	body := webtest.ReadBody(t, app.Get(t, c, "/"))
	start := strings.Index(body, `data-testid="dashboard-waiting"`)
	require.Positive(t, start, "the landing page has a waiting list")
	body = body[start:]
	body = body[:strings.Index(body, "</section>")]
	var ids []string
	for _, m := range listRow.FindAllStringSubmatch(body, -1) {
		ids = append(ids, strings.TrimPrefix(m[1], "run-"))
	}
	return ids
}

// riskRuns are three runs waiting at once, requested in this order (so their decisions
// close in this order): a create in staging (risk 1), a create in production (risk 2),
// a destroy (risk 3).
type riskRuns struct{ low, high, destroy run.Run }

func startRiskRuns(t *testing.T, app *webtest.App, operator, admin *http.Client) riskRuns {
	t.Helper()
	// The destroyed workspace is applied first: its destroy is asked for last.
	req := bucketRequest(app.OrgEnvironmentID(t, "acme", "staging"), "eu-west")
	req.Set("workspace", "risk-doomed")
	applied := waitForState(t, app, app.RequestRun(t, operator, req), run.PendingApproval)
	approve(t, app, admin, applied)
	applied = waitForState(t, app, applied.ID, run.Succeeded)
	var rr riskRuns
	rr.low = waitingIn(t, app, operator, "risk-low")
	prod := bucketRequest(app.OrgEnvironmentID(t, "acme", "production"), "eu-west")
	prod.Set("workspace", "risk-prod")
	rr.high = waitForState(t, app, app.RequestRun(t, operator, prod), run.PendingApproval)
	resp := app.PostForm(t, operator, "/workspaces/"+applied.WorkspaceID+"/destroy", url.Values{"_csrf": {app.CSRF(t, operator)}, "confirm": {"risk-doomed"}})
	webtest.ReadBody(t, resp)
	require.Equal(t, http.StatusSeeOther, resp.StatusCode)
	rr.destroy = waitForState(t, app, strings.TrimPrefix(resp.Header.Get("Location"), "/runs/"), run.PendingApproval)
	require.Equal(t, []int{1, 2, 3}, []int{*rr.low.RiskClass, *rr.high.RiskClass, *rr.destroy.RiskClass})
	require.True(t, rr.low.DecisionDeadline.Before(*rr.high.DecisionDeadline) && rr.high.DecisionDeadline.Before(*rr.destroy.DecisionDeadline),
		"the decisions close in the order asked: %v %v %v", rr.low.DecisionDeadline, rr.high.DecisionDeadline, rr.destroy.DecisionDeadline)
	return rr
}

// TestRiskYouCanSee: an owner's inbox puts risk 3 first by default (an admin's keeps the
// decisions that close first), sorts and filters by risk; each risk badge says its class
// in words; a destructive approval is a danger button restating the counts while a
// harmless one stays plain; after a decision with more waiting, the person lands on the
// inbox, which says what became of the run and offers the next as a link (not its
// review); the same approval posted twice approves nothing else.
func TestRiskYouCanSee(t *testing.T) {
	t.Parallel()
	app := webtest.Start(t)
	operator := app.LoggedIn(t, "operator@acme.test")
	admin := app.LoggedIn(t, "admin@acme.test")
	owner := app.LoggedIn(t, "owner@acme.test")
	rr := startRiskRuns(t, app, operator, admin)
	low, high, destroy := rr.low.ID, rr.high.ID, rr.destroy.ID

	// The owner's default: riskiest first. The admin's: the decision closing first (the
	// destroy is an owner's, so it waits for others).
	you, _, body := riskInbox(t, app, owner, "")
	require.Equal(t, []string{destroy, high, low}, you, "an owner's inbox: risk 3 first")
	require.Contains(t, body, `aria-sort="descending"`, "the risk heading says it is the order")
	require.Equal(t, []string{destroy, high, low}, waitingOnLanding(t, app, owner), "the owner's landing page: risk 3 first, as the inbox")
	require.Equal(t, []string{low, high}, waitingOnLanding(t, app, admin), "the admin's landing page: as her inbox")
	you, others, _ := riskInbox(t, app, admin, "")
	require.Equal(t, []string{low, high}, you, "an admin's inbox: the decision closing first")
	require.Equal(t, []string{destroy}, others)
	you, _, _ = riskInbox(t, app, owner, "?sort=deadline")
	require.Equal(t, []string{low, high, destroy}, you, "the owner may sort by deadline")
	you, _, _ = riskInbox(t, app, admin, "?sort=-risk")
	require.Equal(t, []string{high, low}, you)
	you, _, _ = riskInbox(t, app, owner, "?risk=3")
	require.Equal(t, []string{destroy}, you, "filtered to risk 3")
	you, others, _ = riskInbox(t, app, admin, "?risk=3")
	require.Empty(t, you)
	require.Equal(t, []string{destroy}, others)

	// Every badge names its class in words, with its own look.
	for class, words := range map[string]string{"1": "risk 1 · low", "2": "risk 2 · high", "3": "risk 3 · critical"} {
		require.Regexp(t, `class="badge risk risk-`+class+`" data-testid="risk-badge" data-risk="`+class+`"><span class="risk-glyph" aria-hidden="true">[^<]+</span> `+words+`</span>`, body)
	}

	// A destroy's approval is a danger button restating what it destroys; a create's
	// is the plain one.
	page := webtest.ReadBody(t, app.Get(t, owner, "/runs/"+destroy+"/review"))
	require.Contains(t, page, `<summary class="button danger approve-danger" id="arm-approve">Approve: destroys 1…</summary>`)
	require.Contains(t, page, `<button type="submit" class="danger approve-danger" id="approve" data-destructive="true">Approve: destroys 1</button>`)
	page = webtest.ReadBody(t, app.Get(t, owner, "/runs/"+low+"/review"))
	require.Contains(t, page, `<button type="submit" id="approve" data-destructive="false">Approve this plan</button>`)
	require.NotContains(t, page, "approve-danger")

	// The owner approves the destroy: the inbox says so and offers the next as a link.
	form := decisionForm(t, app, owner, rr.destroy)
	resp := app.PostForm(t, owner, "/runs/"+destroy+"/approve", form)
	webtest.ReadBody(t, resp)
	require.Equal(t, http.StatusSeeOther, resp.StatusCode)
	decided := "/approvals?decided=" + destroy
	require.Equal(t, decided, resp.Header.Get("Location"), "the inbox, not the next run's review")
	page = webtest.ReadBody(t, app.Get(t, owner, decided))
	require.Contains(t, page, `<h2 id="decided-title">You approved risk-doomed `+rr.destroy.Label()+`</h2>`)
	require.Contains(t, page, `<a href="/runs/`+high+`/review" data-testid="next-waiting-link">risk-prod `+rr.high.Label()+`</a>`,
		"the next in the owner's order, as a link")
	require.NotContains(t, page, `id="approve"`, "no approve button on the page that follows a decision")
	require.Less(t, strings.Index(page, `data-testid="decided"`), strings.Index(page, `data-testid="approvals"`), "the outcome comes before the lists")

	// The same approval again (a double click): the same answer, nothing else decided.
	// A fresh one (the review page reloaded): refused, the run moved on.
	resp = app.PostForm(t, owner, "/runs/"+destroy+"/approve", form)
	webtest.ReadBody(t, resp)
	require.Equal(t, http.StatusSeeOther, resp.StatusCode)
	require.Equal(t, decided, resp.Header.Get("Location"))
	status, _, _ := postDecision(t, app, owner, "/runs/"+destroy+"/approve", decisionForm(t, app, owner, rr.destroy))
	require.Equal(t, http.StatusConflict, status)
	for _, id := range []string{low, high} {
		require.Equal(t, run.PendingApproval, waitForState(t, app, id, run.PendingApproval).State)
	}
	require.EqualValues(t, 1, countRows(t, app, "SELECT count(*) FROM runs WHERE approved_by IS NOT NULL AND id IN (?, ?, ?)", low, high, destroy))

	// Only one's own decision is named: another's, or a run nobody decided, names nothing.
	for _, c := range []*http.Client{admin, app.LoggedIn(t, "admin@globex.test")} {
		require.NotContains(t, webtest.ReadBody(t, app.Get(t, c, decided)), `data-testid="decided"`)
	}
	require.NotContains(t, webtest.ReadBody(t, app.Get(t, owner, "/approvals?decided="+low)), `data-testid="decided"`)

	// The last run waiting for the admin: a rejection then lands on its run page.
	approve(t, app, admin, rr.low)
	resp = app.PostForm(t, admin, "/runs/"+high+"/reject", withReason(decisionForm(t, app, admin, rr.high), "not this quarter"))
	webtest.ReadBody(t, resp)
	require.Equal(t, http.StatusSeeOther, resp.StatusCode)
	require.Equal(t, "/runs/"+high, resp.Header.Get("Location"), "nothing else waits: the run page")
}

// TestOwnerInboxOrderWithinAClass: in an owner's default order the riskiest come first
// and, within a class, the decision that closes first; sorted by risk the other way
// round, the whole order turns.
func TestOwnerInboxOrderWithinAClass(t *testing.T) {
	t.Parallel()
	app := webtest.Start(t)
	operator := app.LoggedIn(t, "operator@acme.test")
	owner := app.LoggedIn(t, "owner@acme.test")
	first := waitingIn(t, app, operator, "order-first")
	second := waitingIn(t, app, operator, "order-second")
	prod := bucketRequest(app.OrgEnvironmentID(t, "acme", "production"), "eu-west")
	prod.Set("workspace", "order-prod")
	high := waitForState(t, app, app.RequestRun(t, operator, prod), run.PendingApproval)
	require.True(t, first.DecisionDeadline.Before(*second.DecisionDeadline))
	you, _, _ := riskInbox(t, app, owner, "")
	require.Equal(t, []string{high.ID, first.ID, second.ID}, you, "riskiest first, then the decision closing first")
	you, _, _ = riskInbox(t, app, owner, "?sort=risk")
	require.Equal(t, []string{second.ID, first.ID, high.ID}, you, "the same order turned")
	you, _, _ = riskInbox(t, app, owner, "?risk=1")
	require.Equal(t, []string{first.ID, second.ID}, you)
}

func withReason(v url.Values, reason string) url.Values {
	v.Set("reason", reason)
	return v
}
