package web_test

import (
	"encoding/json"
	"html"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"gantry/cmd/gantry/webtest"
	"gantry/models/audit"
	"gantry/views/paths"
)

// The policy administration pages (DESIGN §7): every member reads the bundle and the
// environments' modes; admins set modes and upload, activate and deactivate the
// organization's own policies.

// teamLabelRego is a small organization policy: buckets carry a team label.
const teamLabelRego = `# Buckets say which team owns them.
package gantry.org.team_label

metadata := {
	"id": "org.team_label",
	"title": "Buckets carry a team label",
	"description": "A sandbox_bucket that is created or updated has a non-empty team label.",
	"enforcement": "soft_mandatory",
}

deny contains msg if {
	some rc in input.plan.resource_changes
	rc.type == "sandbox_bucket"
	some action in rc.change.actions
	action in {"create", "update"}
	object.get(rc.change.after, ["labels", "team"], "") == ""
	msg := sprintf("%s: set the label team (the owning team)", [rc.address])
}
`

const teamLabelTests = `package gantry.org.team_label_test

import data.gantry.org.team_label

bucket(labels) := {
	"address": "module.bucket.sandbox_bucket.this",
	"type": "sandbox_bucket",
	"change": {"actions": ["create"], "after": {"name": "assets", "labels": labels}},
}

test_allows_team_label if {
	count(team_label.deny) == 0 with input as {"plan": {"resource_changes": [bucket({"team": "data"})]}}
}

test_denies_missing_team_label if {
	team_label.deny == {"module.bucket.sandbox_bucket.this: set the label team (the owning team)"} with input as {"plan": {"resource_changes": [bucket({"managed_by": "gantry"})]}}
}
`

// uploadForm is the upload form as a browser posts it (textarea lines end in CRLF).
func uploadForm(token, name, rego, tests string) url.Values {
	crlf := func(s string) string { return strings.ReplaceAll(s, "\n", "\r\n") }
	return url.Values{"_csrf": {token}, "name": {name}, "rego": {crlf(rego)}, "tests": {crlf(tests)}}
}

func policyModeRows(t *testing.T, app *webtest.App, envID string) map[string]string {
	t.Helper()
	var rows []struct{ RuleID, Enforcement string }
	require.NoError(t, app.DB.Raw("SELECT rule_id, enforcement FROM environment_policy_modes WHERE environment_id = ?", envID).Scan(&rows).Error)
	out := map[string]string{}
	for _, r := range rows {
		out[r.RuleID] = r.Enforcement
	}
	return out
}

func auditEvents(t *testing.T, app *webtest.App, slug, action string) []audit.Event {
	t.Helper()
	var events []audit.Event
	require.NoError(t, app.DB.Where("organization_id = ? AND action = ?", app.Orgs[slug], action).Order("seq").Find(&events).Error)
	return events
}

func orgPolicyVersions(t *testing.T, app *webtest.App, slug, name string) []int {
	t.Helper()
	var versions []int
	require.NoError(t, app.DB.Raw("SELECT version FROM org_policies WHERE organization_id = ? AND name = ? ORDER BY version",
		app.Orgs[slug], name).Scan(&versions).Error)
	return versions
}

// TestPolicyModesAdminSets: an admin makes a hard-mandatory rule advisory in one
// environment; it is stored, audited with from/to, and the page shows it selected.
func TestPolicyModesAdminSets(t *testing.T) {
	t.Parallel()
	app := webtest.Start(t)
	c := app.LoggedIn(t, "admin@acme.test")
	dev := app.OrgEnvironmentID(t, "acme", "development")

	body := webtest.ReadBody(t, app.Get(t, c, paths.Policies()))
	require.Contains(t, body, `href="/policies" aria-current="page"`, "the navigation links the page")
	require.Contains(t, body, `data-testid="policy-rule-allowed_regions"`)
	require.Contains(t, body, `href="`+paths.EnvironmentPolicies(dev)+`"`, "the environment links its modes page")

	resp := app.Get(t, c, paths.EnvironmentPolicies(dev))
	body = webtest.ReadBody(t, resp)
	require.Equal(t, http.StatusOK, resp.StatusCode, body)
	require.Contains(t, body, "Policy enforcement: development")
	require.Contains(t, body, `aria-label="Enforcement of Resources stay in the allowed regions"`)
	require.Regexp(t, `name="mode.allowed_regions"[^>]*>\s*<option value="advisory">advisory</option><option value="soft_mandatory">soft mandatory</option><option value="hard_mandatory" selected>hard mandatory \(default\)</option>`, body)
	require.Contains(t, body, `id="save-modes"`)

	form := url.Values{"_csrf": {app.CSRF(t, c)}, "mode.allowed_regions": {"advisory"}, "mode.required_labels": {"soft_mandatory"}}
	resp = app.PostForm(t, c, paths.EnvironmentPolicies(dev), form)
	webtest.ReadBody(t, resp)
	require.Equal(t, http.StatusSeeOther, resp.StatusCode)
	require.Equal(t, paths.EnvironmentPolicies(dev), resp.Header.Get("Location"))

	require.Equal(t, map[string]string{"allowed_regions": "advisory"}, policyModeRows(t, app, dev), "a default is not stored")
	events := auditEvents(t, app, "acme", "policy.modes_changed")
	require.Len(t, events, 1)
	require.Equal(t, dev, events[0].TargetID)
	var data map[string]any
	require.NoError(t, json.Unmarshal(events[0].Data, &data))
	require.Equal(t, map[string]any{"allowed_regions": map[string]any{"from": "hard_mandatory", "to": "advisory"}}, data["changes"])

	body = webtest.ReadBody(t, app.Get(t, c, paths.EnvironmentPolicies(dev)))
	require.Contains(t, body, "Policy enforcement saved.")
	require.Regexp(t, `name="mode.allowed_regions"[^>]*>\s*<option value="advisory" selected>advisory</option>`, body)
	require.Regexp(t, `data-testid="mode-allowed_regions"(?s:.)*?data-testid="mode-changed"`, body)
	// Other environments keep the default.
	staging := app.OrgEnvironmentID(t, "acme", "staging")
	require.Empty(t, policyModeRows(t, app, staging))
}

// TestPolicyModesOnlyAdminsChange: an operator reads the modes without controls; a
// POST is 403 and stores nothing.
func TestPolicyModesOnlyAdminsChange(t *testing.T) {
	t.Parallel()
	app := webtest.Start(t)
	dev := app.OrgEnvironmentID(t, "acme", "development")
	for _, role := range []string{"operator", "viewer"} {
		c := app.LoggedIn(t, role+"@acme.test")
		resp := app.Get(t, c, paths.EnvironmentPolicies(dev))
		body := webtest.ReadBody(t, resp)
		require.Equal(t, http.StatusOK, resp.StatusCode, role)
		require.Contains(t, body, `data-testid="modes-read-only"`, role)
		require.NotContains(t, body, `name="mode.allowed_regions"`, role)
		require.NotContains(t, body, `id="save-modes"`, role)
		require.Contains(t, body, "hard mandatory (default)", role)

		resp = app.PostForm(t, c, paths.EnvironmentPolicies(dev), url.Values{"_csrf": {app.CSRF(t, c)}, "mode.allowed_regions": {"advisory"}})
		webtest.ReadBody(t, resp)
		require.Equal(t, http.StatusForbidden, resp.StatusCode, role)
	}
	require.Empty(t, policyModeRows(t, app, dev))
	require.Empty(t, auditEvents(t, app, "acme", "policy.modes_changed"))
}

// TestPolicyModesInvalid: an unknown mode or rule is a 422 with the message beside the
// control (or in the summary) and the other submitted values kept; nothing is stored.
func TestPolicyModesInvalid(t *testing.T) {
	t.Parallel()
	app := webtest.Start(t)
	c := app.LoggedIn(t, "admin@acme.test")
	dev := app.OrgEnvironmentID(t, "acme", "development")

	form := url.Values{"_csrf": {app.CSRF(t, c)}, "mode.allowed_regions": {"mandatory"}, "mode.no_public_buckets": {"advisory"},
		"mode.no_such_rule": {"advisory"}}
	resp := app.PostForm(t, c, paths.EnvironmentPolicies(dev), form)
	body := webtest.ReadBody(t, resp)
	require.Equal(t, http.StatusUnprocessableEntity, resp.StatusCode, body)
	require.Contains(t, body, `data-testid="error-summary"`)
	require.Contains(t, body, `id="mode.allowed_regions-error" data-testid="error-mode.allowed_regions">Choose advisory, soft mandatory or hard mandatory.</p>`)
	require.Contains(t, body, "No rule has this id.")
	require.Contains(t, body, `<a href="#mode.allowed_regions">`)
	require.Regexp(t, `name="mode.allowed_regions"[^>]*aria-invalid="true"[^>]*>\s*<option value="" selected disabled>`, body)
	require.Regexp(t, `name="mode.no_public_buckets"[^>]*>\s*<option value="advisory" selected>`, body, "the valid edit is kept")

	require.Empty(t, policyModeRows(t, app, dev))
	require.Empty(t, auditEvents(t, app, "acme", "policy.modes_changed"))
}

// TestPolicyModesOtherOrganization: another organization's environment is not found,
// to read or to change.
func TestPolicyModesOtherOrganization(t *testing.T) {
	t.Parallel()
	app := webtest.Start(t)
	c := app.LoggedIn(t, "admin@acme.test")
	globexDev := app.OrgEnvironmentID(t, "globex", "development")

	resp := app.Get(t, c, paths.EnvironmentPolicies(globexDev))
	body := webtest.ReadBody(t, resp)
	require.Equal(t, http.StatusNotFound, resp.StatusCode)
	require.NotContains(t, body, `name="mode.`)
	resp = app.PostForm(t, c, paths.EnvironmentPolicies(globexDev), url.Values{"_csrf": {app.CSRF(t, c)}, "mode.allowed_regions": {"advisory"}})
	webtest.ReadBody(t, resp)
	require.Equal(t, http.StatusNotFound, resp.StatusCode)
	require.Empty(t, policyModeRows(t, app, globexDev))

	body = webtest.ReadBody(t, app.Get(t, c, paths.Policies()))
	require.NotContains(t, body, globexDev, "only the organization's own environments are listed")
}

// TestOrgPolicyLifecycle: an admin uploads a policy whose tests pass (version 1,
// audited, a rule of the bundle and of every environment's modes), uploads it again
// (version 2) and deactivates it (out of the bundle, kept in the list).
func TestOrgPolicyLifecycle(t *testing.T) {
	t.Parallel()
	app := webtest.Start(t)
	c := app.LoggedIn(t, "admin@acme.test")
	token := app.CSRF(t, c)
	dev := app.OrgEnvironmentID(t, "acme", "development")

	body := webtest.ReadBody(t, app.Get(t, c, paths.Policies()))
	require.Contains(t, body, `data-testid="org-policies-empty"`)
	require.Contains(t, body, `<label for="policy-rego">Rego source</label>`)
	require.Contains(t, body, `<label for="policy-tests">Rego tests</label>`)
	require.NotContains(t, body, `data-testid="policy-rule-org.team_label"`)

	resp := app.PostForm(t, c, paths.UploadPolicy(), uploadForm(token, "team_label", teamLabelRego, teamLabelTests))
	body = webtest.ReadBody(t, resp)
	require.Equal(t, http.StatusSeeOther, resp.StatusCode, body)
	require.Equal(t, paths.Policies(), resp.Header.Get("Location"))
	require.Equal(t, []int{1}, orgPolicyVersions(t, app, "acme", "team_label"))
	var stored string
	require.NoError(t, app.DB.Raw("SELECT rego FROM org_policies WHERE name = 'team_label'").Scan(&stored).Error)
	require.Equal(t, teamLabelRego, stored, "stored as written, without the browser's CRs")

	events := auditEvents(t, app, "acme", "policy.uploaded")
	require.Len(t, events, 1)
	require.Equal(t, "team_label", events[0].TargetID)
	var data map[string]any
	require.NoError(t, json.Unmarshal(events[0].Data, &data))
	require.EqualValues(t, 1, data["version"])

	body = webtest.ReadBody(t, app.Get(t, c, paths.Policies()))
	require.Contains(t, body, "Uploaded team_label version 1")
	require.Regexp(t, `data-testid="policy-rule-org.team_label"(?s:.)*?Buckets carry a team label(?s:.)*?organization(?s:.)*?soft mandatory`, body)
	require.Regexp(t, `data-testid="org-policy-team_label-1"(?s:.)*?Adam(?s:.)*?data-testid="org-policy-status">active<`, body)
	require.Contains(t, body, `id="deactivate-team_label"`)

	body = webtest.ReadBody(t, app.Get(t, c, paths.EnvironmentPolicies(dev)))
	require.Contains(t, body, `data-testid="mode-org.team_label"`)
	require.Regexp(t, `name="mode.org.team_label"[^>]*>\s*<option value="advisory">advisory</option><option value="soft_mandatory" selected>soft mandatory \(default\)</option>`, body)

	// A new version of the same name.
	newer := strings.Replace(teamLabelRego, `"enforcement": "soft_mandatory"`, `"enforcement": "hard_mandatory"`, 1)
	resp = app.PostForm(t, c, paths.UploadPolicy(), uploadForm(token, "team_label", newer, teamLabelTests))
	webtest.ReadBody(t, resp)
	require.Equal(t, http.StatusSeeOther, resp.StatusCode)
	require.Equal(t, []int{1, 2}, orgPolicyVersions(t, app, "acme", "team_label"))
	body = webtest.ReadBody(t, app.Get(t, c, paths.Policies()))
	require.Contains(t, body, "Uploaded team_label version 2")
	require.Regexp(t, `data-testid="org-policy-team_label-2"(?s:.)*?data-testid="org-policy-status">active<(?s:.)*?data-testid="org-policy-team_label-1"(?s:.)*?superseded`, body)
	require.Regexp(t, `data-testid="policy-rule-org.team_label"(?s:.)*?hard mandatory`, body)
	require.Len(t, auditEvents(t, app, "acme", "policy.uploaded"), 2)

	// Deactivated: out of the bundle and the modes, still listed.
	resp = app.PostForm(t, c, paths.PolicyActive("team_label"), url.Values{"_csrf": {token}, "active": {"false"}})
	webtest.ReadBody(t, resp)
	require.Equal(t, http.StatusSeeOther, resp.StatusCode)
	require.Len(t, auditEvents(t, app, "acme", "policy.deactivated"), 1)
	body = webtest.ReadBody(t, app.Get(t, c, paths.Policies()))
	require.Contains(t, body, "Deactivated team_label")
	require.NotContains(t, body, `data-testid="policy-rule-org.team_label"`)
	require.Regexp(t, `data-testid="org-policy-team_label-2"(?s:.)*?data-testid="org-policy-status">inactive<`, body)
	require.Contains(t, body, `id="activate-team_label"`)
	body = webtest.ReadBody(t, app.Get(t, c, paths.EnvironmentPolicies(dev)))
	require.NotContains(t, body, "org.team_label")

	// And back.
	resp = app.PostForm(t, c, paths.PolicyActive("team_label"), url.Values{"_csrf": {token}, "active": {"true"}})
	webtest.ReadBody(t, resp)
	require.Equal(t, http.StatusSeeOther, resp.StatusCode)
	require.Contains(t, webtest.ReadBody(t, app.Get(t, c, paths.Policies())), `data-testid="policy-rule-org.team_label"`)

	// Another organization sees none of it.
	globex := app.LoggedIn(t, "admin@globex.test")
	body = webtest.ReadBody(t, app.Get(t, globex, paths.Policies()))
	require.NotContains(t, body, `data-testid="policy-rule-org.team_label"`)
	require.NotContains(t, body, `data-testid="org-policy-team_label-`)
	resp = app.PostForm(t, globex, paths.PolicyActive("team_label"), url.Values{"_csrf": {app.CSRF(t, globex)}, "active": {"false"}})
	webtest.ReadBody(t, resp)
	require.Equal(t, http.StatusNotFound, resp.StatusCode)
}

// TestOrgPolicyUploadRefused: a failing test, a compile error and an operator's upload
// store nothing; the form comes back with the message and the submitted text.
func TestOrgPolicyUploadRefused(t *testing.T) {
	t.Parallel()
	app := webtest.Start(t)
	c := app.LoggedIn(t, "admin@acme.test")
	token := app.CSRF(t, c)

	failing := strings.Replace(teamLabelTests, `(the owning team)"}`, `(owner)"}`, 1)
	require.NotEqual(t, teamLabelTests, failing)
	resp := app.PostForm(t, c, paths.UploadPolicy(), uploadForm(token, "team_label", teamLabelRego, failing))
	body := webtest.ReadBody(t, resp)
	require.Equal(t, http.StatusUnprocessableEntity, resp.StatusCode, body)
	require.Contains(t, body, `data-testid="error-summary"`)
	require.Contains(t, body, `id="policy-tests-error" data-testid="error-tests">Failing tests: test_denies_missing_team_label.</p>`)
	require.Contains(t, body, `<a href="#policy-tests">`)
	require.Regexp(t, `id="policy-tests"[^>]*aria-invalid="true"`, body)
	require.Contains(t, body, `value="team_label"`, "the name is kept")
	require.Contains(t, body, "(owner)&#34;}", "the submitted tests are kept")
	require.Contains(t, body, "object.get(rc.change.after, [&#34;labels&#34;, &#34;team&#34;], &#34;&#34;)", "the submitted policy is kept")

	broken := strings.Replace(teamLabelRego, `rc.type == "sandbox_bucket"`, `rc.type == kind`, 1)
	resp = app.PostForm(t, c, paths.UploadPolicy(), uploadForm(token, "team_label", broken, teamLabelTests))
	body = webtest.ReadBody(t, resp)
	require.Equal(t, http.StatusUnprocessableEntity, resp.StatusCode, body)
	require.Contains(t, body, `data-testid="error-rego"`)
	require.Contains(t, body, "var kind is unsafe")

	resp = app.PostForm(t, c, paths.UploadPolicy(), uploadForm(token, "Team-Label", teamLabelRego, teamLabelTests))
	body = webtest.ReadBody(t, resp)
	require.Equal(t, http.StatusUnprocessableEntity, resp.StatusCode)
	require.Contains(t, body, `data-testid="error-name"`)

	operator := app.LoggedIn(t, "operator@acme.test")
	body = webtest.ReadBody(t, app.Get(t, operator, paths.Policies()))
	require.Contains(t, body, `data-testid="policies-read-only"`)
	require.NotContains(t, body, `id="policy-rego"`)
	require.Contains(t, body, `data-testid="policy-rule-allowed_regions"`)
	resp = app.PostForm(t, operator, paths.UploadPolicy(), uploadForm(app.CSRF(t, operator), "team_label", teamLabelRego, teamLabelTests))
	webtest.ReadBody(t, resp)
	require.Equal(t, http.StatusForbidden, resp.StatusCode)

	require.Empty(t, orgPolicyVersions(t, app, "acme", "team_label"))
	require.Empty(t, auditEvents(t, app, "acme", "policy.uploaded"))
}

var examplePre = regexp.MustCompile(`(?s)<pre><code>(.*?)</code></pre>`)

// TestOrgPolicyExampleUploads: the example beside the upload form is a policy the
// form accepts.
func TestOrgPolicyExampleUploads(t *testing.T) {
	t.Parallel()
	app := webtest.Start(t)
	c := app.LoggedIn(t, "owner@acme.test")
	body := webtest.ReadBody(t, app.Get(t, c, paths.Policies()))
	examples := examplePre.FindAllStringSubmatch(body, -1)
	require.Len(t, examples, 2)
	rego, tests := html.UnescapeString(examples[0][1]), html.UnescapeString(examples[1][1])
	require.Contains(t, rego, "package gantry.org.team_label")
	resp := app.PostForm(t, c, paths.UploadPolicy(), uploadForm(app.CSRF(t, c), "team_label", rego, tests))
	body = webtest.ReadBody(t, resp)
	require.Equal(t, http.StatusSeeOther, resp.StatusCode, body)
	require.Equal(t, []int{1}, orgPolicyVersions(t, app, "acme", "team_label"))
}
