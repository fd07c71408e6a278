package web_test

import (
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"gantry/cmd/gantry/webtest"
	"gantry/runner"
)

type lifecycleCounts struct{ Runs, Workspaces, Artifacts, Jobs, Audit int64 }

func countLifecycle(t *testing.T, app *webtest.App) lifecycleCounts {
	t.Helper()
	var c lifecycleCounts
	for table, dst := range map[string]*int64{"runs": &c.Runs, "workspaces": &c.Workspaces, "artifacts": &c.Artifacts, "audit_events": &c.Audit} {
		require.NoError(t, app.DB.Table(table).Count(dst).Error)
	}
	// Not the periodic jobs: the leader inserts them when it is elected, which on a busy
	// machine may fall between two counts; no request inserts one.
	periodic := []string{runner.AuditCheckpointArgs{}.Kind(), runner.DriftDispatchArgs{}.Kind()}
	require.NoError(t, app.DB.Table("river_job").Where("kind NOT IN ?", periodic).Count(&c.Jobs).Error)
	return c
}

// TestRequestValidation: every kind of bad input answers 422 with a message on the
// offending field, and writes no run, workspace, artifact, job or audit event.
func TestRequestValidation(t *testing.T) {
	t.Parallel()
	app := webtest.Start(t)
	operator := app.LoggedIn(t, "operator@acme.test")
	staging := app.OrgEnvironmentID(t, "acme", "staging")
	globexProd := app.OrgEnvironmentID(t, "globex", "production")

	// A restricted environment the operator has no grant for.
	require.NoError(t, app.DB.Exec("UPDATE environments SET restricted = true WHERE organization_id = ? AND name = 'production'", app.Orgs["acme"]).Error)
	acmeProd := app.OrgEnvironmentID(t, "acme", "production")

	valid := func() url.Values {
		return url.Values{"template": {"postgres"}, "environment": {staging}, "workspace": {"orders-db"}, "kind": {"apply"},
			"inputs.name": {"orders"}, "inputs.engine_version": {"16"}, "inputs.size": {"small"}, "inputs.storage_gb": {"20"},
			"inputs.backup_retention_days": {"7"}, "inputs.network_cidr": {"10.30.0.0/16"}}
	}
	cases := []struct {
		name, field, message string
		edit                 func(url.Values)
	}{
		{"missing required", "inputs.name", "Enter a value", func(v url.Values) { v.Del("inputs.name") }},
		{"wrong type", "inputs.storage_gb", "number", func(v url.Values) { v.Set("inputs.storage_gb", "lots") }},
		{"out of range", "inputs.storage_gb", "from 10 to 1000", func(v url.Values) { v.Set("inputs.storage_gb", "5000") }},
		{"not in enum", "inputs.engine_version", "Choose one of", func(v url.Values) { v.Set("inputs.engine_version", "9") }},
		{"pattern mismatch", "inputs.name", "", func(v url.Values) { v.Set("inputs.name", "Orders DB!") }},
		{"unknown input", "inputs.colour", "no input named", func(v url.Values) { v.Set("inputs.colour", "blue") }},
		{"unknown template", "template", "no usable template", func(v url.Values) { v.Set("template", "mainframe") }},
		{"unknown environment", "environment", "Choose one of this organization", func(v url.Values) { v.Set("environment", "env-nope") }},
		{"another tenant's environment", "environment", "Choose one of this organization", func(v url.Values) { v.Set("environment", globexProd) }},
		// Without a grant it does not exist for the operator: not even its name is told.
		{"restricted environment", "environment", "Choose one of this organization", func(v url.Values) { v.Set("environment", acmeProd) }},
		{"bad workspace name", "workspace", "lower-case", func(v url.Values) { v.Set("workspace", "Orders DB") }},
		{"no environment", "environment", "Choose an environment", func(v url.Values) { v.Del("environment") }},
		{"reason too long", "reason", "at most 1000 characters", func(v url.Values) { v.Set("reason", strings.Repeat("é", 1001)) }},
		{"ticket too long", "ticket", "at most 120 characters", func(v url.Values) { v.Set("ticket", strings.Repeat("x", 121)) }},
	}
	before := countLifecycle(t, app)
	token := app.CSRF(t, operator)
	for _, tc := range cases {
		form := valid()
		tc.edit(form)
		form.Set("_csrf", token)
		resp := app.PostForm(t, operator, "/requests", form)
		body := webtest.ReadBody(t, resp)
		require.Equal(t, http.StatusUnprocessableEntity, resp.StatusCode, tc.name)
		require.Contains(t, body, `data-testid="error-`+tc.field+`"`, tc.name)
		require.Contains(t, body, tc.message, tc.name)
	}
	require.Equal(t, before, countLifecycle(t, app), "a refused request writes nothing")

	// The valid request goes through (the refusals above were the edits' doing).
	form := valid()
	form.Set("_csrf", token)
	resp := app.PostForm(t, operator, "/requests", form)
	webtest.ReadBody(t, resp)
	require.Equal(t, http.StatusSeeOther, resp.StatusCode)
	after := countLifecycle(t, app)
	require.Equal(t, before.Runs+1, after.Runs)
	require.Equal(t, before.Workspaces+1, after.Workspaces)
}

// TestInlineValidation: the htmx endpoint answers with the one field's message slot.
func TestInlineValidation(t *testing.T) {
	t.Parallel()
	app := webtest.Start(t)
	operator := app.LoggedIn(t, "operator@acme.test")
	form := url.Values{"_csrf": {app.CSRF(t, operator)}, "template": {"bucket"}, "inputs.retention_days": {"99999"}, "_field": {"inputs.retention_days"}}
	resp := app.PostForm(t, operator, "/requests/validate", form)
	body := webtest.ReadBody(t, resp)
	require.Equal(t, http.StatusOK, resp.StatusCode)
	require.Contains(t, body, `id="input-retention_days-error"`)
	require.Contains(t, body, "from 0 to 3650")
	before := countLifecycle(t, app)
	form.Set("inputs.retention_days", "30")
	body = webtest.ReadBody(t, app.PostForm(t, operator, "/requests/validate", form))
	require.Contains(t, body, `id="input-retention_days-error"`)
	require.NotContains(t, body, "from 0 to 3650")
	require.Equal(t, before, countLifecycle(t, app))
}

// TestViewerCannotRequest: requesting needs provisioning.plan.
func TestViewerCannotRequest(t *testing.T) {
	t.Parallel()
	app := webtest.Start(t)
	viewer := app.LoggedIn(t, "viewer@acme.test")
	resp := app.Get(t, viewer, "/requests/new?template=bucket")
	webtest.ReadBody(t, resp)
	require.Equal(t, http.StatusForbidden, resp.StatusCode)
	resp = app.PostForm(t, viewer, "/requests", url.Values{"_csrf": {app.CSRF(t, viewer)}, "template": {"bucket"}})
	webtest.ReadBody(t, resp)
	require.Equal(t, http.StatusForbidden, resp.StatusCode)
}
