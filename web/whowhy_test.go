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
)

// TestReviewWhoWhy: the review says who asked for a run, when and why, and its inputs
// "was → now" against the workspace's last applied run. The reason is escaped with its
// line breaks kept; the ticket is a link only for an http(s) URL (a "javascript:"
// ticket is text); the requester reads "you"; the inbox row shows the reason's first
// line and the ticket, the run page both in its facts.
func TestReviewWhoWhy(t *testing.T) {
	t.Parallel()
	app := webtest.Start(t)
	operator := app.LoggedIn(t, "operator@acme.test")
	admin := app.LoggedIn(t, "admin@acme.test")
	dev, staging := app.OrgEnvironmentID(t, "acme", "development"), app.OrgEnvironmentID(t, "acme", "staging")

	// A bucket applied in development: the workspace's last applied run.
	first := bucketRequest(dev, "eu-west")
	first.Set("workspace", "whowhy-assets")
	applied := waitForState(t, app, app.RequestRun(t, operator, first), run.Succeeded)

	// The change: a longer retention, with a reason and a ticket URL.
	reason := "Auditors ask for <script>alert(1)</script> 60 days\nsecond line"
	second := bucketRequest(dev, "eu-west")
	second.Set("workspace", "whowhy-assets")
	second.Set("inputs.retention_days", "60")
	second.Set("reason", reason)
	second.Set("ticket", "https://tickets.example/OPS-77?a=1&b=2")
	changed := waitForState(t, app, app.RequestRun(t, operator, second), run.Succeeded)
	require.Equal(t, applied.WorkspaceID, changed.WorkspaceID)

	body := webtest.ReadBody(t, app.Get(t, admin, "/runs/"+changed.ID+"/review"))
	section := testidBlock(t, body, "whowhy")
	require.Regexp(t, `data-testid="requester">\s*`+regexp.QuoteMeta(html.EscapeString(changed.RequestedByName))+`\s*</dd>`, section,
		"the admin reads the operator's name, not \"you\"")
	require.NotContains(t, section, `data-testid="requester-you"`)
	require.Contains(t, section, `data-testid="reason">Auditors ask for &lt;script&gt;alert(1)&lt;/script&gt; 60 days`+"\n"+`second line</p>`)
	require.NotContains(t, body, "<script>alert(1)")
	require.Contains(t, section, `<a href="https://tickets.example/OPS-77?a=1&amp;b=2" rel="noopener noreferrer" class="whowhy-ticket" data-testid="ticket-link">`)
	require.Contains(t, section, `data-testid="ticket-link">https:<wbr>/<wbr>/<wbr>tickets.<wbr>example/<wbr>OPS-<wbr>77?<wbr>a=<wbr>1&amp;<wbr>b=<wbr>2<wbr></a>`,
		"the link's text breaks after its separators, not mid-word")
	require.Contains(t, section, `href="/runs/`+applied.ID+`"`, "compared with the run applied before")
	require.Contains(t, section, "1 input changes.")
	require.Regexp(t, `(?s)data-testid="input-retention_days" data-status="changed".*?data-testid="was">30</span> → <span class="now" data-testid="now">60<`, section)
	require.Regexp(t, `data-testid="input-region" data-status="unchanged"`, section)
	require.Less(t, strings.Index(body, `data-testid="whowhy"`), strings.Index(body, `data-testid="counts"`), "who and why come before the plan")

	// The requester reads "you".
	section = testidBlock(t, webtest.ReadBody(t, app.Get(t, operator, "/runs/"+changed.ID+"/review")), "whowhy")
	require.Contains(t, section, `data-testid="requester-you">you</span>`)

	// The run page shows both in its facts.
	body = webtest.ReadBody(t, app.Get(t, admin, "/runs/"+changed.ID))
	require.Contains(t, body, "Auditors ask for &lt;script&gt;alert(1)&lt;/script&gt; 60 days\nsecond line</span>")
	require.Contains(t, body, `<a href="https://tickets.example/OPS-77?a=1&amp;b=2" rel="noopener noreferrer"`)

	// A first request in staging waits in the admin's inbox; its ticket is a
	// "javascript:" URL, shown as text only, and its long reason cut in the row.
	long := strings.Repeat("Invoices move to the new region ", 5) + "\nmore"
	third := bucketRequest(staging, "eu-central")
	third.Set("workspace", "whowhy-eu")
	third.Set("reason", long)
	third.Set("ticket", "javascript:alert(document.cookie)")
	waiting := waitForState(t, app, app.RequestRun(t, operator, third), run.PendingApproval)
	body = webtest.ReadBody(t, app.Get(t, admin, "/approvals"))
	row := testidBlock(t, body, "run-"+waiting.ID)
	require.Contains(t, row, `data-testid="inbox-reason">`+run.ReasonLine(long, run.ReasonLineLength)+`</span>`)
	require.Contains(t, run.ReasonLine(long, run.ReasonLineLength), "…")
	require.Contains(t, row, `data-testid="ticket-text">javascript:alert(document.cookie)</span>`)
	require.NotContains(t, body, `href="javascript:`)

	body = webtest.ReadBody(t, app.Get(t, admin, "/runs/"+waiting.ID+"/review"))
	section = testidBlock(t, body, "whowhy")
	require.Contains(t, section, `data-testid="ticket-text">javascript:alert(document.cookie)</span>`)
	require.NotContains(t, section, "ticket-link")
	require.NotContains(t, body, `href="javascript:`)
	require.Contains(t, section, "Nothing was applied to this workspace before: every input is new.")
	require.Regexp(t, `data-testid="input-region" data-status="new"`, section)

	// Without a reason: said so.
	fourth := bucketRequest(staging, "eu-west")
	fourth.Set("workspace", "quiet-archive")
	bare := waitForState(t, app, app.RequestRun(t, operator, fourth), run.PendingApproval)
	section = testidBlock(t, webtest.ReadBody(t, app.Get(t, admin, "/runs/"+bare.ID+"/review")), "whowhy")
	require.Contains(t, section, "No reason given.")
	require.Contains(t, section, "No ticket")
	resp := app.Get(t, admin, "/runs/"+bare.ID)
	require.Equal(t, http.StatusOK, resp.StatusCode)
	require.Contains(t, webtest.ReadBody(t, resp), "No reason given")
}

// testidBlock is the element of body with data-testid id, up to the end of its tag
// name's matching close (sections and rows do not nest in themselves here).
func testidBlock(t *testing.T, body, id string) string {
	t.Helper()
	m := regexp.MustCompile(`<(\w+)[^>]*data-testid="` + regexp.QuoteMeta(id) + `"`).FindStringSubmatchIndex(body)
	require.NotNil(t, m, "no element with data-testid %q", id)
	tag := body[m[2]:m[3]]
	end := strings.Index(body[m[0]:], "</"+tag+">")
	require.GreaterOrEqual(t, end, 0, "element %q is not closed", id)
	return body[m[0] : m[0]+end]
}

// TestReviewWhoWhySensitive: a sensitive input is never shown on the review and never
// said to be unchanged, even when the same value was typed again; a rollback says where
// its inputs come from and compares them with the run applied before it.
func TestReviewWhoWhySensitive(t *testing.T) {
	t.Parallel()
	app := webtest.StartWith(t, webtest.Options{CatalogFS: notedCatalog(t)})
	operator := app.LoggedIn(t, "operator@acme.test")
	dev := app.OrgEnvironmentID(t, "acme", "development")
	const secret = "wombat-sealed-8k2p-note"
	noted := func(retention string) url.Values {
		return url.Values{"template": {"noted"}, "environment": {dev}, "workspace": {"whowhy-sealed"}, "kind": {"apply"},
			"inputs.name": {"whowhy-sealed"}, "inputs.access_note": {secret}, "inputs.retention_days": {retention}}
	}
	first := waitForState(t, app, app.RequestRun(t, operator, noted("30")), run.Succeeded)
	second := waitForState(t, app, app.RequestRun(t, operator, noted("60")), run.Succeeded)

	body := webtest.ReadBody(t, app.Get(t, operator, "/runs/"+second.ID+"/review"))
	require.NotContains(t, body, secret)
	section := testidBlock(t, body, "whowhy")
	require.Regexp(t, `data-testid="input-access_note" data-status="sensitive"`, section)
	require.Contains(t, section, "sensitive: whether it changed cannot be known")
	require.Regexp(t, `data-testid="input-retention_days" data-status="changed"`, section)
	require.Contains(t, section, "1 input changes.", "the sensitive one is not counted as a change, nor as unchanged")

	// The rollback to the first version: its inputs are the first run's.
	versions := stateVersions(t, app, first.WorkspaceID)
	resp := app.PostForm(t, operator, "/workspaces/"+first.WorkspaceID+"/rollback", url.Values{"_csrf": {app.CSRF(t, operator)}, "version": {versions[0]}})
	require.Equal(t, http.StatusSeeOther, resp.StatusCode, webtest.ReadBody(t, resp))
	rb := waitForState(t, app, runIDOf(t, resp), run.Succeeded)
	body = webtest.ReadBody(t, app.Get(t, operator, "/runs/"+rb.ID+"/review"))
	require.NotContains(t, body, secret)
	section = testidBlock(t, body, "whowhy")
	require.Contains(t, section, "This is a rollback: its inputs are those that wrote state version 1")
	require.Contains(t, section, `href="/runs/`+second.ID+`"`, "compared with the run applied before the rollback")
	require.Regexp(t, `(?s)data-testid="input-retention_days" data-status="changed".*?data-testid="was">60</span> → <span class="now" data-testid="now">30<`, section)
}
