package web_test

import (
	"html"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"gantry/cmd/gantry/webtest"
	"gantry/models/audit"
	"gantry/models/run"
)

// exportField is a hidden field of the audit history's export form.
var exportField = regexp.MustCompile(`<input type="hidden" name="(from|to|actor|action|environment|workspace|run)" value="([^"]*)">`)

// TestAuditFiltersTakeNames: the audit history's filters take what people know: a
// workspace by its name (with its environment where the name is in several), a run by
// its label, an actor by name and e-mail; an id still works, so links made with ids
// do. A name that finds nothing, or more than one thing, says so beside its field and
// shows no events; the API answers the same names.
func TestAuditFiltersTakeNames(t *testing.T) {
	t.Parallel()
	app := webtest.Start(t)
	operator := app.LoggedIn(t, "operator@acme.test")
	development := app.OrgEnvironmentID(t, "acme", "development")
	staging := app.OrgEnvironmentID(t, "acme", "staging")
	devRun := waitForState(t, app, app.RequestRun(t, operator, url.Values{"template": {"bucket"}, "environment": {development},
		"workspace": {"audit-names"}, "kind": {"apply"}, "inputs.name": {"audit-names"}}), run.Succeeded)
	app.RequestRun(t, operator, url.Values{"template": {"bucket"}, "environment": {staging}, "workspace": {"audit-names"},
		"kind": {"plan_only"}, "inputs.name": {"audit-names-staging"}})
	auditor := app.LoggedIn(t, "auditor@acme.test")
	get := func(query string, status int) string {
		t.Helper()
		resp := app.Get(t, auditor, "/audit?"+query)
		body := webtest.ReadBody(t, resp)
		require.Equal(t, status, resp.StatusCode, body)
		return body
	}
	field := func(page, id string) string {
		t.Helper()
		m := regexp.MustCompile(`id="filter-` + id + `" name="` + id + `" value="([^"]*)"`).FindStringSubmatch(page)
		require.NotNil(t, m, "the %s field", id)
		return html.UnescapeString(m[1])
	}
	onlyRuns := func(page string, runID string) {
		t.Helper()
		require.Greater(t, strings.Count(page, `data-testid="audit-event"`), 0, "some events")
		for _, href := range regexp.MustCompile(`href="/runs/(run-[a-z0-9]+)"`).FindAllStringSubmatch(page, -1) {
			require.Equal(t, runID, href[1], "only the development workspace's run")
		}
	}

	// A name in two environments: which one is asked, beside the field; no events.
	page := get("workspace=audit-names", http.StatusUnprocessableEntity)
	require.Contains(t, page, `href="#filter-workspace"`)
	require.Contains(t, page, "audit-names is in several environments: write audit-names (development) or audit-names (staging), or choose the environment")
	require.NotContains(t, page, `data-testid="audit-event"`)
	// With its environment, in brackets or chosen, or by its id: the same workspace.
	for _, q := range []string{"workspace=" + url.QueryEscape("audit-names (development)"), "workspace=audit-names&environment=" + development,
		"workspace=" + devRun.WorkspaceID} {
		page = get(q, http.StatusOK)
		require.Equal(t, "audit-names (development)", field(page, "workspace"), q)
		onlyRuns(page, devRun.ID)
	}
	page = get("workspace=no-such-workspace", http.StatusUnprocessableEntity)
	require.Contains(t, page, "no workspace you may see is named no-such-workspace")

	// A run by its label, alone or with the workspace chosen; by its id as before.
	for _, q := range []string{"run=" + url.QueryEscape("audit-names (development) #1"), "workspace=" + url.QueryEscape("audit-names (development)") + "&run=" + url.QueryEscape("#1"),
		"run=" + url.QueryEscape("audit-names #1") + "&environment=" + development} {
		page = get(q+"&action=run.queued", http.StatusOK)
		require.Equal(t, "audit-names (development) #1", field(page, "run"), q)
		require.Equal(t, 1, strings.Count(page, `data-testid="audit-event"`), q)
		onlyRuns(page, devRun.ID)
	}
	page = get("run="+devRun.ID+"&action=run.queued", http.StatusOK)
	require.Equal(t, devRun.ID, field(page, "run"), "an id is shown as given")
	require.Equal(t, 1, strings.Count(page, `data-testid="audit-event"`))
	for q, msg := range map[string]string{
		"run=" + url.QueryEscape("#1"):                                 "name its workspace too, such as orders-db #3, or choose the workspace",
		"run=" + url.QueryEscape("audit-names (development) #9"):       "audit-names (development) has no run #9 you may see",
		"run=last-tuesday":                                             "must be a run&#39;s label, such as orders-db #3, or its id (run-…)",
		"run=" + url.QueryEscape("audit-names #1"):                     "audit-names is in several environments",
		"workspace=" + url.QueryEscape("audit-names (production)"):     "no workspace you may see is named audit-names in production",
		"workspace=" + url.QueryEscape("Audit Names; DROP TABLE runs"): "must be a workspace&#39;s name",
	} {
		page = get(q, http.StatusUnprocessableEntity)
		require.Contains(t, page, msg, q)
		require.NotContains(t, page, `data-testid="audit-event"`, q)
	}

	// Another organization's workspace is no workspace the auditor may see, by name or
	// by id: nothing of it is listed; a NUL byte is refused (400) before any lookup.
	globexAdmin := app.LoggedIn(t, "admin@globex.test")
	foreign := waitForState(t, app, app.RequestRun(t, globexAdmin, url.Values{"template": {"bucket"}, "environment": {app.OrgEnvironmentID(t, "globex", "development")},
		"workspace": {"globex-only"}, "kind": {"plan_only"}, "inputs.name": {"globex-only"}}), run.Planned)
	page = get("workspace=globex-only", http.StatusUnprocessableEntity)
	require.Contains(t, page, "no workspace you may see is named globex-only")
	require.NotContains(t, page, `data-testid="audit-event"`)
	page = get("workspace="+foreign.WorkspaceID, http.StatusOK)
	require.NotContains(t, page, `data-testid="audit-event"`, "another organization's workspace id lists nothing")
	require.NotContains(t, page, "globex-only")
	page = get("run="+foreign.ID, http.StatusOK)
	require.NotContains(t, page, `data-testid="audit-event"`, "another organization's run id lists nothing")
	for _, q := range []string{"workspace=" + url.QueryEscape("audit\x00names"), "run=" + url.QueryEscape("audit-names\x00 #1")} {
		page = get(q, http.StatusBadRequest)
		require.Contains(t, page, "contains characters Gantry does not accept", q)
		require.NotContains(t, page, `data-testid="audit-event"`, q)
	}

	// The actor is chosen by name, the e-mail beside it; an id that is no member's
	// now stays chosen.
	page = get("", http.StatusOK)
	require.Regexp(t, `<option value="usr-[a-z0-9]+">Olivia \(Acme Corp operator\) · operator@acme.test</option>`, page)
	page = get("actor=usr-gone", http.StatusOK)
	require.Contains(t, page, `<option value="usr-gone" selected>usr-gone (not a member now)</option>`)

	// The API answers the same names, and refuses the same way.
	resp := app.Get(t, auditor, "/api/v1/audit/events?run="+url.QueryEscape("audit-names (development) #1")+"&action=run.queued")
	body := webtest.ReadBody(t, resp)
	require.Equal(t, http.StatusOK, resp.StatusCode, body)
	require.Contains(t, body, `"run_id":"`+devRun.ID+`"`)
	resp = app.Get(t, auditor, "/api/v1/audit/events?workspace=audit-names")
	body = webtest.ReadBody(t, resp)
	require.Equal(t, http.StatusUnprocessableEntity, resp.StatusCode, body)
	require.Contains(t, body, `"workspace"`)
}

// TestAuditExportTakesTheFilters: the audit history's export has no dates of its own:
// it takes the filters' range and filters (by id), says so in words, and the export it
// starts is of exactly those; with no range set it says it covers the last 30 days.
func TestAuditExportTakesTheFilters(t *testing.T) {
	t.Parallel()
	app := webtest.Start(t)
	operator := app.LoggedIn(t, "operator@acme.test")
	development := app.OrgEnvironmentID(t, "acme", "development")
	r := waitForState(t, app, app.RequestRun(t, operator, url.Values{"template": {"bucket"}, "environment": {development},
		"workspace": {"audit-export"}, "kind": {"apply"}, "inputs.name": {"audit-export"}}), run.Succeeded)
	auditor := app.LoggedIn(t, "auditor@acme.test")

	page := webtest.ReadBody(t, app.Get(t, auditor, "/audit"))
	require.Equal(t, 2, strings.Count(page, `type="datetime-local"`), "one set of dates: the filters'")
	require.Contains(t, page, "The filters set no time range, so the export covers the last 30 days")

	from := time.Now().UTC().Add(-2 * time.Hour).Truncate(time.Minute)
	to := time.Now().UTC().Add(time.Hour).Truncate(time.Minute)
	q := url.Values{"from": {from.Format("2006-01-02T15:04")}, "to": {to.Format("2006-01-02T15:04")}, "workspace": {"audit-export"},
		"action": {"run.queued"}}
	resp := app.Get(t, auditor, "/audit?"+q.Encode())
	page = webtest.ReadBody(t, resp)
	require.Equal(t, http.StatusOK, resp.StatusCode, page)
	require.Equal(t, 2, strings.Count(page, `type="datetime-local"`), "one set of dates: the filters'")
	require.NotContains(t, page, `data-testid="export-range-note"`, "the filters set the whole range")
	scope := regexp.MustCompile(`(?s)data-testid="export-scope">(.*?)</p>`).FindStringSubmatch(page)
	require.NotNil(t, scope)
	said := strings.Join(strings.Fields(regexp.MustCompile(`<[^>]+>`).ReplaceAllString(scope[1], "")), " ")
	require.Equal(t, "It exports every event from "+from.Format("2006-01-02 15:04")+" UTC to "+to.Format("2006-01-02 15:04")+
		" UTC · action Run requested · workspace audit-export (development)", said)
	fields := url.Values{}
	for _, m := range exportField.FindAllStringSubmatch(page, -1) {
		fields.Set(m[1], html.UnescapeString(m[2]))
	}
	require.Equal(t, url.Values{"from": q["from"], "to": q["to"], "action": {"run.queued"}, "workspace": {r.WorkspaceID}}, fields, "the filters', by id")

	fields.Set("_csrf", app.CSRF(t, auditor))
	fields.Set("format", "jsonl")
	resp = app.PostForm(t, auditor, "/audit/exports", fields)
	webtest.ReadBody(t, resp)
	require.Equal(t, http.StatusSeeOther, resp.StatusCode)
	var e audit.Export
	require.NoError(t, app.DB.Order("created_at DESC").Take(&e).Error)
	require.True(t, e.FromTime.Equal(from), "%v", e.FromTime)
	require.True(t, e.ToTime.Equal(to), "%v", e.ToTime)
	require.Equal(t, r.WorkspaceID, e.Filters.Workspace)
	require.Equal(t, "run.queued", e.Filters.Action)
}
