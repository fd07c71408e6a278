package web_test

import (
	"encoding/json"
	"net/http"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"gantry/cmd/gantry/webtest"
)

var (
	// navLink is a link of the navigation (the account's links carry a class).
	navLink = regexp.MustCompile(`<a href="([^"]*)"(?: aria-current="page")?>`)
	// navGroup is a navigation group, by its id.
	navGroup = regexp.MustCompile(`<details class="navmenu" id="(nav-[a-z]+)">`)
)

// navOf is what the navigation of page body offers: its links' addresses and its
// groups, in order.
func navOf(t *testing.T, body string) (links, groups []string) {
	t.Helper()
	start, end := strings.Index(body, `<nav aria-label="Main"`), strings.Index(body, `</nav>`)
	require.True(t, start >= 0 && end > start, "the page has its main navigation")
	nav := body[start:end]
	for _, m := range navLink.FindAllStringSubmatch(nav, -1) {
		links = append(links, m[1])
	}
	for _, m := range navGroup.FindAllStringSubmatch(nav, -1) {
		groups = append(groups, m[1])
	}
	return links, groups
}

// TestNavigationFollowsPermissions: each role's navigation offers the daily work, the
// settings and the audit groups it may use, Governance and Break-glass included, each
// leading to a page that role may open (200), and marks the current section and its
// group.
func TestNavigationFollowsPermissions(t *testing.T) {
	t.Parallel()
	app := webtest.Start(t)
	daily := []string{"/", "/catalog", "/workspaces", "/runs"}
	settings := []string{"/environments", "/executors", "/settings/approval-matrix", "/policies", "/members", "/settings/webhooks"}
	audit := []string{"/audit", "/governance"}
	join := func(parts ...[]string) []string {
		var out []string
		for _, p := range parts {
			out = append(out, p...)
		}
		return out
	}
	for _, tc := range []struct {
		email  string
		links  []string
		groups []string
	}{
		{"viewer@acme.test", join(daily, []string{"/drift", "/breakglass"}), nil},
		{"operator@acme.test", join(daily, []string{"/approvals", "/drift", "/breakglass"}), nil},
		{"auditor@acme.test", join(daily, []string{"/drift", "/breakglass"}, audit), []string{"nav-audit"}},
		{"admin@acme.test", join(daily, []string{"/approvals", "/drift", "/breakglass"}, settings, audit), []string{"nav-settings", "nav-audit"}},
		{"owner@acme.test", join(daily, []string{"/approvals", "/drift", "/breakglass"}, settings, audit), []string{"nav-settings", "nav-audit"}},
	} {
		t.Run(tc.email, func(t *testing.T) {
			c := app.LoggedIn(t, tc.email)
			resp := app.Get(t, c, "/")
			body := webtest.ReadBody(t, resp)
			require.Equal(t, http.StatusOK, resp.StatusCode)
			links, groups := navOf(t, body)
			require.Equal(t, tc.links, links)
			require.Equal(t, tc.groups, groups)
			for _, l := range links {
				resp := app.Get(t, c, l)
				webtest.ReadBody(t, resp)
				require.Equal(t, http.StatusOK, resp.StatusCode, "%s offers %s", tc.email, l)
			}
		})
	}

	admin := app.LoggedIn(t, "admin@acme.test")
	body := webtest.ReadBody(t, app.Get(t, admin, "/environments"))
	require.Contains(t, body, `<a href="/environments" aria-current="page">Environments</a>`)
	require.Regexp(t, `id="nav-settings"><summary aria-current="true">Settings</summary>`, body)
	require.NotRegexp(t, `id="nav-audit"><summary aria-current`, body)
	body = webtest.ReadBody(t, app.Get(t, admin, "/breakglass"))
	require.Contains(t, body, `<a href="/breakglass" aria-current="page">Break-glass</a>`)
	require.Contains(t, body, `<a href="/drift">Drift</a>`, "Drift is not current on the break-glass list any more")
}

// TestUnknownPageInWords: an address no page lives at answers 404 with a page in words
// and ways on, signed in or out; an API client still gets the same problem document.
func TestUnknownPageInWords(t *testing.T) {
	t.Parallel()
	app := webtest.Start(t)

	admin := app.LoggedIn(t, "admin@acme.test")
	resp := app.Get(t, admin, "/no-such-page")
	body := webtest.ReadBody(t, resp)
	require.Equal(t, http.StatusNotFound, resp.StatusCode)
	require.Equal(t, "no-store", resp.Header.Get("Cache-Control"))
	require.Contains(t, body, "<title>Page not found · Gantry</title>")
	require.Contains(t, body, "We could not find that page")
	require.Contains(t, body, `data-testid="current-user">Adam (Acme Corp admin)`)
	require.Contains(t, body, `<a class="button" href="/" data-testid="error-action">Go to the dashboard</a>`)
	require.NotContains(t, body, "Not Found")

	// Signed out, an address under the members' pages leads to signing in first (the
	// router does not tell outsiders which pages exist); outside them, the page in words.
	anon := app.Client(t)
	resp = app.Get(t, anon, "/no-such-page")
	webtest.ReadBody(t, resp)
	require.Equal(t, http.StatusFound, resp.StatusCode)
	require.True(t, strings.HasPrefix(resp.Header.Get("Location"), "/login"), resp.Header.Get("Location"))
	resp = app.Get(t, anon, "/static/no-such-file.css")
	body = webtest.ReadBody(t, resp)
	require.Equal(t, http.StatusNotFound, resp.StatusCode)
	require.Contains(t, body, "We could not find that page")
	require.Contains(t, body, `id="sign-in-link"`)
	require.Contains(t, body, `data-testid="error-action">Sign in</a>`)
	require.NotContains(t, body, `aria-label="Main"`)

	// A missing object keeps its own explanation.
	body = webtest.ReadBody(t, app.Get(t, admin, "/runs/run-nope"))
	require.Contains(t, body, "There is nothing here")

	req, err := http.NewRequest(http.MethodGet, app.URL+"/no-such-page", nil)
	require.NoError(t, err)
	req.Header.Set("Accept", "application/json")
	resp, err = admin.Do(req)
	require.NoError(t, err)
	var problem map[string]any
	require.NoError(t, json.Unmarshal([]byte(webtest.ReadBody(t, resp)), &problem))
	require.Equal(t, http.StatusNotFound, resp.StatusCode)
	require.Equal(t, map[string]any{"type": "urn:gantry:problem:not-found", "status": float64(404), "title": "Not Found",
		"detail": "Not Found", "code": "NOT_FOUND"}, problem)
}
