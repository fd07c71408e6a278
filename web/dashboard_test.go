package web_test

import (
	"net/http"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"gantry/cmd/gantry/webtest"
	"gantry/models/run"
	"gantry/models/state"
)

// section returns the landing page's section with data-testid id ("" when absent).
func section(page, id string) string {
	start := strings.Index(page, `data-testid="`+id+`"`)
	if start < 0 {
		return ""
	}
	end := strings.Index(page[start:], "</section>")
	if end < 0 {
		return page[start:]
	}
	return page[start : start+end]
}

var rawActionCode = regexp.MustCompile(`\b(run|state|workspace|environment|policy|membership|user|audit|webhook)\.[a-z_]+\b`)

// TestLandingPagePerRole: a requester sees their runs and what each waits on (who must
// decide, or "Edit and resubmit" after a rejection), never their own run as theirs to
// decide; an approver sees what waits for their decision, with the count; admins and
// auditors a feed of sentences with names and links, credential events folded into one
// line; a viewer sees none of these.
func TestLandingPagePerRole(t *testing.T) {
	t.Parallel()
	app := webtest.Start(t)
	operator := app.LoggedIn(t, "operator@acme.test")
	admin := app.LoggedIn(t, "admin@acme.test")

	// An applied run in development (its jobs leave credential events), one waiting in
	// staging and one rejected.
	dev := bucketRequest(app.OrgEnvironmentID(t, "acme", "development"), "eu-west")
	dev.Set("workspace", "landing-dev")
	applied := waitForState(t, app, app.RequestRun(t, operator, dev), run.Succeeded)
	waiting := waitingIn(t, app, operator, "landing-waiting")
	rejected := waitingIn(t, app, operator, "landing-rejected")
	form := decisionForm(t, app, admin, rejected)
	form.Set("reason", "use the shared bucket instead")
	resp := app.PostForm(t, admin, "/runs/"+rejected.ID+"/reject", form)
	webtest.ReadBody(t, resp)
	require.Equal(t, http.StatusSeeOther, resp.StatusCode)
	waitForState(t, app, rejected.ID, run.Rejected)
	// The simulated runner calls no state backend: a credential as a live job gets one.
	_, _, err := app.System.State.IssueCredentials(t.Context(), app.Orgs["acme"], rejected.WorkspaceID, rejected.ID, state.PhasePlan, time.Minute)
	require.NoError(t, err)

	home := func(c *http.Client) string {
		resp := app.Get(t, c, "/")
		body := webtest.ReadBody(t, resp)
		require.Equal(t, http.StatusOK, resp.StatusCode, body)
		return body
	}

	// The requester: her runs, newest first, each with what it waits on.
	page := home(operator)
	mine := section(page, "dashboard-mine")
	require.NotEmpty(t, mine, page)
	require.Contains(t, mine, "landing-waiting #1")
	require.Contains(t, mine, "landing-dev #1")
	waitsOn := regexp.MustCompile(`(?s)data-testid="run-` + waiting.ID + `".*?data-testid="waits-on">(.*?)</td>`).FindStringSubmatch(mine)
	require.NotNil(t, waitsOn, mine)
	require.Contains(t, waitsOn[1], "waiting for an operator, admin or owner, not the requester")
	require.Contains(t, waitsOn[1], "left")
	require.Contains(t, mine, `href="/requests/new?from_run=`+rejected.ID+`&amp;template=bucket"`, "a rejected run offers edit and resubmit")
	require.Contains(t, mine, "Edit and resubmit")
	require.Less(t, strings.Index(mine, rejected.ID), strings.Index(mine, applied.ID), "newest first")
	// Her own waiting run is not hers to decide.
	forHer := section(page, "dashboard-waiting")
	require.NotEmpty(t, forHer)
	require.NotContains(t, forHer, waiting.ID)
	require.Contains(t, forHer, "Nothing waits for your decision.")
	require.Regexp(t, `data-testid="waiting-count">0<`, page)
	require.Empty(t, section(page, "dashboard-activity"), "an operator reads no audit log")

	// The approver: the waiting run with her count, and the activity feed in words.
	page = home(admin)
	forAdmin := section(page, "dashboard-waiting")
	require.Contains(t, forAdmin, `data-testid="run-`+waiting.ID+`"`)
	require.Contains(t, forAdmin, `href="/runs/`+waiting.ID+`/review"`)
	require.Regexp(t, `data-testid="waiting-count">1<`, page)
	feed := section(page, "dashboard-activity")
	require.NotEmpty(t, feed, page)
	require.Contains(t, feed, "Olivia (Acme Corp operator)", "names, not ids")
	require.Contains(t, feed, `href="/runs/`+rejected.ID+`"`, "runs are links")
	require.Contains(t, feed, "use the shared bucket instead", "a rejection says why")
	require.Contains(t, feed, `data-testid="activity-folded"`, "the routine events are folded")
	require.Contains(t, feed, "state credential", "credential events are among them")
	require.Regexp(t, `href="/audit\?before=\d+"`, feed)
	require.NotContains(t, feed, "to “"+run.Planning.Words()+"”", "a phase starting is routine")
	require.NotRegexp(t, rawActionCode, feed, "no raw event codes")
	require.NotContains(t, feed, "usr-", "no user ids")
	// Each stretch of credential events is one line: never two folded lines in a row.
	lines := strings.Split(feed, `data-testid="activity-item"`)[1:]
	require.NotEmpty(t, lines)
	for i := 1; i < len(lines); i++ {
		require.False(t, strings.Contains(lines[i], "activity-folded") && strings.Contains(lines[i-1], "activity-folded"),
			"two folded lines in a row: %s", feed)
	}

	require.Contains(t, home(operator), `data-testid="new-request"`, "a requester's next step")
	require.Empty(t, section(page, "dashboard-compliance"), "an approver's landing leads with what waits for her")

	// The auditor: the feed and the compliance summary, nothing to decide, nothing
	// requested, nothing to request.
	page = home(app.LoggedIn(t, "auditor@acme.test"))
	require.NotEmpty(t, section(page, "dashboard-activity"))
	require.Empty(t, section(page, "dashboard-waiting"))
	require.Empty(t, section(page, "dashboard-mine"))
	require.NotContains(t, page, `data-testid="new-request"`)
	compliance := section(page, "dashboard-compliance")
	require.NotEmpty(t, compliance, page)
	require.Regexp(t, `(?s)data-testid="chain-state">.*Audit chain:`, compliance)
	for _, id := range []string{"unevidenced", "self-approved", "standing", "open-windows", "overrides"} {
		require.Regexp(t, `data-testid="`+id+`"[^>]*>\s*<span class="card-number[^"]*">\d+`, compliance, id)
	}
	require.Contains(t, compliance, `href="/audit?action=policy.overridden"`)
	require.Contains(t, compliance, `href="/governance"`)

	// The viewer: nothing to decide, request or audit; the runs they may see and where
	// to look.
	page = home(app.LoggedIn(t, "viewer@acme.test"))
	for _, id := range []string{"dashboard-waiting", "dashboard-mine", "dashboard-activity", "dashboard-compliance"} {
		require.Empty(t, section(page, id), id)
	}
	require.NotContains(t, page, `data-testid="new-request"`)
	recent := section(page, "dashboard-recent")
	require.Contains(t, recent, `href="/runs/`+waiting.ID+`"`, "the runs a viewer may see")
	require.Contains(t, recent, `href="/runs/`+applied.ID+`"`)
	require.Contains(t, section(page, "dashboard-look"), `href="/workspaces"`)
}
