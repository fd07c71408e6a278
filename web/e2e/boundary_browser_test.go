//go:build !fast

// Live: needs a browser (chromium, driven by chromedp).

package e2e_test

import (
	"encoding/json"
	"net/url"
	"os"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"
	"github.com/stretchr/testify/require"

	"gantry/cmd/gantry/webtest"
	runmodel "gantry/models/run"
	"gantry/views/paths"
)

// appdbNotes are appdbManifest's rollback notes, as the review page shows them.
const appdbNotes = "The database and the buckets hold data: replacing or destroying them loses it. Restore a\nbackup into a new database instead (forward fix)."

// shownBoundary is what the review page shows of one change's rollback boundary.
type shownBoundary struct {
	Address   string `json:"address"`
	Section   string `json:"section"`
	Kind      string `json:"kind"`
	Label     string `json:"label"`
	Words     string `json:"words"`
	Notes     string `json:"notes"`
	NotesOpen bool   `json:"notesOpen"`
	Visible   bool   `json:"visible"`
}

// boundaries reads, for every change entry of the review page, the rollback boundary
// drawn inside it (Kind "" for none), keyed by address.
func boundaries(t *testing.T, b *browser) map[string]shownBoundary {
	t.Helper()
	list := run(t, b, "read the rollback boundaries", chromedp.Evaluate[[]shownBoundary](`
		[...document.querySelectorAll('li[data-testid="change"]')].map(li => {
			const bd = li.querySelector('[data-testid="boundary"]');
			const txt = sel => ((bd && bd.querySelector(sel)) || {textContent: ""}).textContent.trim();
			const notes = bd && bd.querySelector("details.boundary-notes");
			return {
				address: li.dataset.address,
				section: li.closest("section").dataset.testid,
				kind: bd ? bd.dataset.boundary : "",
				label: txt('[data-testid="boundary-label"]'),
				words: txt('[data-testid="boundary-words"]'),
				notes: txt('[data-testid="boundary-notes"]'),
				notesOpen: !!(notes && notes.open),
				visible: !!bd && bd.checkVisibility() && bd.getBoundingClientRect().height > 0,
			};
		})`))
	out := map[string]shownBoundary{}
	for _, s := range list {
		out[s.Address] = s
	}
	return out
}

// elementShot saves a screenshot of the element sel (scrolled into view), for a human to
// look at; not an assertion.
func elementShot(t *testing.T, b *browser, sel, path string) {
	t.Helper()
	png := run(t, b, "screenshot "+sel, chromedp.Screenshot(chromedp.CSS(sel)))
	require.NoError(t, os.WriteFile(path, png, 0o644))
	t.Logf("screenshot of %s: %s", sel, path)
}

// TestRollbackBoundaryAndDestroyConfirmationInBrowser (issue 35, items 4 and 6): the
// review of a plan that replaces a database, which is no rollback, shows beside that
// change its rollback boundary in words (forward fix only, with the state version a
// rollback would go back to) and the template's rollback notes, open; the change updated
// in place shows none. The elevated approval is armed first: arming moves the focus to
// the confirmation, which restates the plan's create, change, replace and destroy
// counts; closing it gives the focus back to its trigger and sends nothing. The approval
// records that the boundary was shown. The destroy of the workspace then shows a
// boundary beside every destroyed resource, and its confirmation restates 4 destroys
// and takes the focus.
func TestRollbackBoundaryAndDestroyConfirmationInBrowser(t *testing.T) {
	chrome := chromePath(t) // fail fast, before the database and servers start
	app := webtest.StartWith(t, webtest.Options{CatalogFS: appdbCatalog(t)})
	operator := app.LoggedIn(t, operatorEmail)
	dev := app.OrgEnvironmentID(t, "acme", "development")
	appdb := func(kind, engine string) url.Values {
		return url.Values{"template": {"appdb"}, "environment": {dev}, "workspace": {"ledger-db"}, "kind": {kind},
			"inputs.name": {"ledger"}, "inputs.engine_version": {engine}, "inputs.reports": {"0"}, "inputs.note": {"boundary"}}
	}
	waitForRunRow(t, app, requestRunHTTP(t, app, operator, appdb("apply", "16")), runmodel.Succeeded)
	upgrade := waitForRunRow(t, app, requestRunHTTP(t, app, operator, appdb("apply", "17")), runmodel.PendingApproval)
	require.Nil(t, upgrade.RollbackVersionID, "an ordinary apply, not a rollback")
	require.Equal(t, 1, upgrade.PlanSummary.Replace)

	// 1. The boundary beside the replaced database.
	b := startBrowser(t, chrome)
	signInAs(t, b, app, ownerEmail, ownerPassword, ownerFirst)
	b.do(t, "open the upgrade's review",
		chromedp.Navigate(app.URL+paths.RunReview(upgrade.ID)),
		chromedp.WaitVisible(chromedp.CSS(`[data-testid="section-replace"] [data-testid="boundary"]`)),
	)
	require.Zero(t, count(t, b, `[data-testid="rollback"]`), "no rollback section: this run is no rollback")
	shown := boundaries(t, b)
	var db shownBoundary
	for addr, s := range shown {
		if strings.HasSuffix(addr, "sandbox_database.this") {
			db = s
		} else {
			require.Empty(t, s.Kind, "%s (%s) is neither replaced nor destroyed: no boundary", addr, s.Section)
		}
	}
	require.Equal(t, shownBoundary{Address: db.Address, Section: "section-replace", Kind: "forward_fix_only",
		Label: "rollback boundary: forward fix only",
		Words: "The data it holds is lost with this change. A rollback to state version 1 brings back its configuration, not its data: only a forward fix brings the data back (a restore from a backup, outside Gantry).",
		Notes: appdbNotes, NotesOpen: true, Visible: true}, db)
	elementShot(t, b, `li[data-address="`+db.Address+`"]`, "/tmp/gantry-boundary-replace.png")

	// 2. The confirmation: closed until armed; arming moves the focus to it.
	confirmVisible := func() bool {
		return run(t, b, "is the confirmation field visible", chromedp.Evaluate[bool](
			`document.getElementById("approve-confirm").checkVisibility()`))
	}
	require.False(t, confirmVisible(), "the confirmation waits to be armed")
	b.do(t, "arm the approval", chromedp.Click(chromedp.ID("arm-approve"), chromedp.NodeVisible))
	waitForFocus(t, b, "approve-confirmation-body")
	require.True(t, confirmVisible())
	require.Equal(t, "This plan creates 0, changes 1 in place, replaces 1 and destroys 0 resources.",
		strings.Join(strings.Fields(text(t, b, chromedp.CSS(`[data-testid="confirmation-counts"]`))), " "))
	elementShot(t, b, "#approve-confirmation", "/tmp/gantry-confirmation-upgrade.png")

	// Closing it from its trigger gives the focus back there and sends nothing.
	b.do(t, "close the confirmation", chromedp.Click(chromedp.ID("arm-approve"), chromedp.NodeVisible))
	waitForFocus(t, b, "arm-approve")
	require.False(t, confirmVisible())
	require.Equal(t, app.URL+paths.RunReview(upgrade.ID), location(t, b))

	b.do(t, "arm again", chromedp.Click(chromedp.ID("arm-approve"), chromedp.NodeVisible))
	waitForFocus(t, b, "approve-confirmation-body") // as a person, type once the focus moved
	b.do(t, "approve",
		chromedp.SendKeys(chromedp.ID("approve-confirm"), runmodel.ConfirmWord),
		chromedp.SendKeys(chromedp.ID("approve-reason"), "engine 17, the ledger is exported first"),
		chromedp.Click(chromedp.ID("approve"), chromedp.NodeVisible),
		chromedp.WaitVisible(chromedp.CSS(`.flashes .flash-success`)),
	)
	waitForRunRow(t, app, upgrade.ID, runmodel.Succeeded)
	var data []string
	require.NoError(t, app.DB.Raw(`SELECT data::text FROM audit_events WHERE target_id = ? AND action = 'run.approved'`, upgrade.ID).Scan(&data).Error)
	require.Len(t, data, 1)
	var approved struct {
		Shown    bool                `json:"rollback_boundary_shown"`
		Boundary []map[string]string `json:"rollback_boundary"`
	}
	require.NoError(t, json.Unmarshal([]byte(data[0]), &approved))
	require.True(t, approved.Shown, "the approval records that the boundary was shown: %s", data[0])
	require.Equal(t, []map[string]string{{"address": db.Address, "boundary": "forward_fix_only"}}, approved.Boundary)

	// 3. The destroy: a boundary beside every destroyed resource; the confirmation
	// restates the destroys and takes the focus.
	destroy := waitForRunRow(t, app, requestRunHTTP(t, app, operator, appdb("destroy", "17")), runmodel.PendingApproval)
	require.Equal(t, 4, destroy.PlanSummary.Delete, "network, subnet, database and exports bucket")
	b.do(t, "open the destroy's review",
		chromedp.Navigate(app.URL+paths.RunReview(destroy.ID)),
		chromedp.WaitVisible(chromedp.CSS(`[data-testid="section-destroy"] [data-testid="boundary"]`)),
	)
	kinds := map[string]string{}
	for addr, s := range boundaries(t, b) {
		require.True(t, s.Visible, "%s: its boundary is on the page", addr)
		require.Equal(t, appdbNotes, s.Notes, "%s: the template's notes beside it", addr)
		kinds[addr[strings.LastIndex(addr, "sandbox_"):]] = s.Label
	}
	require.Equal(t, map[string]string{
		"sandbox_database.this":  "rollback boundary: forward fix only",
		"sandbox_bucket.exports": "rollback boundary: forward fix only",
		"sandbox_subnet.this":    "rollback boundary: restore from state version 2",
		"sandbox_network.this":   "rollback boundary: restore from state version 2",
	}, kinds)
	require.False(t, confirmVisible())
	b.do(t, "arm the destroy's approval", chromedp.Click(chromedp.ID("arm-approve"), chromedp.NodeVisible))
	waitForFocus(t, b, "approve-confirmation-body")
	require.Equal(t, "This plan creates 0, changes 0 in place, replaces 0 and destroys 4 resources.",
		strings.Join(strings.Fields(text(t, b, chromedp.CSS(`[data-testid="confirmation-counts"]`))), " "))
	ring := run(t, b, "read the confirmation's outline", chromedp.Evaluate[string](`getComputedStyle(document.activeElement).outlineStyle`))
	require.NotEqual(t, "none", ring, "the focused confirmation shows a focus ring")
	elementShot(t, b, "#approve-confirmation", "/tmp/gantry-confirmation-destroy.png")
	elementShot(t, b, `[data-testid="section-destroy"]`, "/tmp/gantry-boundary-destroy.png")
	screenshotAt(t, b, "/tmp/gantry-boundary-destroy-390.png", 390, 844, true)
	overflow := run(t, b, "measure the page's overflow at 390 px", chromedp.Evaluate[int64](
		`document.documentElement.scrollWidth - document.documentElement.clientWidth`))
	require.Zero(t, overflow, "the review page scrolls sideways at 390 px")
	elementShot(t, b, `li[data-address$="sandbox_database.this"]`, "/tmp/gantry-boundary-390.png")
	elementShot(t, b, "#approve-confirmation", "/tmp/gantry-confirmation-390.png")
	b.do(t, "reset the viewport", chromedp.ResetViewport())

	requireNoCSPViolations(t, b)
	requireStaticAssetsOK(t, b, app.URL)
}
