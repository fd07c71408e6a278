//go:build !fast

// Live: needs a browser (chromium, driven by chromedp).

package e2e_test

import (
	_ "embed"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"
	"github.com/stretchr/testify/require"

	"gantry/cmd/gantry/webtest"
	runmodel "gantry/models/run"
)

// axeSource is axe-core from its npm package (`go tool task vendor`), for these tests
// only: the portal never serves it.
//
//go:embed testdata/axe-core-4.11.0.min.js
var axeSource string

// axeViolation is one rule axe-core found broken on a page.
type axeViolation struct {
	ID     string   `json:"id"`
	Impact string   `json:"impact"`
	Help   string   `json:"help"`
	Nodes  []string `json:"nodes"`
}

// axeResult is what a run of axe-core found: how many rules passed, and the violations.
type axeResult struct {
	Passed     int            `json:"passed"`
	Violations []axeViolation `json:"violations"`
}

func (v axeViolation) String() string {
	return fmt.Sprintf("%s (%s): %s at %s", v.ID, v.Impact, v.Help, strings.Join(v.Nodes, "; "))
}

// requireAccessible runs axe-core (WCAG 2.1 A and AA rules) on the page b shows and
// fails on any serious or critical violation. The script is evaluated through the
// browser's debugging protocol, which the page's CSP does not govern.
func requireAccessible(t *testing.T, b *browser, page string) {
	t.Helper()
	run(t, b, "load axe-core", chromedp.Evaluate[chromedp.Void](axeSource))
	result := run(t, b, "run axe-core on "+page, chromedp.Evaluate[axeResult](`axe.run(document, {
			runOnly: {type: "tag", values: ["wcag2a", "wcag2aa", "wcag21a", "wcag21aa"]}})
		.then(r => ({passed: r.passes.length, violations: r.violations.map(v => ({id: v.id, impact: v.impact || "", help: v.help,
			nodes: v.nodes.slice(0, 5).map(n => n.target.join(" "))}))}))`, chromedp.EvalAwaitPromise))
	require.Greater(t, result.Passed, 10, "%s: axe-core checked the page", page)
	var serious []string
	for _, v := range result.Violations {
		if v.Impact == "serious" || v.Impact == "critical" {
			serious = append(serious, v.String())
		} else {
			t.Logf("%s: accessibility (%s, not failing): %s", page, v.Impact, v)
		}
	}
	require.Empty(t, serious, "%s: serious accessibility violations", page)
}

// TestPagesAreAccessibleInBrowser: axe-core finds no serious or critical violation on
// the pages people work in: the dashboard (the admin's, the requester's, the viewer's
// and the auditor's), catalog and template pages, request form (also with its errors),
// run, review, inbox (also just after a decision), workspaces list (also the archived
// ones), workspace and change pages (also as a viewer), the audit history and exports,
// the governance report, break-glass, members, executors, tokens, directory sync (as the
// owner), the environment list
// and forms (also an environment's target refused on its field) and the 404 page.
func TestPagesAreAccessibleInBrowser(t *testing.T) {
	chrome := chromePath(t)
	app := webtest.Start(t)
	operator := app.LoggedIn(t, operatorEmail)
	staging := app.OrgEnvironmentID(t, "acme", "staging")
	form := url.Values{"_csrf": {app.CSRF(t, operator)}, "template": {"postgres"}, "environment": {staging}, "workspace": {"accessible"},
		"kind": {"apply"}, "inputs.name": {"accessible"}, "inputs.engine_version": {"16"}, "inputs.size": {"small"},
		"inputs.storage_gb": {"20"}, "inputs.backup_retention_days": {"7"}, "inputs.network_cidr": {"10.30.0.0/16"}}
	resp := app.PostForm(t, operator, "/requests", form)
	webtest.ReadBody(t, resp)
	require.Equal(t, http.StatusSeeOther, resp.StatusCode)
	runPath := resp.Header.Get("Location")
	r := waitForRunRow(t, app, strings.TrimPrefix(runPath, "/runs/"), runmodel.PendingApproval)

	b := startBrowser(t, chrome)
	signInAs(t, b, app, adminEmail, adminPassword, "Adam")
	for _, page := range []string{"/", "/catalog", "/catalog/bucket", "/requests/new?template=postgres", runPath, runPath + "/review", "/approvals",
		"/workspaces", "/workspaces/" + r.WorkspaceID, "/workspaces/" + r.WorkspaceID + "/change", "/workspaces?archived=1", "/runs", "/policies",
		"/audit", "/audit/exports", "/governance", "/environments/new", "/breakglass", "/members", "/executors", "/settings/tokens", "/no-such-page"} {
		b.do(t, "open "+page, chromedp.Navigate(app.URL+page), chromedp.WaitVisible(chromedp.CSS(`main`)))
		requireAccessible(t, b, page)
	}
	for page, png := range map[string]string{"/approvals": "/tmp/gantry-approvals-1280.png", "/runs": "/tmp/gantry-runs-1280.png", "/policies": "/tmp/gantry-policies-1280.png",
		"/environments": "/tmp/gantry-environments-1280.png", "/environments/" + staging + "/edit": "/tmp/gantry-environment-edit-1280.png",
		"/catalog/postgres": "/tmp/gantry-template-1280.png", "/workspaces/" + r.WorkspaceID: "/tmp/gantry-workspace-1280.png"} {
		b.do(t, "open "+page, chromedp.Navigate(app.URL+page), chromedp.WaitVisible(chromedp.CSS(`main`)))
		requireAccessible(t, b, page)
		screenshotAt(t, b, png, 1280, 800, false)
		b.do(t, "reset the viewport", chromedp.ResetViewport())
	}
	// The landing pages: the admin's (what waits for her, the activity feed) and the
	// requester's (her runs and what each waits on).
	b.do(t, "open the admin's landing page", chromedp.Navigate(app.URL+"/"), chromedp.WaitVisible(chromedp.CSS(`[data-testid="dashboard-activity"]`)))
	screenshotAt(t, b, "/tmp/gantry-dashboard-admin-1280.png", 1280, 1000, true)
	b.do(t, "reset the viewport", chromedp.ResetViewport())
	requester := startBrowser(t, chrome)
	signInAs(t, requester, app, operatorEmail, operatorPassword, "Olivia")
	requester.do(t, "open the requester's landing page", chromedp.Navigate(app.URL+"/"), chromedp.WaitVisible(chromedp.CSS(`[data-testid="my-runs"]`)))
	requireAccessible(t, requester, "the requester's landing page")
	screenshotAt(t, requester, "/tmp/gantry-dashboard-operator-1280.png", 1280, 800, false)
	// The landing pages of who requests nothing: the viewer's (the runs they may see,
	// where to look) and the auditor's (the compliance summary); and the viewer's
	// catalog and workspace page, without the controls they may not use.
	for _, who := range []struct{ email, password, name, shows string }{
		{"viewer@acme.test", "viewer-acme", "Victor", "dashboard-recent"},
		{auditorEmail, auditorPassword, "Audrey", "dashboard-compliance"},
	} {
		reader := startBrowser(t, chrome)
		signInAs(t, reader, app, who.email, who.password, who.name)
		reader.do(t, "open "+who.email+"'s landing page", chromedp.Navigate(app.URL+"/"), chromedp.WaitVisible(chromedp.CSS(`[data-testid="`+who.shows+`"]`)))
		requireAccessible(t, reader, who.email+"'s landing page")
		for _, page := range []string{"/catalog", "/workspaces/" + r.WorkspaceID} {
			reader.do(t, "open "+page, chromedp.Navigate(app.URL+page), chromedp.WaitVisible(chromedp.CSS(`main`)))
			requireAccessible(t, reader, page+" as "+who.email)
		}
	}

	// The owners' pages: directory sync (SCIM).
	owner := startBrowser(t, chrome)
	signInAs(t, owner, app, ownerEmail, ownerPassword, ownerFirst)
	for _, page := range []string{"/settings/scim"} {
		owner.do(t, "open "+page, chromedp.Navigate(app.URL+page), chromedp.WaitVisible(chromedp.CSS(`main`)))
		requireAccessible(t, owner, page+" as the owner")
	}

	// The inbox just after a decision, offering the next waiting run as a link.
	admin := app.LoggedIn(t, adminEmail)
	approveHTTP(t, app, admin, r)
	b.do(t, "open the inbox after a decision", chromedp.Navigate(app.URL+"/approvals?decided="+r.ID), chromedp.WaitVisible(chromedp.CSS(`[data-testid="decided-state"]`)))
	requireAccessible(t, b, "the inbox after a decision")

	// The request form as it comes back with errors.
	b.do(t, "submit a request with mistakes", chromedp.Navigate(app.URL+"/requests/new?template=bucket"),
		chromedp.WaitVisible(chromedp.ID("submit-request")),
		chromedp.SetValue(chromedp.ID("input-name"), "Bad_Name"),
		chromedp.Evaluate[chromedp.Void](`document.getElementById("submit-request").click()`),
		chromedp.WaitVisible(chromedp.CSS(`[data-testid="error-summary"]`)))
	requireAccessible(t, b, "the request form with errors")

	// An environment's target refused on its field.
	b.do(t, "submit a Kubernetes target without https", chromedp.Navigate(app.URL+"/environments/"+staging+"/edit"),
		chromedp.WaitVisible(chromedp.ID("target_kind_kubernetes")),
		chromedp.Click(chromedp.ID("target_kind_kubernetes"), chromedp.NodeVisible),
		chromedp.SetValue(chromedp.ID("target_kubernetes_server"), "k8s.example.com"),
		chromedp.Evaluate[chromedp.Void](`document.getElementById("save-environment").click()`),
		chromedp.WaitVisible(chromedp.CSS(`[data-testid="error-target_kubernetes_server"]`)))
	requireAccessible(t, b, "the environment form with a refused target")
}
