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

// TestRequestPreview: before submitting, the request form says who must decide, as far
// as is known before a plan (the environment's gate, the kind of run, the matrix raised
// to the floors), and what the inputs cost a month, from a simulated plan of the
// generated configuration (so a count input moves it) against the workspace's current
// state (a change of an existing workspace says what it adds); a preview writes
// nothing, a viewer may not ask for one and it needs the CSRF token like any post.
func TestRequestPreview(t *testing.T) {
	t.Parallel()
	app := webtest.Start(t)
	operator := app.LoggedIn(t, "operator@acme.test")
	dev, staging, prod := app.OrgEnvironmentID(t, "acme", "development"), app.OrgEnvironmentID(t, "acme", "staging"), app.OrgEnvironmentID(t, "acme", "production")
	token := app.CSRF(t, operator)
	preview := func(form url.Values) string {
		t.Helper()
		form.Set("_csrf", token)
		resp := app.PostForm(t, operator, "/requests/preview", form)
		body := webtest.ReadBody(t, resp)
		require.Equal(t, http.StatusOK, resp.StatusCode, body)
		return body
	}
	network := func(env, kind, subnets string) url.Values {
		return url.Values{"template": {"network"}, "environment": {env}, "workspace": {"preview-net"}, "kind": {kind},
			"inputs.name": {"preview-net"}, "inputs.subnet_count": {subnets}}
	}

	// Who decides, by environment and kind: predicted from the simulated plan (which
	// only creates here), raised to the environment's floor.
	body := preview(network(dev, "apply", "3"))
	require.Contains(t, body, "Risk 1</strong> (")
	require.Contains(t, body, "self-service")
	require.Contains(t, body, "Predicted from a simulated plan")
	require.Contains(t, body, "Nothing is replaced or destroyed: 4 resources are created or changed in place.")
	body = preview(network(staging, "apply", "3"))
	require.Contains(t, body, "Risk 1 in a protected environment</strong>")
	require.Contains(t, body, "one operator, admin or owner, not the requester")
	body = preview(network(prod, "apply", "3"))
	require.Contains(t, body, "Risk 2</strong> (")
	require.Contains(t, body, "an admin or owner, not the requester")
	require.Contains(t, preview(network(prod, "plan_only", "3")), "Nobody: a dry run is never gated")

	// The cost follows the inputs: three subnets at $4.50, then five.
	require.Contains(t, preview(network(dev, "apply", "3")), "$13.50 a month")
	require.Contains(t, preview(network(dev, "apply", "5")), "$22.50 a month")
	// Incomplete or wrong inputs: who decides is known, the cost is not.
	body = preview(network(dev, "apply", "2.5"))
	require.Contains(t, body, "Fill in the template&#39;s inputs to see what it costs.")
	require.Contains(t, body, "At least risk 1")
	require.Contains(t, body, "the plan will tell whether anything is replaced")
	require.NotContains(t, body, "Nothing is replaced")
	body = preview(url.Values{"template": {"network"}, "kind": {"apply"}})
	require.Contains(t, body, "Choose an environment to see who decides.")

	// A preview writes nothing.
	before := lifecycleTotals(t, app)
	for range 3 {
		preview(network(staging, "apply", "4"))
	}
	require.Equal(t, before, lifecycleTotals(t, app))

	// A change of an existing workspace: the cost after, and what it adds; a destroy of
	// it needs an owner and takes its cost away.
	id := app.RequestRun(t, operator, url.Values{"template": {"network"}, "environment": {dev}, "workspace": {"preview-net"}, "kind": {"apply"},
		"inputs.name": {"preview-net"}, "inputs.subnet_count": {"2"}})
	waitForState(t, app, id, run.Succeeded)
	body = preview(network(dev, "apply", "3"))
	require.Contains(t, body, "$13.50 a month (+$4.50 from now)")
	body = preview(network(dev, "destroy", "2"))
	require.Contains(t, body, "Risk 3</strong> (")
	require.Contains(t, body, "an owner, not the requester, freshly authenticated, typing DESTROY")
	require.Contains(t, body, "is destroyed.")
	require.Contains(t, body, "$0.00 a month (-$9.00 from now)")

	// The form draws the preview with itself (it works without JavaScript, and after a
	// failed submit with what was submitted).
	page := webtest.ReadBody(t, app.Get(t, operator, paths.ChangeWorkspace("network", waitForState(t, app, id, run.Succeeded).WorkspaceID)))
	require.Contains(t, page, `data-testid="request-preview"`)
	require.Contains(t, page, "$9.00 a month (the same as now)")

	// Who may not ask.
	viewer := app.LoggedIn(t, "viewer@acme.test")
	form := network(dev, "apply", "3")
	form.Set("_csrf", app.CSRF(t, viewer))
	resp := app.PostForm(t, viewer, "/requests/preview", form)
	webtest.ReadBody(t, resp)
	require.Equal(t, http.StatusForbidden, resp.StatusCode)
	form.Del("_csrf")
	resp = app.PostForm(t, operator, "/requests/preview", form)
	webtest.ReadBody(t, resp)
	require.Equal(t, http.StatusForbidden, resp.StatusCode, "no CSRF token")
}

// lifecycleTotals counts what a request writes: workspaces, runs, artifacts, audit events.
func lifecycleTotals(t *testing.T, app *webtest.App) [4]int64 {
	t.Helper()
	var out [4]int64
	for i, table := range []string{"workspaces", "runs", "artifacts", "audit_events"} {
		require.NoError(t, app.DB.Raw("SELECT count(*) FROM "+table).Scan(&out[i]).Error)
	}
	return out
}
