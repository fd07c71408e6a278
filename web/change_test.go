package web_test

import (
	"net/http"
	"net/url"
	"testing"

	"github.com/stretchr/testify/require"

	"gantry/cmd/gantry/webtest"
	"gantry/models/run"
	"gantry/views/paths"
)

// TestChangePredictsTheReplace (issue 37, items 4 and 7): a workspace's Change is its own
// page, the workspace and environment fixed and the last applied inputs filled in; its
// preview shows each input was → now, and a rename of the bucket (a fixed input of a
// data-bearing resource) predicts the replace, with the risk the plan gates give it
// (3, the data-loss floor) and who must decide (an owner), before anything is
// submitted. Where the preview cannot know it says the plan will tell, and the change
// route refuses another environment or workspace.
func TestChangePredictsTheReplace(t *testing.T) {
	t.Parallel()
	app := webtest.Start(t)
	operator := app.LoggedIn(t, "operator@acme.test")
	dev, staging := app.OrgEnvironmentID(t, "acme", "development"), app.OrgEnvironmentID(t, "acme", "staging")
	applied := waitForState(t, app, app.RequestRun(t, operator, url.Values{"template": {"bucket"}, "environment": {dev},
		"workspace": {"change-assets"}, "kind": {"apply"}, "inputs.name": {"change-assets"}, "inputs.retention_days": {"14"},
		"inputs.region": {"eu-central"}}), run.Succeeded)
	ws := applied.WorkspaceID

	page := webtest.ReadBody(t, app.Get(t, operator, paths.ChangeWorkspace("bucket", ws)))
	require.Contains(t, page, "<title>Change change-assets")
	require.Contains(t, page, `<input type="hidden" id="environment" name="environment" value="`+dev+`">`)
	require.NotContains(t, page, `<select id="environment"`, "the environment is fixed")
	require.Contains(t, page, `name="inputs.retention_days" value="14"`)
	require.Contains(t, page, "Was 14 when last applied.")
	require.Contains(t, page, `data-testid="was-now-name"`)

	token := app.CSRF(t, operator)
	change := func(env, name, retention string) url.Values {
		return url.Values{"_csrf": {token}, "template": {"bucket"}, "environment": {env}, "workspace": {"change-assets"}, "kind": {"apply"},
			"inputs.name": {name}, "inputs.retention_days": {retention}, "inputs.region": {"eu-central"}, "inputs.versioning": {"false", "true"}}
	}
	preview := func(form url.Values) (int, string) {
		t.Helper()
		resp := app.PostForm(t, operator, paths.PreviewChange(ws), form)
		return resp.StatusCode, webtest.ReadBody(t, resp)
	}

	// The form's live preview posts its one idempotency key with every edit: a preview
	// keeps no key, so the next edit is answered too.
	for _, retention := range []string{"20", "21"} {
		form := change(dev, "change-assets", retention)
		form.Set("idempotency_key", "change-preview-key")
		status, body := preview(form)
		require.Equal(t, http.StatusOK, status, body)
	}

	// The same inputs: nothing changes, nothing is replaced, nobody decides.
	status, body := preview(change(dev, "change-assets", "14"))
	require.Equal(t, http.StatusOK, status, body)
	require.Contains(t, body, "Nothing: the plan would change nothing.")
	require.Contains(t, body, "Risk 0</strong>")

	// Retention changes in place: risk 1, self-service, and was → now says so.
	status, body = preview(change(dev, "change-assets", "45"))
	require.Equal(t, http.StatusOK, status, body)
	require.Contains(t, body, "Nothing is replaced or destroyed: 1 resource is created or changed in place.")
	require.Contains(t, body, "Risk 1</strong>")
	require.Contains(t, body, "self-service")
	require.Regexp(t, `data-testid="was-now-retention_days" class="changed"><th scope="row">Retention \(days\)\s*</th><td><code>14</code></td><td><span class="visually-hidden">changed to </span>\s*<strong><code>45</code>`, body)

	// The rename: a replace of the bucket, whose data is lost, risk 3 and an owner's.
	status, body = preview(change(dev, "change-assets-2", "14"))
	require.Equal(t, http.StatusOK, status, body)
	require.Contains(t, body, `data-testid="preview-replace"><code>module.bucket.sandbox_bucket.this</code> is replaced: name cannot change in place`)
	require.Contains(t, body, "What it holds is lost (sandbox_bucket holds data).")
	require.Contains(t, body, "Risk 3</strong> (replace or destroy of an irreversible (data-bearing) resource): an owner, not the requester")
	require.NotContains(t, body, "self-service")
	require.Regexp(t, `data-testid="was-now-name" class="changed"><th scope="row">Bucket name\s+<span class="badge"[^>]*>fixed</span></th><td><code>change-assets</code></td>`, body)
	// A dry run of it: nobody decides, and what it would carry if applied.
	dry := change(dev, "change-assets-2", "14")
	dry.Set("kind", "plan_only")
	_, body = preview(dry)
	require.Contains(t, body, "Nobody: a dry run is never gated")
	require.Contains(t, body, "Applied, the same change would be <strong>risk 3</strong>")

	// Where it cannot know, it says the plan will tell, never that nothing is replaced.
	status, body = preview(change(dev, "Not A Bucket Name", "14"))
	require.Equal(t, http.StatusOK, status, body)
	require.Contains(t, body, "the plan will tell whether anything is replaced")
	require.NotContains(t, body, "Nothing is replaced")
	require.NotContains(t, body, "Every policy of this environment passes")

	// The change route keeps its workspace and environment.
	before := lifecycleTotals(t, app)
	status, body = preview(change(staging, "change-assets", "45"))
	require.Equal(t, http.StatusBadRequest, status, body)
	require.Contains(t, body, "A change stays in its workspace&#39;s environment")
	other := change(dev, "change-assets", "45")
	other.Set("workspace", "somewhere-else")
	status, _ = preview(other)
	require.Equal(t, http.StatusBadRequest, status)
	for _, form := range []url.Values{change(staging, "change-assets", "45"), other} {
		resp := app.PostForm(t, operator, paths.ChangeWorkspace("bucket", ws), form)
		webtest.ReadBody(t, resp)
		require.Equal(t, http.StatusBadRequest, resp.StatusCode, "a change submitted elsewhere")
	}
	require.Equal(t, before, lifecycleTotals(t, app), "nothing written")

	// Submitted, the change is a run of the same workspace; a refused one comes back as
	// the change page with its messages.
	resp := app.PostForm(t, operator, paths.ChangeWorkspace("bucket", ws), change(dev, "Not A Bucket Name", "14"))
	body = webtest.ReadBody(t, resp)
	require.Equal(t, http.StatusUnprocessableEntity, resp.StatusCode)
	require.Contains(t, body, "<h1>Change change-assets")
	require.Contains(t, body, `data-testid="summary-inputs.name"`)
	resp = app.PostForm(t, operator, paths.ChangeWorkspace("bucket", ws), change(dev, "change-assets", "45"))
	webtest.ReadBody(t, resp)
	require.Equal(t, http.StatusSeeOther, resp.StatusCode)
	m := webtest.RunPath.FindStringSubmatch(resp.Header.Get("Location"))
	require.NotNil(t, m, resp.Header.Get("Location"))
	r := waitForState(t, app, m[1], run.Succeeded)
	require.Equal(t, ws, r.WorkspaceID)

	// Who may not: a viewer, another organization.
	viewer := app.LoggedIn(t, "viewer@acme.test")
	resp = app.Get(t, viewer, paths.ChangeWorkspace("bucket", ws))
	webtest.ReadBody(t, resp)
	require.Equal(t, http.StatusForbidden, resp.StatusCode)
	stranger := app.LoggedIn(t, "operator@globex.test")
	resp = app.Get(t, stranger, paths.ChangeWorkspace("bucket", ws))
	webtest.ReadBody(t, resp)
	require.Equal(t, http.StatusNotFound, resp.StatusCode)
}

// TestPreviewNamesThePolicyThatRefuses: the request form validates with the
// environment's policies before submitting: a postgres with one day of backups in
// staging shows the rule that needs seven, with its message.
func TestPreviewNamesThePolicyThatRefuses(t *testing.T) {
	t.Parallel()
	app := webtest.Start(t)
	operator := app.LoggedIn(t, "operator@acme.test")
	staging := app.OrgEnvironmentID(t, "acme", "staging")
	form := postgresRequest(staging, "orders-db", "small", "1")
	form.Set("_csrf", app.CSRF(t, operator))
	resp := app.PostForm(t, operator, paths.PreviewRequest(), form)
	body := webtest.ReadBody(t, resp)
	require.Equal(t, http.StatusOK, resp.StatusCode, body)
	require.Contains(t, body, `data-testid="preview-block-database_protection"`)
	require.Contains(t, body, "backup_retention_days must be at least 7 in staging")
	form.Set("inputs.backup_retention_days", "7")
	resp = app.PostForm(t, operator, paths.PreviewRequest(), form)
	body = webtest.ReadBody(t, resp)
	require.NotContains(t, body, "preview-block-database_protection")
}
