//go:build !fast

// Live: needs a browser (chromium, driven by chromedp).

package e2e_test

import (
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"testing/fstest"

	"github.com/chromedp/chromedp"
	"github.com/stretchr/testify/require"

	"gantry/bench"
	"gantry/cmd/gantry/webtest"
	runmodel "gantry/models/run"
)

const (
	ownerEmail    = "owner@acme.test"
	ownerPassword = "owner-acme"
	ownerFirst    = "Alice"
	ownerName     = "Alice (Acme Corp owner)"

	// markupNote is free text that looks like HTML: the review page must show it as text.
	markupNote = `<b id=injected>urgent</b>`

	// Artifacts for a human; not assertions.
	reviewWideScreenshot  = "/tmp/gantry-review-1280.png"
	reviewPhoneScreenshot = "/tmp/gantry-review-390.png"
)

// appdbManifest is a test-only template: a database with the buckets that hang off
// it. Changing engine_version replaces the database (engine_version forces a new
// object), which makes the exports bucket (whose labels name the database's id) a
// dependent; reports adds buckets that depend on the database too. note is free text
// (a label), which the plan shows: markup in it must stay text on the review page.
const appdbManifest = `name: appdb
version: 1.0.0
title: Application database (test)
description: A PostgreSQL database on its own network, with an exports bucket and optional report buckets that name it.
owner: platform-data
inputs:
  - name: name
    type: string
    required: true
    pattern: "^[a-z][a-z0-9-]{2,30}$"
    help: Lower-case name, 3 to 31 characters, starting with a letter.
    divergence: fixed
  - name: engine_version
    type: string
    default: "16"
    enum: ["15", "16", "17"]
    help: PostgreSQL major version. Changing it replaces the database, which destroys its data.
    divergence: fixed
  - name: reports
    type: number
    default: 0
    min: 0
    max: 3
    help: How many report buckets to keep next to the database.
    divergence: count
  - name: note
    type: string
    default: ""
    help: Free text, kept as a label on the database.
    divergence: fixed
prices:
  sandbox_network: 0
  sandbox_subnet: 4.5
  sandbox_database: 60
  sandbox_bucket: 2.3
irreversible: [sandbox_database, sandbox_bucket]
rollback: |
  The database and the buckets hold data: replacing or destroying them loses it. Restore a
  backup into a new database instead (forward fix).
`

const appdbMain = `# A database on its own network, with buckets that name it.

resource "sandbox_network" "this" {
  name   = "${var.name}-net"
  cidr   = "10.40.0.0/16"
  region = "eu-west"
  labels = {
    managed_by = "gantry"
    template   = "appdb"
  }
}

resource "sandbox_subnet" "this" {
  network_id = sandbox_network.this.id
  name       = "${var.name}-db"
  cidr       = cidrsubnet("10.40.0.0/16", 8, 1)
}

resource "sandbox_database" "this" {
  name                  = var.name
  engine                = "postgres"
  engine_version        = var.engine_version
  size                  = "small"
  storage_gb            = 20
  backup_retention_days = 7
  encrypted             = true
  network_id            = sandbox_network.this.id
  subnet_id             = sandbox_subnet.this.id
  labels = {
    managed_by = "gantry"
    template   = "appdb"
    note       = var.note
  }
}

resource "sandbox_bucket" "exports" {
  name           = "${var.name}-exports"
  region         = "eu-west"
  versioning     = true
  retention_days = 30
  public         = false
  labels = {
    managed_by = "gantry"
    template   = "appdb"
    database   = sandbox_database.this.id
  }
}

resource "sandbox_bucket" "reports" {
  count          = var.reports
  name           = "${var.name}-reports-${count.index}"
  region         = "eu-west"
  versioning     = true
  retention_days = 30
  public         = false
  labels = {
    managed_by = "gantry"
    template   = "appdb"
    database   = sandbox_database.this.id
  }
}
`

const appdbVariables = `variable "name" {
  type = string
}

variable "engine_version" {
  type = string
}

variable "reports" {
  type = number
}

variable "note" {
  type = string
}
`

const appdbOutputs = `output "database_id" {
  value = sandbox_database.this.id
}

output "endpoint" {
  value = sandbox_database.this.endpoint
}
`

// appdbCatalog is the shipped catalog plus the appdb template, which borrows the
// bucket template's provider lock file and versions.tf (same sandbox provider).
func appdbCatalog(t *testing.T) fstest.MapFS {
	t.Helper()
	m := webtest.CatalogWith(t, map[string]string{
		"templates/appdb/template.yaml":       appdbManifest,
		"templates/appdb/module/main.tf":      appdbMain,
		"templates/appdb/module/variables.tf": appdbVariables,
		"templates/appdb/module/outputs.tf":   appdbOutputs,
	})
	for _, f := range []string{".terraform.lock.hcl", "module/versions.tf"} {
		src, ok := m["templates/bucket/"+f]
		require.True(t, ok, "the shipped bucket template has no %s", f)
		m["templates/appdb/"+f] = src
	}
	return m
}

// TestReviewShowsReplaceBeforeCreatesInBrowser is the acceptance test of the plan
// review page (DESIGN §7): a plan that replaces a database shows the replace first,
// with the irreversible badge and its dependents, above the creates. The owner
// reviews it in a real browser and approves it with the typed confirmation a risk-3
// decision needs.
func TestReviewShowsReplaceBeforeCreatesInBrowser(t *testing.T) {
	chrome := chromePath(t) // fail fast, before the database and servers start
	app := webtest.StartWith(t, webtest.Options{CatalogFS: appdbCatalog(t)})
	operator := app.LoggedIn(t, operatorEmail)
	dev := app.OrgEnvironmentID(t, "acme", "development")
	appdb := func(engine, reports, note string) url.Values {
		return url.Values{"template": {"appdb"}, "environment": {dev}, "workspace": {"billing-db"}, "kind": {"apply"},
			"inputs.name": {"billing"}, "inputs.engine_version": {engine}, "inputs.reports": {reports}, "inputs.note": {note}}
	}

	// 1. Over HTTP: the operator creates the database (self-service in development),
	// then asks for another engine version and one report bucket.
	first := requestRunHTTP(t, app, operator, appdb("16", "0", "first"))
	r1 := waitForRunRow(t, app, first, runmodel.Succeeded)
	require.Equal(t, "self-service", r1.ApprovalKind)
	require.Equal(t, 4, r1.PlanSummary.Create, "network, subnet, database and exports bucket")

	second := requestRunHTTP(t, app, operator, appdb("17", "1", markupNote))
	r := waitForRunRow(t, app, second, runmodel.PendingApproval)
	require.NotNil(t, r.RiskClass)
	require.Equal(t, 3, *r.RiskClass, "replacing a database loses its data: risk 3")
	require.Equal(t, "irreversible_loss", r.RiskRule)
	require.Equal(t, "owner", r.RequiredApprover)
	require.True(t, r.Elevated, "a risk-3 decision is elevated")
	require.Equal(t, "pass", r.PolicyOutcome, "every built-in policy passes in development")
	require.Equal(t, 1, r.PlanSummary.Create, "only the reports bucket is created")
	require.Equal(t, 1, r.PlanSummary.Replace, "only the database is replaced")

	// A section's pager link answers htmx with the section alone and anything else
	// (no JavaScript, a new tab) with the whole page.
	sectionURL := "/runs/" + second + "/review/create?page=1"
	frag := getPage(t, app, operator, sectionURL, map[string]string{"HX-Request": "true"})
	require.NotContains(t, frag, "<html", "htmx gets the section alone")
	require.Equal(t, 1, strings.Count(frag, "<section"), frag)
	require.Contains(t, frag, `data-testid="section-create"`)
	require.Contains(t, frag, `data-address="module.appdb.sandbox_bucket.reports[0]"`)
	full := getPage(t, app, operator, sectionURL, nil)
	require.Contains(t, full, "<html", "a plain request gets the whole page")
	require.Contains(t, full, `data-testid="section-replace"`)
	require.Contains(t, full, `data-testid="section-create"`)

	// 2. The owner reviews the plan in a browser, from the run page.
	b := startBrowser(t, chrome)
	signInAs(t, b, app, ownerEmail, ownerPassword, ownerFirst)
	runURL := app.URL + "/runs/" + second
	b.do(t, "open the run page", chromedp.Navigate(runURL))
	waitForRunState(t, b, "PENDING_APPROVAL")
	require.Equal(t, "Review the plan", text(t, b, chromedp.ID("review-link")))
	b.do(t, "follow the review link",
		chromedp.Click(chromedp.ID("review-link"), chromedp.NodeVisible),
		chromedp.WaitVisible(chromedp.CSS(`[data-testid="section-replace"]`)),
	)
	require.Equal(t, runURL+"/review", location(t, b))
	requireHTMXLoaded(t, b)

	// The replace section comes before the creates; all in DESIGN §7's order.
	replaceBeforeCreate := run(t, b, "compare the replace and create sections' positions", chromedp.Evaluate[bool](`(() => {
		const rep = document.querySelector('[data-testid="section-replace"]');
		const cre = document.querySelector('[data-testid="section-create"]');
		return !!(rep.compareDocumentPosition(cre) & Node.DOCUMENT_POSITION_FOLLOWING);
	})()`))
	require.True(t, replaceBeforeCreate, "the replace section must come before the create section")
	order := run(t, b, "read the order of the sections", chromedp.Evaluate[[]string](
		`[...document.querySelectorAll('section[data-testid^="section-"]')].map(s => s.dataset.testid)`))
	require.Equal(t, []string{"section-destroy", "section-replace", "section-update", "section-create"}, order)

	sections := run(t, b, "read the sections' entries", chromedp.Evaluate[map[string][]reviewEntry](`(() => {
		const out = {};
		for (const s of document.querySelectorAll('section[data-testid^="section-"]')) {
			out[s.dataset.testid.slice("section-".length)] = [...s.querySelectorAll('li[data-testid="change"]')].map(li => ({
				address: li.dataset.address,
				irreversible: (li.querySelector('[data-testid="irreversible"]') || {textContent: ""}).textContent.trim(),
				dependents: [...li.querySelectorAll('[data-testid="dependents"] li code')].map(c => c.textContent.trim()),
				reason: (li.querySelector('[data-testid="reason"]') || {textContent: ""}).textContent.trim(),
			}));
		}
		return out;
	})()`))
	t.Logf("review sections: %+v", sections)
	require.Empty(t, sections["destroy"], "nothing is destroyed outright")
	require.Len(t, sections["replace"], 1, "only the database is replaced")
	db := sections["replace"][0]
	require.True(t, strings.HasSuffix(db.Address, "sandbox_database.this"), "the replaced resource: %s", db.Address)
	prefix := strings.TrimSuffix(db.Address, "sandbox_database.this") // the module call, e.g. "module.appdb."
	require.Equal(t, "irreversible: data is lost", db.Irreversible, "the database's irreversible badge")
	require.Contains(t, db.Reason, "cannot change in place")
	require.Contains(t, db.Dependents, prefix+"sandbox_bucket.exports", "the exports bucket names the database")
	require.Contains(t, db.Dependents, prefix+"sandbox_bucket.reports[0]", "the new reports bucket names the database")
	require.Equal(t, []string{prefix + "sandbox_bucket.exports"}, addresses(sections["update"]),
		"the exports bucket's labels change in place")
	require.Equal(t, []string{prefix + "sandbox_bucket.reports[0]"}, addresses(sections["create"]))
	require.Empty(t, sections["create"][0].Irreversible, "a create loses nothing")
	forces := run(t, b, "read the rows that force replacement", chromedp.Evaluate[[]string](
		`[...document.querySelectorAll('[data-testid="section-replace"] table.diff tr.forces th code')].map(c => c.textContent.trim())`))
	require.Equal(t, []string{"engine_version"}, forces, "the attribute that forces the replace")

	// Risk, counts and the picture.
	require.Equal(t, "Risk class 3", text(t, b, chromedp.CSS(`#risk-title`)))
	require.Equal(t, r.RiskRule, text(t, b, chromedp.CSS(`[data-testid="risk-rule"]`)))
	require.Equal(t, r.RiskReason, text(t, b, chromedp.CSS(`[data-testid="risk-reason"]`)))
	require.Contains(t, text(t, b, chromedp.CSS(`[data-testid="risk-approver"]`)), "owner")
	counts := run(t, b, "read the counts", chromedp.Evaluate[map[string]string](`Object.fromEntries(
		[...document.querySelectorAll('[data-testid="counts"] > div')].map(d =>
			[d.querySelector("dt").textContent.trim(), d.querySelector("dd").textContent.trim()]))`))
	require.Equal(t, map[string]string{"destroy": "0", "replace": "1", "update in place": "1", "create": "1", "read": "0", "unchanged": "2"},
		counts)
	graph := run(t, b, "read the blast-radius picture", chromedp.Evaluate[map[string][]string](`(() => {
		const svg = document.querySelector('[data-testid="graph"] svg');
		if (!svg) return null;
		const titles = sel => [...svg.querySelectorAll(sel)].map(g => g.querySelector("title").textContent);
		return {
			replace: titles("g.node.replace"),
			irreversible: titles("g.node.irreversible"),
			dependent: titles("g.node.dependent"),
			edges: [...svg.querySelectorAll("path.edge")].map(p => p.dataset.from + " -> " + p.dataset.to),
		};
	})()`))
	require.NotNil(t, graph, "no SVG in the graph")
	require.Equal(t, []string{db.Address}, graph["replace"])
	require.Equal(t, []string{db.Address}, graph["irreversible"])
	require.ElementsMatch(t, db.Dependents, graph["dependent"])
	require.Len(t, graph["edges"], len(db.Dependents))
	// The stylesheet, not the SVG's neutral attributes, colours the picture.
	fills := run(t, b, "read the computed fills of the nodes", chromedp.Evaluate[map[string]string](`(() => {
		const fill = sel => getComputedStyle(document.querySelector('[data-testid="graph"] ' + sel)).fill;
		return {replace: fill("g.node.replace rect"), dependent: fill("g.node.dependent rect")};
	})()`))
	require.NotEqual(t, "rgb(255, 255, 255)", fills["replace"], "the replace node should be highlighted by the stylesheet")
	require.NotEqual(t, fills["replace"], fills["dependent"], "replace and dependent nodes should look different")

	// The policy results and the cost.
	require.Equal(t, "pass", attribute(t, b, chromedp.CSS(`[data-testid="policy-outcome"]`), "data-state"))
	require.Equal(t, "Passed", text(t, b, chromedp.CSS(`[data-testid="policy-outcome"]`)), "the outcome in words")
	failed := run(t, b, "look for failed policy rows", chromedp.Evaluate[[]string](
		`[...document.querySelectorAll('[data-testid="policy-row"][data-passed="false"]')].map(r => r.dataset.rule)`))
	require.Empty(t, failed)
	require.Equal(t, "+$2.30", text(t, b, chromedp.CSS(`[data-testid="cost-delta"]`)), "one more bucket")

	// The raw plan, on demand.
	require.Empty(t, run(t, b, "read the empty raw plan", chromedp.Evaluate[string](`document.getElementById("raw-plan").textContent`)))
	b.do(t, "show the plan as text", chromedp.Click(chromedp.ID("show-raw"), chromedp.NodeVisible))
	raw := waitForText(t, b, "the raw plan", "#raw-plan", `s => s.includes("must be replaced")`, stepBase)
	require.Contains(t, raw, "SIMULATED")
	require.Contains(t, raw, db.Address)
	require.Contains(t, raw, markupNote, "the plan text, as tofu printed it")
	injected := run(t, b, "look for markup from the plan in the page", chromedp.Evaluate[int](
		`document.querySelectorAll("#raw-plan *, #injected").length`))
	require.Zero(t, injected, "text from the plan must never become markup (the raw plan is text, not HTML)")

	// For a human: the page at a desktop and a phone width. At 390 px nothing but the
	// picture's own scroll box may be wider than the screen.
	screenshotAt(t, b, reviewWideScreenshot, 1280, 800, false)
	screenshotAt(t, b, reviewPhoneScreenshot, 390, 844, true)
	overflow := run(t, b, "measure the page's overflow at 390 px", chromedp.Evaluate[int64](
		`document.documentElement.scrollWidth - document.documentElement.clientWidth`))
	require.Zero(t, overflow, "the review page scrolls sideways at 390 px")
	b.do(t, "reset the viewport", chromedp.ResetViewport())
	requireNoCSPViolations(t, b)

	// 3. The owner approves: a risk-3 decision needs DESTROY typed and a reason.
	b.do(t, "arm the elevated approval", chromedp.Click(chromedp.ID("arm-approve"), chromedp.NodeVisible))
	waitForFocus(t, b, "approve-confirmation-body") // the confirmation takes the focus: type after it moved
	b.do(t, "fill in the elevated approval",
		chromedp.SendKeys(chromedp.ID("approve-confirm"), "DESTROY"),
		chromedp.SendKeys(chromedp.ID("approve-reason"), "engine 17 upgrade, exports re-run afterwards"),
		chromedp.Click(chromedp.ID("approve"), chromedp.NodeVisible),
	)
	b.do(t, "wait for the approval's flash", chromedp.WaitVisible(chromedp.CSS(`.flashes .flash-success`)))
	require.Contains(t, text(t, b, chromedp.CSS(`.flashes .flash-success`)), "You approved ")
	require.Equal(t, runURL, location(t, b), "after approving, the browser is on the run page")
	waitForRunState(t, b, "SUCCEEDED")

	done := waitForRunRow(t, app, second, runmodel.Succeeded)
	require.Equal(t, ownerName, done.ApprovedByName)
	require.Equal(t, done.PlanDigest, done.ApprovedPlanDigest)
	var approvals []struct{ ActorName, Data string }
	require.NoError(t, app.DB.Raw(`SELECT actor_name, data::text AS data FROM audit_events WHERE target_id = ? AND action = 'run.approved'`,
		second).Scan(&approvals).Error)
	require.Len(t, approvals, 1, "one audited approval")
	require.Equal(t, ownerName, approvals[0].ActorName)
	require.Contains(t, approvals[0].Data, "engine 17 upgrade", "the approval's reason is audited")
	requireNoCSPViolations(t, b)
	requireStaticAssetsOK(t, b, app.URL)
}

type reviewEntry struct {
	Address      string   `json:"address"`
	Irreversible string   `json:"irreversible"`
	Dependents   []string `json:"dependents"`
	Reason       string   `json:"reason"`
}

func addresses(entries []reviewEntry) []string {
	out := make([]string, 0, len(entries))
	for _, e := range entries {
		out = append(out, e.Address)
	}
	return out
}

// getPage GETs path with c and the extra headers, and returns the 200 answer's body.
func getPage(t *testing.T, app *webtest.App, c *http.Client, path string, header map[string]string) string {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, app.URL+path, nil)
	require.NoError(t, err)
	for k, v := range header {
		req.Header.Set(k, v)
	}
	resp, err := c.Do(req)
	require.NoError(t, err)
	body := webtest.ReadBody(t, resp)
	require.Equal(t, http.StatusOK, resp.StatusCode, body)
	return body
}

// requestRunHTTP submits the request form with c and returns the new run's id.
func requestRunHTTP(t *testing.T, app *webtest.App, c *http.Client, form url.Values) string {
	t.Helper()
	form.Set("_csrf", app.CSRF(t, c))
	resp := app.PostForm(t, c, "/requests", form)
	body := webtest.ReadBody(t, resp)
	require.Equal(t, http.StatusSeeOther, resp.StatusCode, body)
	u, err := url.Parse(resp.Header.Get("Location"))
	require.NoError(t, err)
	m := runURLPath.FindStringSubmatch(u.Path)
	require.NotNil(t, m, "the request should redirect to a run page, not %q", resp.Header.Get("Location"))
	return m[1]
}

// waitForRunRow waits until the run is in state want, within liveBase of idle-machine
// time, re-reading the row at each of the run's change notifications (the product
// notifies at the commit of every state change); it gives up early when the run ends in
// another state, or is blocked by policy, and says why.
func waitForRunRow(t testing.TB, app *webtest.App, id string, want runmodel.State) runmodel.Run {
	t.Helper()
	var r runmodel.Run
	require.NoError(t, app.DB.Where("id = ?", id).Take(&r).Error)
	wake, stop := app.Server.Changes.Subscribe(r.OrganizationID, id)
	defer stop()
	bench.Eventually(t, fmt.Sprintf("run %s to be %s", id, want), liveBase, func() (bool, any) {
		require.NoError(t, app.DB.Where("id = ?", id).Take(&r).Error)
		if r.State != want && (r.State.Terminal() || r.State == runmodel.PolicyBlocked) {
			t.Fatalf("run %s is %s, waiting for %s: %s%s", id, r.State, want, r.StateReason, app.RunLogs(t, r))
		}
		return r.State == want, fmt.Sprintf("%s (%s)", r.State, r.StateReason)
	}, bench.Wake(wake))
	return r
}
