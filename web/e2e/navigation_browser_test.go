//go:build !fast

// Live: needs a browser (chromium, driven by chromedp).

package e2e_test

import (
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"
	"github.com/stretchr/testify/require"

	"gantry/cmd/gantry/webtest"
	runmodel "gantry/models/run"
)

const (
	viewerEmail    = "viewer@acme.test"
	viewerPassword = "viewer-acme"

	// Artifacts for a human; not assertions.
	navShots = "/tmp/shots37/nav"
	// phoneBarMax is the most a phone's top bar may take of its 844 px, menu closed.
	phoneBarMax = 70
	// wideBarMax is one row of the bar at 1366 px (two rows would be about 90 px).
	wideBarMax = 64
)

// barLayout is where the top bar's items sit on the screen.
type barLayout struct {
	Bar   float64   `json:"bar"`
	Items []barItem `json:"items"`
}

// barItem is one top-level item of the bar: a daily link, a group's summary or the
// account's.
type barItem struct {
	Label   string  `json:"label"`
	Top     float64 `json:"top"`
	Bottom  float64 `json:"bottom"`
	Width   float64 `json:"width"`
	Visible bool    `json:"visible"`
}

// measureBar reads the bar's height and its top-level items' boxes.
func measureBar(t *testing.T, b *browser) barLayout {
	t.Helper()
	return run(t, b, "measure the top bar", chromedp.Evaluate[barLayout](`(() => {
		const box = el => el.getBoundingClientRect();
		const items = [...document.querySelectorAll("nav.mainnav .navbar > li"), document.getElementById("nav-account")]
			.map(el => ({label: (el.querySelector("a, summary").firstChild.textContent || "").trim(), top: box(el).top,
				bottom: box(el).bottom, width: box(el).width, visible: el.checkVisibility()}));
		return {bar: box(document.querySelector("header.topbar")).height, items};
	})()`))
}

// TestNavigationFitsInBrowser: for every role the navigation is one row at 1366 px,
// with the items that role may use (settings and audit as menus a keyboard opens and
// Escape closes, the current section marked); the approvals badge keeps its width; on
// a 390 px phone one Menu replaces the bar, keeps it short, opens onto the items and
// a click in it navigates; an unknown address reads as a page in words. axe-core finds
// nothing serious with the menus open, on the phone and on the 404 page.
func TestNavigationFitsInBrowser(t *testing.T) {
	chrome := chromePath(t)
	app := webtest.Start(t)
	require.NoError(t, os.MkdirAll(navShots, 0o755))
	// One run waits for a decision: the admin's and owner's badge shows 1, the
	// requester's none, and the Approvals item is as wide either way.
	operator := app.LoggedIn(t, operatorEmail)
	staging := app.OrgEnvironmentID(t, "acme", "staging")
	form := url.Values{"_csrf": {app.CSRF(t, operator)}, "template": {"postgres"}, "environment": {staging}, "workspace": {"navigation"},
		"kind": {"apply"}, "inputs.name": {"navigation"}, "inputs.engine_version": {"16"}, "inputs.size": {"small"},
		"inputs.storage_gb": {"20"}, "inputs.backup_retention_days": {"7"}, "inputs.network_cidr": {"10.30.0.0/16"}}
	resp := app.PostForm(t, operator, "/requests", form)
	webtest.ReadBody(t, resp)
	require.Equal(t, http.StatusSeeOther, resp.StatusCode)
	waitForRunRow(t, app, strings.TrimPrefix(resp.Header.Get("Location"), "/runs/"), runmodel.PendingApproval)

	daily := []string{"Dashboard", "Catalog", "Workspaces", "Runs"}
	approvalsWidth := map[string]float64{}
	for _, who := range []struct {
		email, password, name, role string
		top                         []string
		badge                       string
	}{
		{adminEmail, adminPassword, "Adam", "admin", slices.Concat(daily, []string{"Approvals", "Drift", "Break-glass", "Settings", "Audit"}), "1"},
		{ownerEmail, ownerPassword, "Alice", "owner", slices.Concat(daily, []string{"Approvals", "Drift", "Break-glass", "Settings", "Audit"}), "1"},
		{operatorEmail, operatorPassword, "Olivia", "operator", slices.Concat(daily, []string{"Approvals", "Drift", "Break-glass"}), ""},
		{viewerEmail, viewerPassword, "Victor", "viewer", slices.Concat(daily, []string{"Drift", "Break-glass"}), ""},
		{auditorEmail, auditorPassword, "Audrey", "auditor", slices.Concat(daily, []string{"Drift", "Break-glass", "Audit"}), ""},
	} {
		t.Run(who.role, func(t *testing.T) {
			b := startBrowser(t, chrome)
			signInAs(t, b, app, who.email, who.password, who.name)
			b.do(t, "emulate a 1366×768 screen", chromedp.EmulateViewport(1366, 768))
			require.True(t, run(t, b, "is the Menu open", chromedp.Evaluate[bool](`document.getElementById("menu").open`)),
				"on a wide screen the Menu is open for real, so assistive technology reads the bar as shown")
			bar := measureBar(t, b)
			t.Logf("%s at 1366 px: bar %.0f px high, items %+v", who.role, bar.Bar, bar.Items)
			var labels []string
			for _, it := range bar.Items[:len(bar.Items)-1] {
				labels = append(labels, it.Label)
			}
			require.Equal(t, who.top, labels, "the items %s may use", who.role)
			first := bar.Items[0]
			for _, it := range bar.Items {
				require.True(t, it.Visible, "%s is shown", it.Label)
				require.InDelta(t, first.Top, it.Top, 3, "%s is on the bar's one row (top %.0f, first item's %.0f)", it.Label, it.Top, first.Top)
				require.Less(t, it.Top, first.Bottom, "%s overlaps the first item's row", it.Label)
			}
			require.Less(t, bar.Bar, float64(wideBarMax), "the bar is one row high")
			require.Equal(t, who.badge, liveText(t, b, "inbox-count"))
			for _, it := range bar.Items {
				if it.Label == "Approvals" {
					approvalsWidth[who.role] = it.Width
				}
			}
			switch who.role {
			case "admin":
				adminAtWide(t, b, app)
				adminOnPhone(t, b, app)
				notFound(t, b, app)
			case "viewer":
				screenshotAt(t, b, filepath.Join(navShots, "viewer-1366.png"), 1366, 768, false)
			case "auditor":
				auditorFindsGovernance(t, b, app)
			}
		})
	}
	t.Logf("Approvals item widths: %v", approvalsWidth)
	require.Equal(t, approvalsWidth["admin"], approvalsWidth["operator"], "the badge keeps the item's width, shown or not")
	require.Equal(t, approvalsWidth["admin"], approvalsWidth["owner"])
}

// adminAtWide: the settings menu opens from the keyboard and closes on Escape, its
// links lead on and mark themselves and their group current.
func adminAtWide(t *testing.T, b *browser, app *webtest.App) {
	t.Helper()
	screenshotAt(t, b, filepath.Join(navShots, "admin-1366.png"), 1366, 768, false)
	settings := `#nav-settings`
	envLink := chromedp.CSS(`#nav-settings a[href="/environments"]`)
	require.False(t, visible(t, b, `#nav-settings a[href="/environments"]`), "the settings menu starts closed")
	b.do(t, "open the settings menu with the keyboard", chromedp.Focus(chromedp.CSS(settings+" > summary")), chromedp.KeyEvent("\r"))
	require.True(t, visible(t, b, `#nav-settings a[href="/environments"]`), "Enter opens the settings menu")
	require.Equal(t, []string{"Environments", "Executors", "Approval matrix", "Policies", "Members", "Webhooks"},
		run(t, b, "read the settings menu", chromedp.Evaluate[[]string](
			`[...document.querySelectorAll("#nav-settings .navmenu-panel a")].map(a => a.innerText.trim())`)))
	screenshotAt(t, b, filepath.Join(navShots, "admin-1366-settings-open.png"), 1366, 768, false)
	requireAccessible(t, b, "the dashboard with the settings menu open")
	b.do(t, "open the audit menu: the settings menu closes", chromedp.Click(chromedp.CSS(`#nav-audit > summary`), chromedp.NodeVisible))
	require.False(t, visible(t, b, `#nav-settings a[href="/environments"]`), "one menu open at a time")
	require.True(t, visible(t, b, `#nav-audit a[href="/governance"]`), "Governance is in the audit menu")
	b.do(t, "Escape closes the audit menu", chromedp.KeyEvent("\x1b"))
	require.False(t, visible(t, b, `#nav-audit a[href="/governance"]`), "Escape closes the menu")
	require.Equal(t, "Audit", run(t, b, "read the focused element", chromedp.Evaluate[string](`document.activeElement.innerText.trim()`)),
		"the focus is back on the menu's summary")

	b.do(t, "open the account menu", chromedp.Click(chromedp.CSS(`#nav-account > summary`), chromedp.NodeVisible))
	for _, sel := range []string{`a.account-link[href="/settings/notifications"]`, `a.account-link[href="/settings/tokens"]`, `#sign-out`} {
		require.True(t, visible(t, b, sel), "the account menu shows %s", sel)
	}
	screenshotAt(t, b, filepath.Join(navShots, "admin-1366-account-open.png"), 1366, 768, false)
	b.do(t, "a click elsewhere closes it", chromedp.Click(chromedp.CSS(`main h1`), chromedp.NodeVisible))
	require.False(t, visible(t, b, `#sign-out`), "a click outside the menu closes it")

	markPage(t, b)
	b.do(t, "open the settings menu and follow Environments",
		chromedp.Click(chromedp.CSS(settings+" > summary"), chromedp.NodeVisible),
		chromedp.Click(envLink, chromedp.NodeVisible))
	waitForNewPage(t, b, "/environments")
	require.Equal(t, "page", attribute(t, b, envLink, "aria-current"))
	require.Equal(t, "true", attribute(t, b, chromedp.CSS(settings+" > summary"), "aria-current"), "the group is marked current")
	require.Zero(t, count(t, b, `#nav-audit > summary[aria-current]`), "the other group is not")
	bar := measureBar(t, b)
	require.Less(t, bar.Bar, float64(wideBarMax), "still one row on a settings page")
}

// adminOnPhone: at 390×844 a Menu replaces the bar, which stays short; opening it
// shows the items, and a click on one navigates.
func adminOnPhone(t *testing.T, b *browser, app *webtest.App) {
	t.Helper()
	b.do(t, "back to the dashboard", chromedp.Navigate(app.URL+"/"), chromedp.WaitReady(chromedp.CSS("main")))
	screenshotAt(t, b, filepath.Join(navShots, "admin-390-closed.png"), 390, 844, true)
	bar := measureBar(t, b)
	t.Logf("admin at 390 px, menu closed: bar %.0f px high", bar.Bar)
	require.Less(t, bar.Bar, float64(phoneBarMax), "the closed menu keeps the bar short")
	require.True(t, visible(t, b, `[data-testid="menu-toggle"]`), "the Menu shows")
	for _, it := range bar.Items {
		require.False(t, it.Visible, "%s is inside the closed Menu", it.Label)
	}
	b.do(t, "open the Menu", chromedp.Click(chromedp.CSS(`[data-testid="menu-toggle"]`), chromedp.NodeVisible))
	for _, it := range measureBar(t, b).Items {
		require.True(t, it.Visible, "%s shows in the open Menu", it.Label)
	}
	require.Less(t, measureBar(t, b).Bar, float64(phoneBarMax), "the open Menu lies over the page, the bar stays short")
	screenshotAt(t, b, filepath.Join(navShots, "admin-390-open.png"), 390, 844, true)
	requireAccessible(t, b, "the dashboard on a phone with the Menu open")
	markPage(t, b)
	b.do(t, "follow Runs from the Menu", chromedp.Click(chromedp.CSS(`nav.mainnav a[href="/runs"]`), chromedp.NodeVisible))
	waitForNewPage(t, b, "/runs")
	require.Equal(t, "page", attribute(t, b, chromedp.CSS(`nav.mainnav a[href="/runs"]`), "aria-current"))
	require.False(t, visible(t, b, `nav.mainnav a[href="/runs"]`), "the next page starts with the Menu closed")
	b.do(t, "back to the desktop viewport", chromedp.EmulateViewport(1366, 768))
}

// notFound: an unknown address is a page in words, with the navigation and a way home.
func notFound(t *testing.T, b *browser, app *webtest.App) {
	t.Helper()
	b.do(t, "open an address no page lives at", chromedp.Navigate(app.URL+"/no-such-page"),
		chromedp.WaitVisible(chromedp.CSS(`[data-testid="not-found"]`)))
	require.Equal(t, http.StatusNotFound, b.events.lastDocumentStatus(app.URL+"/no-such-page"))
	require.Equal(t, "We could not find that page", text(t, b, chromedp.CSS(`h1`)))
	page := liveText(t, b, "not-found")
	require.Contains(t, page, "There is no page at this address.")
	require.Contains(t, page, "Check the address for a typing mistake.")
	screenshotAt(t, b, filepath.Join(navShots, "404-1366.png"), 1366, 768, false)
	requireAccessible(t, b, "the 404 page")
	markPage(t, b)
	b.do(t, "go home from it", chromedp.Click(chromedp.CSS(`[data-testid="error-action"]`), chromedp.NodeVisible))
	waitForNewPage(t, b, app.URL+"/")
	require.Equal(t, app.URL+"/", location(t, b))
}

// auditorFindsGovernance: the auditor reaches the governance report from the audit menu.
func auditorFindsGovernance(t *testing.T, b *browser, app *webtest.App) {
	t.Helper()
	markPage(t, b)
	b.do(t, "open the audit menu and follow Governance",
		chromedp.Click(chromedp.CSS(`#nav-audit > summary`), chromedp.NodeVisible),
		chromedp.Click(chromedp.CSS(`#nav-audit a[href="/governance"]`), chromedp.NodeVisible))
	waitForNewPage(t, b, "/governance")
	require.Equal(t, http.StatusOK, b.events.lastDocumentStatus(app.URL+"/governance"))
	require.Equal(t, "true", attribute(t, b, chromedp.CSS(`#nav-audit > summary`), "aria-current"))
}

// markPage marks the page shown, so waitForNewPage knows it from the next one.
func markPage(t *testing.T, b *browser) {
	t.Helper()
	b.do(t, "mark the page before leaving it", chromedp.Evaluate[chromedp.Void](`window.gantryBefore = true`))
}

// visible reports whether the element selector finds is rendered.
func visible(t *testing.T, b *browser, selector string) bool {
	t.Helper()
	return run(t, b, "is "+selector+" visible", chromedp.Evaluate[bool](
		`(() => { const n = document.querySelector(`+jsString(selector)+`); return !!n && n.checkVisibility(); })()`))
}
