package web_test

import (
	"net/http"
	"net/url"
	"testing"

	"github.com/stretchr/testify/require"

	"gantry/cmd/gantry/webtest"
)

// TestExecutorPerEnvironment: an environment names the executor of its jobs; a request
// into an environment whose executor this Gantry does not offer is a field error, and
// admins see every executor with its health.
func TestExecutorPerEnvironment(t *testing.T) {
	t.Parallel()
	app := webtest.Start(t)
	admin := app.LoggedIn(t, "admin@acme.test")
	staging := app.OrgEnvironmentID(t, "acme", "staging")
	resp := app.PostForm(t, admin, "/environments/"+staging, url.Values{"_csrf": {app.CSRF(t, admin)}, "name": {"staging"}, "tier": {"staging"},
		"requires_approval": {"off", "on"}, "executor": {"tofu/oci"}})
	webtest.ReadBody(t, resp)
	require.Equal(t, http.StatusSeeOther, resp.StatusCode)
	resp = app.PostForm(t, admin, "/environments/"+staging, url.Values{"_csrf": {app.CSRF(t, admin)}, "name": {"staging"}, "tier": {"staging"},
		"executor": {"docker"}})
	body := webtest.ReadBody(t, resp)
	require.Equal(t, http.StatusUnprocessableEntity, resp.StatusCode)
	require.Contains(t, body, `data-testid="error-executor"`)

	operator := app.LoggedIn(t, "operator@acme.test")
	before := countLifecycle(t, app)
	resp = app.PostForm(t, operator, "/requests", url.Values{"_csrf": {app.CSRF(t, operator)}, "template": {"bucket"}, "environment": {staging},
		"workspace": {"w"}, "kind": {"apply"}, "inputs.name": {"some-bucket"}})
	body = webtest.ReadBody(t, resp)
	require.Equal(t, http.StatusUnprocessableEntity, resp.StatusCode)
	require.Contains(t, body, "runs jobs on the tofu/oci executor, which this Gantry does not offer")
	require.Equal(t, before, countLifecycle(t, app))

	page := webtest.ReadBody(t, app.Get(t, admin, "/executors"))
	require.Contains(t, page, `data-testid="executor-mock"`)
	require.Contains(t, page, `data-testid="default-executor"`)
	require.Contains(t, page, "SIMULATED")
	require.Contains(t, page, "healthy")
	resp = app.Get(t, operator, "/executors")
	webtest.ReadBody(t, resp)
	require.Equal(t, http.StatusForbidden, resp.StatusCode)
}
