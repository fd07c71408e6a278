//go:build !fast

// Live: needs a browser (chromium, driven by chromedp).

package e2e_test

import (
	"net/url"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"
	"github.com/stretchr/testify/require"

	"gantry/cmd/gantry/webtest"
)

const workspacesScreenshot = "/tmp/gantry-workspaces-1280.png"

// TestWorkspaceListInBrowser: with 1,200 workspaces, a person types part of a name and
// the list narrows as they type (the count read out, the address kept for the back
// button, no page load); clicking a heading sorts by it and says so; Next and Previous
// walk the pages; a filter combines with the search. Without htmx the same form works
// as a plain GET (the address carries everything).
func TestWorkspaceListInBrowser(t *testing.T) {
	chrome := chromePath(t)
	app := webtest.Start(t)
	dev := app.OrgEnvironmentID(t, "acme", "development")
	staging := app.OrgEnvironmentID(t, "acme", "staging")
	for _, seed := range []struct{ env, prefix string }{{dev, "svc"}, {staging, "svc-stg"}, {dev, "billing"}} {
		n := map[string]int{"svc": 1000, "svc-stg": 150, "billing": 50}[seed.prefix]
		require.NoError(t, app.DB.Exec(`INSERT INTO workspaces (id, organization_id, environment_id, name, template_name, last_run_at)
			SELECT 'ws-' || ? || lpad(g::text, 5, '0'), ?, ?, ? || '-' || lpad(g::text, 4, '0'), 'bucket', now() - g * interval '1 minute'
			FROM generate_series(1, ?) AS g`, seed.prefix, app.Orgs["acme"], seed.env, seed.prefix, n).Error)
	}

	b := startBrowser(t, chrome)
	signInAs(t, b, app, adminEmail, adminPassword, "Adam")
	b.do(t, "open the workspaces", chromedp.Click(chromedp.CSS(`nav.mainnav a[href="/workspaces"]`), chromedp.NodeVisible),
		chromedp.WaitVisible(chromedp.CSS(`[data-testid="workspaces"]`)))
	require.Equal(t, "1,200 workspaces", liveText(t, b, "workspaces-found"))
	require.Equal(t, 50, rowCount(t, b))
	list := app.URL + "/workspaces"
	loads := runPageLoads(b, list)

	// Typing narrows the list in place.
	b.do(t, "type part of a name", chromedp.SendKeys(chromedp.ID("workspaces-q"), "billing-004"))
	waitForPage(t, b, "the narrowed list", `document.querySelector('[data-testid="workspaces-found"]')?.innerText.trim() == "10 workspaces match"`,
		"workspaces-found")
	require.Equal(t, 10, rowCount(t, b))
	require.Equal(t, loads, runPageLoads(b, list), "the list narrowed without a page load")
	require.Contains(t, location(t, b), "q=billing-004", "the address says what is shown")
	require.Equal(t, "status", attribute(t, b, chromedp.CSS(`[data-testid="workspaces-found"]`), "role"), "the count is read out")
	require.Equal(t, "billing-004", value(t, b, chromedp.ID("workspaces-q")), "what was typed stays in the field")

	// A filter combines with the search: no billing workspace is in staging.
	b.do(t, "clear the search", chromedp.SetValue(chromedp.ID("workspaces-q"), "svc"))
	// As a person's choice does: the select's value, then its input event (htmx's trigger).
	b.do(t, "choose staging", chromedp.SetValue(chromedp.ID("workspaces-environment"), staging),
		chromedp.Evaluate[chromedp.Void](`document.getElementById("workspaces-environment").dispatchEvent(new Event("input", {bubbles: true}))`))
	waitForPage(t, b, "staging's svc workspaces", `document.querySelector('[data-testid="workspaces-found"]')?.innerText.trim() == "150 workspaces match"`,
		"workspaces-found")
	q, err := url.Parse(location(t, b))
	require.NoError(t, err)
	require.Equal(t, staging, q.Query().Get("environment"))

	// Sort by name, descending (the heading's second click), then page.
	b.do(t, "sort by workspace", chromedp.Click(chromedp.CSS(`[data-testid="sort-Workspace"]`), chromedp.NodeVisible),
		chromedp.WaitVisible(chromedp.CSS(`th[aria-sort="descending"]`)))
	require.Equal(t, "svc-stg-0150", firstName(t, b), "the ascending name order was the default, so the click turned it round")
	require.Contains(t, text(t, b, chromedp.CSS(`[data-testid="workspaces"] caption`)), "sorted by workspace, descending")
	b.do(t, "next page", chromedp.Click(chromedp.CSS(`a[rel="next"]`), chromedp.NodeVisible),
		chromedp.WaitVisible(chromedp.CSS(`a[rel="prev"]`)))
	require.Equal(t, "svc-stg-0100", firstName(t, b))
	b.do(t, "previous page", chromedp.Click(chromedp.CSS(`a[rel="prev"]`), chromedp.NodeVisible),
		chromedp.WaitNotPresent(chromedp.CSS(`a[rel="prev"]`)))
	require.Equal(t, "svc-stg-0150", firstName(t, b))
	require.Zero(t, run(t, b, "look for a first-page link", chromedp.Evaluate[int64](`document.querySelectorAll('[data-testid="page-first"]').length`)),
		"the first page, reached backwards, offers no way to itself")
	requireAccessible(t, b, "the workspaces list, filtered and sorted")
	screenshotAt(t, b, workspacesScreenshot, 1280, 900, false)
	b.do(t, "reset the viewport", chromedp.ResetViewport())

	// Clearing brings the whole list back.
	b.do(t, "clear search and filters", chromedp.Click(chromedp.CSS(`[data-testid="workspaces-clear"]`), chromedp.NodeVisible),
		chromedp.WaitNotPresent(chromedp.CSS(`[data-testid="workspaces-clear"]`)))
	require.Equal(t, "1,200 workspaces", liveText(t, b, "workspaces-found"))
	require.True(t, strings.HasSuffix(location(t, b), "/workspaces"))
	requireNoCSPViolations(t, b)
}

func rowCount(t *testing.T, b *browser) int {
	t.Helper()
	return int(run(t, b, "count the rows", chromedp.Evaluate[int64](`document.querySelectorAll('[data-testid="workspaces"] tbody tr').length`)))
}

func firstName(t *testing.T, b *browser) string {
	t.Helper()
	return text(t, b, chromedp.CSS(`[data-testid="workspaces"] tbody tr th a`))
}
