package web_test

import (
	"html"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"gantry/cmd/gantry/webtest"
	"gantry/models/run"
	"gantry/policies"
	"gantry/views/paths"
)

// shownState is how a page shows run state s in its badge: the code in data-state (what
// tests and scripts read), the words for people.
func shownState(s run.State) string {
	return `data-state="` + string(s) + `">` + html.EscapeString(s.Words()) + `<`
}

// visibleText is what a person reads of page: its text without markup, scripts or
// styles, and so without the codes data attributes carry.
func visibleText(page string) string {
	page = regexp.MustCompile(`(?s)<(script|style)\b.*?</(script|style)>`).ReplaceAllString(page, " ")
	page = regexp.MustCompile(`(?s)<[^>]*>`).ReplaceAllString(page, " ")
	return html.UnescapeString(page)
}

// runCodes matches the codes of run states, kinds and policy outcomes as whole words:
// what pages must not show people (issue 37).
func runCodes() *regexp.Regexp {
	var codes []string
	for _, s := range run.States {
		codes = append(codes, string(s))
	}
	for _, k := range run.Kinds {
		if strings.Contains(string(k), "_") { // "apply", "destroy" and "codify" are words too
			codes = append(codes, string(k))
		}
	}
	codes = append(codes, string(policies.OutcomeSoft), string(policies.OutcomeHard))
	return regexp.MustCompile(`\b(` + strings.Join(codes, "|") + `)\b`)
}

// runActions matches the audit actions of runs (run.pending_approval): the run page's
// history and the evidence report say them in words too. The audit history alone shows
// an event's action code beside its sentence, for matching the log's exports.
var runActions = regexp.MustCompile(`\brun\.[a-z_]+\b`)

// stateBadges are the run state badges of page: code and words.
var stateBadges = regexp.MustCompile(`data-state="([A-Z_]+)">([^<]*)<`)

// TestPagesSayStatesInWords: every page a run's state, kind or policy outcome shows on
// (the run page, its review, the runs list, the inbox and its panel after a decision,
// the workspaces, the landing page, the audit history, the evidence report) says them
// in words, each state badge carrying its code in data-state; no code reaches the text a
// person reads; the audit log's data and the JSON API keep the codes.
func TestPagesSayStatesInWords(t *testing.T) {
	t.Parallel()
	app := webtest.Start(t)
	operator := app.LoggedIn(t, "operator@acme.test")
	admin := app.LoggedIn(t, "admin@acme.test")
	dev, staging := app.OrgEnvironmentID(t, "acme", "development"), app.OrgEnvironmentID(t, "acme", "staging")

	dry := bucketRequest(dev, "eu-west")
	dry.Set("kind", string(run.KindPlanOnly))
	planned := waitForState(t, app, app.RequestRun(t, operator, dry), run.Planned)
	blocked := waitForState(t, app, app.RequestRun(t, operator, postgresRequest(staging, "orders", "small", "1")), run.PolicyBlocked)
	require.Equal(t, string(policies.OutcomeSoft), blocked.PolicyOutcome)
	bucket := func(name string) url.Values {
		return url.Values{"template": {"bucket"}, "environment": {staging}, "workspace": {name}, "kind": {"apply"}, "inputs.name": {name}}
	}
	first := waitForState(t, app, app.RequestRun(t, operator, bucket("words-first")), run.PendingApproval)
	waiting := waitForState(t, app, app.RequestRun(t, operator, bucket("words-waiting")), run.PendingApproval)
	approve(t, app, admin, first)

	get := func(c *http.Client, path string) string {
		t.Helper()
		resp := app.Get(t, c, path)
		page := webtest.ReadBody(t, resp)
		require.Equal(t, http.StatusOK, resp.StatusCode, "%s: %s", path, page)
		return page
	}
	pages := map[string]string{}
	for _, p := range []string{paths.Run(planned.ID), paths.Run(blocked.ID), paths.Run(waiting.ID), paths.RunReview(blocked.ID),
		paths.RunReview(waiting.ID), paths.RunEvidence(planned.ID), paths.Runs(), "/workspaces", paths.Workspace(blocked.WorkspaceID), "/"} {
		pages[p] = get(operator, p)
	}
	for _, p := range []string{paths.Approvals(), paths.Filtered(paths.Approvals(), url.Values{"decided": {first.ID}}), "/audit", "/"} {
		pages["admin "+p] = get(admin, p)
	}

	codes := runCodes()
	require.Contains(t, visibleText(pages[paths.Runs()]), run.PendingApproval.Words(), "the check reads what people read")
	planted := visibleText(`<p>Now PENDING_APPROVAL, policy soft_failed, <code>run.queued</code></p>`)
	require.Len(t, codes.FindAllString(planted, -1), 2, "the check finds codes")
	require.Len(t, runActions.FindAllString(planted, -1), 1, "the check finds actions")
	for name, page := range pages {
		require.Empty(t, codes.FindAllString(visibleText(page), -1), "%s shows codes to people", name)
		if name != "admin /audit" {
			require.Empty(t, runActions.FindAllString(visibleText(page), -1), "%s shows audit actions' codes to people", name)
		}
		for _, m := range stateBadges.FindAllStringSubmatch(page, -1) {
			require.Equal(t, run.State(m[1]).Words(), html.UnescapeString(m[2]), "%s: the badge of %s", name, m[1])
		}
	}

	// The words, with the codes where tests and scripts read them.
	require.Contains(t, pages[paths.Run(planned.ID)], `data-testid="run-state" `+shownState(run.Planned))
	require.Contains(t, pages[paths.Run(planned.ID)], `data-kind="plan_only">Dry run: plan only, never applied<`)
	require.Contains(t, pages[paths.Run(planned.ID)], "Dry run of bucket ", "the timeline's request")
	require.Contains(t, pages[paths.Run(blocked.ID)], `data-testid="run-state" `+shownState(run.PolicyBlocked))
	require.Contains(t, pages[paths.Run(blocked.ID)], `data-state="soft_failed">Failed, may be overridden<`)
	require.Contains(t, pages[paths.RunReview(blocked.ID)], `data-testid="policy-outcome" data-state="soft_failed">Failed, may be overridden<`)
	require.Contains(t, pages[paths.RunReview(waiting.ID)], `data-testid="run-state" `+shownState(run.PendingApproval))
	require.Contains(t, pages[paths.RunEvidence(planned.ID)], `data-state="PLANNED">`)
	require.Contains(t, pages[paths.Runs()], shownState(run.PendingApproval))
	require.Contains(t, pages[paths.Runs()], `<option value="PENDING_APPROVAL">Waiting for approval</option>`, "the state filter")
	require.Contains(t, pages[paths.Runs()], `<option value="plan_only">Dry run</option>`, "the kind filter")
	require.Contains(t, pages["/workspaces"], shownState(run.PolicyBlocked))
	decided := pages["admin "+paths.Filtered(paths.Approvals(), url.Values{"decided": {first.ID}})]
	now := regexp.MustCompile(`data-testid="decided-state" data-state="([A-Z_]+)">`).FindStringSubmatch(decided)
	require.NotNil(t, now, "the panel after a decision shows the run's state: %s", decided)
	require.Contains(t, decided, `data-testid="decided-state" `+shownState(run.State(now[1])))
	require.Contains(t, pages["admin /audit"], "moved", "the history's sentences")
	require.Contains(t, pages["admin /audit"], "to “"+run.PolicyBlocked.Words()+"”")

	// The codes stay in the audit log's data and in the API.
	var action string
	require.NoError(t, app.DB.Raw("SELECT action FROM audit_events WHERE target_id = ? AND action LIKE 'run.policy%'", blocked.ID).Scan(&action).Error)
	require.Equal(t, "run.policy_blocked", action)
	reader := app.Token(t, app.NewMember(t, "acme", "Rita Reader", "viewer", false), "read")
	resp := app.API(t, reader, http.MethodGet, "/api/v1/runs/"+planned.ID, "")
	body := webtest.ReadBody(t, resp)
	require.Equal(t, http.StatusOK, resp.StatusCode, body)
	require.Contains(t, body, `"state":"PLANNED"`)
	require.Contains(t, body, `"kind":"plan_only"`)
	resp = app.API(t, reader, http.MethodGet, "/api/v1/runs/"+blocked.ID, "")
	body = webtest.ReadBody(t, resp)
	require.Contains(t, body, `"policy_outcome":"soft_failed"`)
}
