package web_test

import (
	"html"
	"net/http"
	"net/url"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"gantry/cmd/gantry/webtest"
	"gantry/models/run"
)

// listPage is a list page's rows (the data-testid of each, in order) and its links.
type listPage struct {
	body       string
	rows       []string
	next, prev string
}

var (
	listRow  = regexp.MustCompile(`<tr data-testid="((?:workspace|run)-[^"]+)"`)
	nextLink = regexp.MustCompile(`<a href="([^"]+)" rel="next"`)
	prevLink = regexp.MustCompile(`<a href="([^"]+)" rel="prev"`)
)

func getList(t *testing.T, app *webtest.App, c *http.Client, path string) listPage {
	t.Helper()
	resp := app.Get(t, c, path)
	body := webtest.ReadBody(t, resp)
	require.Equal(t, http.StatusOK, resp.StatusCode, "GET %s\n%s", path, body)
	p := listPage{body: body}
	for _, m := range listRow.FindAllStringSubmatch(body, -1) {
		p.rows = append(p.rows, m[1])
	}
	if m := nextLink.FindStringSubmatch(body); m != nil {
		p.next = html.UnescapeString(m[1])
	}
	if m := prevLink.FindStringSubmatch(body); m != nil {
		p.prev = html.UnescapeString(m[1])
	}
	return p
}

// seedWorkspaces writes n workspaces named prefix-001… in environment envID of orgID,
// each with a last activity a minute after the one before (as if each had a run).
func seedWorkspaces(t testing.TB, app *webtest.App, orgID, envID, prefix string, n int) {
	t.Helper()
	require.NoError(t, app.DB.Exec(`INSERT INTO workspaces (id, organization_id, environment_id, name, template_name, last_run_at)
		SELECT 'ws-' || ? || lpad(g::text, 5, '0'), ?, ?, ? || '-' || lpad(g::text, 3, '0'), 'bucket', now() - interval '1 day' + g * interval '1 minute'
		FROM generate_series(1, ?) AS g`, prefix, orgID, envID, prefix, n).Error)
}

// names are the workspace names of a page's rows, read from its links.
func workspaceNames(t *testing.T, p listPage) []string {
	t.Helper()
	var out []string
	for _, m := range regexp.MustCompile(`<tr data-testid="workspace-[^"]+">\s*<th scope="row"><a href="/workspaces/[^"]+">([^<]+)</a>`).FindAllStringSubmatch(p.body, -1) {
		out = append(out, m[1])
	}
	require.Len(t, out, len(p.rows))
	return out
}

// TestWorkspaceListSearchSortAndPages: the workspaces list finds by part of a name,
// filters by environment, template and applying, sorts by each column both ways and
// pages through thousands by keyset, every workspace once and in order, forwards and
// back; each row carries its newest run's state; another organization's workspaces
// never appear, not even searched for by name; a broken cursor is a 400 and a search
// text with a NUL a field message with nothing listed.
func TestWorkspaceListSearchSortAndPages(t *testing.T) {
	t.Parallel()
	app := webtest.Start(t)
	operator := app.LoggedIn(t, "operator@acme.test")
	dev := app.OrgEnvironmentID(t, "acme", "development")
	staging := app.OrgEnvironmentID(t, "acme", "staging")

	applied := bucketRequest(dev, "eu-west")
	applied.Set("workspace", "lists-alpha")
	alpha := waitForState(t, app, app.RequestRun(t, operator, applied), run.Succeeded)
	beta := waitingIn(t, app, operator, "lists-beta")
	globexOperator := app.LoggedIn(t, "operator@globex.test")
	other := bucketRequest(app.OrgEnvironmentID(t, "globex", "development"), "eu-west")
	other.Set("workspace", "lists-globex")
	waitForState(t, app, app.RequestRun(t, globexOperator, other), run.Succeeded)
	seedWorkspaces(t, app, app.Orgs["acme"], dev, "bulk", 120)

	// Search: part of a name, in any case; each row with its newest run.
	p := getList(t, app, operator, "/workspaces?q=LISTS")
	require.Equal(t, []string{"workspace-" + alpha.WorkspaceID, "workspace-" + beta.WorkspaceID}, p.rows)
	require.Contains(t, p.body, "2 workspaces match")
	require.Regexp(t, `(?s)data-testid="workspace-`+alpha.WorkspaceID+`".*?data-testid="last-run">.*?#1</a>\s*<span class="[^"]*" `+shownState(run.Succeeded), p.body)
	require.Regexp(t, `(?s)data-testid="workspace-`+beta.WorkspaceID+`".*?data-testid="last-run">.*?`+shownState(run.PendingApproval), p.body)
	require.NotContains(t, p.body, "lists-globex", "another organization's workspace is not found")
	require.Contains(t, getList(t, app, globexOperator, "/workspaces?q=lists").body, "lists-globex")
	require.NotContains(t, getList(t, app, globexOperator, "/workspaces?q=lists").body, "lists-alpha")

	// Filters: an environment, a template, applying now.
	p = getList(t, app, operator, "/workspaces?environment="+url.QueryEscape(staging))
	require.Equal(t, []string{"workspace-" + beta.WorkspaceID}, p.rows)
	require.Contains(t, p.body, `<option value="`+staging+`" selected>staging</option>`, "the form shows the filter")
	require.Empty(t, getList(t, app, operator, "/workspaces?template=postgres").rows)
	require.Contains(t, getList(t, app, operator, "/workspaces?template=postgres").body, "No workspace matches")
	require.Empty(t, getList(t, app, operator, "/workspaces?applying=1").rows, "nothing applies now")
	// An environment of another organization filters nothing rather than everything.
	globexDev := app.OrgEnvironmentID(t, "globex", "development")
	require.Len(t, getList(t, app, operator, "/workspaces?q=lists&environment="+url.QueryEscape(globexDev)).rows, 2)

	// Paging by name through the 120 seeded workspaces: 50, 50, 20, each once, in order;
	// Previous from the last page gives the middle page again.
	var seen []string
	var pages []listPage
	for path := "/workspaces?q=bulk"; path != ""; {
		p := getList(t, app, operator, path)
		pages = append(pages, p)
		seen = append(seen, workspaceNames(t, p)...)
		path = p.next
	}
	require.Len(t, pages, 3)
	require.Len(t, pages[0].rows, 50)
	require.Len(t, pages[2].rows, 20)
	require.Empty(t, pages[0].prev, "the first page has none before it")
	require.Len(t, seen, 120)
	require.True(t, slices.IsSorted(seen), "by name: %v", seen)
	require.Equal(t, len(seen), len(slices.Compact(slices.Clone(seen))), "no workspace twice")
	require.Contains(t, pages[0].body, "120 workspaces match")
	back := getList(t, app, operator, pages[2].prev)
	require.Equal(t, pages[1].rows, back.rows)
	require.Contains(t, back.body, `data-testid="page-first"`)
	first := getList(t, app, operator, back.prev)
	require.Equal(t, pages[0].rows, first.rows)
	require.NotContains(t, first.body, `data-testid="page-first"`, "the first page reached backwards knows it is the first")

	// Sorting: by name descending, by last activity (newest first on the first click).
	p = getList(t, app, operator, "/workspaces?q=bulk&sort=-name")
	names := workspaceNames(t, p)
	require.Equal(t, "bulk-120", names[0])
	require.True(t, slices.IsSortedFunc(names, func(a, b string) int { return strings.Compare(b, a) }))
	require.Contains(t, p.body, `aria-sort="descending"`)
	p = getList(t, app, operator, "/workspaces?q=bulk")
	activity := regexp.MustCompile(`<th scope="col" aria-sort="none"><a href="([^"]+)" class="sort-link" data-testid="sort-Last run">`).FindStringSubmatch(p.body)
	require.NotNil(t, activity, "the last-run heading sorts")
	require.Contains(t, html.UnescapeString(activity[1]), "sort=-activity", "newest first on the first click")
	p = getList(t, app, operator, html.UnescapeString(activity[1]))
	require.Equal(t, "bulk-120", workspaceNames(t, p)[0])
	// The sort is kept by a new search (a hidden field) and by the page links.
	require.Contains(t, p.body, `<input type="hidden" name="sort" value="-activity">`)
	require.Contains(t, p.next, "sort=-activity")
	p = getList(t, app, operator, "/workspaces?sort=environment&q=lists")
	require.Equal(t, []string{"workspace-" + alpha.WorkspaceID, "workspace-" + beta.WorkspaceID}, p.rows, "development before staging")
	p = getList(t, app, operator, "/workspaces?sort=-environment&q=lists")
	require.Equal(t, []string{"workspace-" + beta.WorkspaceID, "workspace-" + alpha.WorkspaceID}, p.rows)

	// What a hand-edited link gets.
	resp := app.Get(t, operator, "/workspaces?after=not-a-cursor")
	body := webtest.ReadBody(t, resp)
	require.Equal(t, http.StatusBadRequest, resp.StatusCode, body)
	require.Contains(t, body, "This page link is broken")
	require.Equal(t, http.StatusBadRequest, app.Get(t, operator, "/workspaces?after=x&before=y").StatusCode)
	// A NUL never reaches the list: the edge refuses it in any query.
	resp = app.Get(t, operator, "/workspaces?q=a%00b")
	require.Equal(t, http.StatusBadRequest, resp.StatusCode)
	webtest.ReadBody(t, resp)
	resp = app.Get(t, operator, "/workspaces?q="+strings.Repeat("b", 201))
	body = webtest.ReadBody(t, resp)
	require.Equal(t, http.StatusUnprocessableEntity, resp.StatusCode)
	require.Contains(t, body, "Search for at most 200 characters (this is 201).")
	require.Contains(t, body, `aria-invalid="true"`)
	require.NotRegexp(t, listRow, body, "nothing is listed for a refused search")
	resp = app.Get(t, operator, "/workspaces?sort=nonsense")
	require.Equal(t, http.StatusOK, resp.StatusCode, "an unknown sort falls back to the default")
	webtest.ReadBody(t, resp)
}

// TestRunListSearchFiltersAndSorts: the runs list, newest first, finds a run by its
// label ("lists-beta #1"), a workspace's name, a template or requester, filters by state,
// environment, kind and "only mine", sorts by template; another organization's run is
// not found even by its id.
func TestRunListSearchFiltersAndSorts(t *testing.T) {
	t.Parallel()
	app := webtest.Start(t)
	operator := app.LoggedIn(t, "operator@acme.test")
	admin := app.LoggedIn(t, "admin@acme.test")
	dev := app.OrgEnvironmentID(t, "acme", "development")

	applied := bucketRequest(dev, "eu-west")
	applied.Set("workspace", "runs-alpha")
	alpha := waitForState(t, app, app.RequestRun(t, operator, applied), run.Succeeded)
	beta := waitingIn(t, app, operator, "runs-beta")
	network := url.Values{"template": {"network"}, "environment": {dev}, "workspace": {"runs-net"}, "kind": {"plan_only"},
		"inputs.name": {"runs-net"}, "inputs.subnet_count": {"2"}}
	dry := waitForState(t, app, app.RequestRun(t, admin, network), run.Planned)
	globexOperator := app.LoggedIn(t, "operator@globex.test")
	other := bucketRequest(app.OrgEnvironmentID(t, "globex", "development"), "eu-west")
	other.Set("workspace", "runs-globex")
	foreign := waitForState(t, app, app.RequestRun(t, globexOperator, other), run.Succeeded)

	all := getList(t, app, operator, "/runs")
	require.Equal(t, []string{"run-" + dry.ID, "run-" + beta.ID, "run-" + alpha.ID}, all.rows, "newest first")
	require.Contains(t, all.body, "3 runs")
	require.NotContains(t, all.body, foreign.ID)
	require.Contains(t, all.body, "runs-beta #1", "workspace-qualified labels")

	for q, want := range map[string][]string{
		"runs-beta #1":         {"run-" + beta.ID},
		"runs-beta #2":         nil,
		"RUNS-ALPHA":           {"run-" + alpha.ID},
		"network":              {"run-" + dry.ID},
		"adam":                 {"run-" + dry.ID}, // the admin requested it
		alpha.ID:               {"run-" + alpha.ID},
		foreign.ID:             nil, // another organization's run, by its id
		"runs-globex":          nil,
		"runs-globex #1":       nil,
		"no such thing at all": nil,
	} {
		require.Equal(t, want, getList(t, app, operator, "/runs?q="+url.QueryEscape(q)).rows, "q=%s", q)
	}
	require.Equal(t, []string{"run-" + alpha.ID}, getList(t, app, operator, "/runs?state=SUCCEEDED").rows)
	require.Equal(t, []string{"run-" + beta.ID}, getList(t, app, operator, "/runs?environment="+url.QueryEscape(app.OrgEnvironmentID(t, "acme", "staging"))).rows)
	require.Equal(t, []string{"run-" + dry.ID}, getList(t, app, operator, "/runs?kind=plan_only").rows)
	require.Equal(t, []string{"run-" + beta.ID, "run-" + alpha.ID}, getList(t, app, operator, "/runs?mine=1").rows)
	require.Equal(t, []string{"run-" + dry.ID}, getList(t, app, admin, "/runs?mine=1").rows)
	require.Equal(t, []string{"run-" + alpha.ID}, getList(t, app, operator, "/runs?mine=1&state=SUCCEEDED").rows, "filters combine")
	// Sorted by template (bucket before network), then newest first within one.
	sorted := getList(t, app, operator, "/runs?sort=template")
	require.Equal(t, []string{"run-" + alpha.ID, "run-" + beta.ID, "run-" + dry.ID}, sorted.rows)
	require.Contains(t, sorted.body, `aria-sort="ascending"`)
	require.Equal(t, []string{"run-" + dry.ID, "run-" + beta.ID, "run-" + alpha.ID}, getList(t, app, operator, "/runs?sort=-template").rows)
	// A state that is not one filters nothing.
	require.Len(t, getList(t, app, operator, "/runs?state=DROP%20TABLE").rows, 3)
}

// TestInboxSearchFiltersSortsAndPages: the inbox's two lists search, filter by
// environment and risk, sort by risk or time left and page on their own; the counts are
// of everything that matches, not of the page.
func TestInboxSearchFiltersSortsAndPages(t *testing.T) {
	t.Parallel()
	app := webtest.Start(t)
	operator := app.LoggedIn(t, "operator@acme.test")
	admin := app.LoggedIn(t, "admin@acme.test")
	staged := waitingIn(t, app, operator, "inbox-staged")
	prod := bucketRequest(app.OrgEnvironmentID(t, "acme", "production"), "eu-west")
	prod.Set("workspace", "inbox-prod")
	produced := waitForState(t, app, app.RequestRun(t, operator, prod), run.PendingApproval)
	require.Equal(t, 1, *staged.RiskClass)
	require.Equal(t, 2, *produced.RiskClass, "any change in production is risk 2")

	inbox := func(c *http.Client, query string) (you, others []string, body string) {
		t.Helper()
		body = getList(t, app, c, "/approvals"+query).body
		split := strings.Index(body, `id="for-others-title"`)
		require.Positive(t, split, body)
		for _, m := range listRow.FindAllStringSubmatchIndex(body, -1) {
			if m[0] < split {
				you = append(you, body[m[2]:m[3]])
			} else {
				others = append(others, body[m[2]:m[3]])
			}
		}
		return you, others, body
	}
	you, _, body := inbox(admin, "")
	require.ElementsMatch(t, []string{"run-" + staged.ID, "run-" + produced.ID}, you)
	require.Contains(t, body, `data-testid="approval-count">2<`)
	you, _, _ = inbox(admin, "?risk=2")
	require.Equal(t, []string{"run-" + produced.ID}, you)
	you, _, _ = inbox(admin, "?environment="+url.QueryEscape(app.OrgEnvironmentID(t, "acme", "staging")))
	require.Equal(t, []string{"run-" + staged.ID}, you)
	you, _, body = inbox(admin, "?q=prod")
	require.Equal(t, []string{"run-" + produced.ID}, you)
	require.Contains(t, body, `data-testid="approval-count">1<`)
	require.Regexp(t, `data-testid="approvals-found">\s*1 matching run waits for you\s*<span>· 0 for others</span>`, body)
	you, _, _ = inbox(admin, "?sort=-risk")
	require.Equal(t, []string{"run-" + produced.ID, "run-" + staged.ID}, you, "riskiest first")
	you, _, _ = inbox(admin, "?sort=risk")
	require.Equal(t, []string{"run-" + staged.ID, "run-" + produced.ID}, you)
	// The requester: both under "Waiting for others", filtered the same way.
	you, others, _ := inbox(operator, "?risk=1")
	require.Empty(t, you)
	require.Equal(t, []string{"run-" + staged.ID}, others)

	// 60 more waiting in staging: "Waiting for you" pages by 50, its count is all 62.
	seedWaiting(t, app, staged, 60)
	you, _, body = inbox(admin, "")
	require.Len(t, you, 50)
	require.Contains(t, body, `data-testid="approval-count">62<`)
	next := nextLink.FindStringSubmatch(body)
	require.NotNil(t, next, "a next page of what waits for you")
	nextURL := html.UnescapeString(next[1])
	require.Contains(t, nextURL, "you_after=")
	second, _, body := inbox(admin, strings.TrimPrefix(nextURL, "/approvals"))
	require.Len(t, second, 12)
	require.Empty(t, slicesIntersect(you, second), "no run on both pages")
	require.Contains(t, body, `rel="prev"`)
	resp := app.Get(t, admin, "/approvals?you_after=broken")
	require.Equal(t, http.StatusBadRequest, resp.StatusCode)
	webtest.ReadBody(t, resp)
}

func slicesIntersect(a, b []string) []string {
	var out []string
	for _, x := range a {
		if slices.Contains(b, x) {
			out = append(out, x)
		}
	}
	return out
}

var (
	ruleRow    = regexp.MustCompile(`<tr data-testid="policy-rule-([^"]+)"`)
	versionRow = regexp.MustCompile(`<tr data-testid="org-policy-([^"]+)"`)
)

func matches(re *regexp.Regexp, body string) []string {
	var out []string
	for _, m := range re.FindAllStringSubmatch(body, -1) {
		out = append(out, m[1])
	}
	return out
}

// TestPolicyListSearchFiltersSortsAndPages: the policies page's one form searches and
// filters both the bundle's rules and the uploaded versions (each filter as far as it
// holds for each: built-in rules have no versions, every rule in the bundle is in
// force); each table sorts by its own headings and pages on its own.
func TestPolicyListSearchFiltersSortsAndPages(t *testing.T) {
	t.Parallel()
	app := webtest.Start(t)
	admin := app.LoggedIn(t, "admin@acme.test")
	token := app.CSRF(t, admin)
	for _, rego := range []string{teamLabelRego, strings.Replace(teamLabelRego, `"enforcement": "soft_mandatory"`, `"enforcement": "hard_mandatory"`, 1)} {
		resp := app.PostForm(t, admin, "/policies/upload", uploadForm(token, "team_label", rego, teamLabelTests))
		require.Equal(t, http.StatusSeeOther, resp.StatusCode, webtest.ReadBody(t, resp))
	}
	// 70 deactivated policies uploaded earlier (inactive, so the bundle leaves them out).
	require.NoError(t, app.DB.Exec(`INSERT INTO org_policies (organization_id, name, version, title, enforcement, rego, tests, digest, active, uploaded_by_name, created_at)
		SELECT ?, 'bulk_' || lpad(g::text, 3, '0'), 1, 'Bulk policy ' || g, 'advisory', '', '', 'sha256:' || g, false, 'Seed', now() - interval '1 day' + g * interval '1 second'
		FROM generate_series(1, 70) AS g`, app.Orgs["acme"]).Error)

	page := func(query string) (rules, versions []string, body string) {
		t.Helper()
		body = getList(t, app, admin, "/policies"+query).body
		return matches(ruleRow, body), matches(versionRow, body), body
	}
	rules, versions, body := page("")
	require.Len(t, rules, 11, "ten built-in rules and the organization's")
	require.Len(t, versions, 50, "a page of the 72 versions")
	require.Contains(t, body, "11 rules")
	require.Contains(t, body, "· 72 uploaded versions")

	rules, versions, body = page("?q=TEAM")
	require.Equal(t, []string{"org.team_label"}, rules)
	require.Equal(t, []string{"team_label-2", "team_label-1"}, versions, "the newest version first")
	require.Contains(t, body, "1 rule matches")
	rules, versions, _ = page("?status=superseded")
	require.Empty(t, rules, "every rule in the bundle is in force")
	require.Equal(t, []string{"team_label-1"}, versions)
	rules, versions, _ = page("?status=inactive")
	require.Empty(t, rules)
	require.Len(t, versions, 50)
	rules, versions, body = page("?origin=builtin")
	require.Len(t, rules, 10)
	require.Empty(t, versions)
	require.Contains(t, body, "No uploaded version matches.")
	rules, versions, _ = page("?mode=hard_mandatory&q=team")
	require.Equal(t, []string{"org.team_label"}, rules)
	require.Equal(t, []string{"team_label-2"}, versions)

	// Sorting: the rules by mode, strongest first; the versions by upload, newest first.
	hard, _, _ := page("?mode=hard_mandatory")
	require.Contains(t, hard, "org.team_label")
	require.Less(t, len(hard), 11)
	rules, _, body = page("?sort=-mode")
	require.ElementsMatch(t, hard, rules[:len(hard)], "the hard-mandatory rules first")
	require.Contains(t, body, `aria-sort="descending"`)
	rules, _, _ = page("?sort=mode")
	require.ElementsMatch(t, hard, rules[len(rules)-len(hard):], "and last the other way round")
	_, versions, _ = page("?versions_sort=-uploaded")
	require.Equal(t, []string{"team_label-2", "team_label-1", "bulk_070-1"}, versions[:3])
	_, versions, _ = page("?versions_sort=uploaded")
	require.Equal(t, "bulk_001-1", versions[0])

	// The versions page on their own; the rules stay.
	_, versions, body = page("")
	next := regexp.MustCompile(`<a href="(/policies\?versions_after=[^"]+)" rel="next"`).FindStringSubmatch(body)
	require.NotNil(t, next, body)
	rules, second, _ := page(strings.TrimPrefix(html.UnescapeString(next[1]), "/policies"))
	require.Len(t, rules, 11)
	require.Len(t, second, 22)
	require.Empty(t, slicesIntersect(versions, second))
	resp := app.Get(t, admin, "/policies?rules_after=broken")
	require.Equal(t, http.StatusBadRequest, resp.StatusCode)
	webtest.ReadBody(t, resp)
}
