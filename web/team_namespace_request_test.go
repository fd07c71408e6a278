package web_test

import (
	"net/url"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"gantry/cmd/gantry/webtest"
	"gantry/models/bundle"
	"gantry/models/run"
)

// A team namespace requested through the portal is generated in its place: the module
// gets the run's workspace and environment ids (gantry_workspace_id,
// gantry_environment_id), which no form field can set, and requires the real
// hashicorp/kubernetes provider its lock file pins.
func TestTeamNamespaceRequestCarriesItsPlace(t *testing.T) {
	t.Parallel()
	app := webtest.Start(t)
	operator := app.LoggedIn(t, "operator@acme.test")
	dev := app.OrgEnvironmentID(t, "acme", "development")
	form := url.Values{"template": {"team-namespace"}, "environment": {dev}, "workspace": {"payments-ns"}, "kind": {"plan_only"},
		"new_workspace": {"true"}, "inputs.name": {"payments"}, "inputs.group": {"team-payments"}}

	bad := url.Values{}
	for k, v := range form {
		bad[k] = v
	}
	bad.Set("inputs.gantry_environment_id", "env-other")
	bad.Set("_csrf", app.CSRF(t, operator))
	body := webtest.ReadBody(t, app.PostForm(t, operator, "/requests", bad))
	require.Contains(t, body, `data-testid="error-inputs.gantry_environment_id"`, "an id Gantry sets is no input")

	runID := app.RequestRun(t, operator, form)
	var r run.Run
	require.NoError(t, app.DB.Where("id = ?", runID).Take(&r).Error)
	data, _, err := app.System.Artifacts.Get(t.Context(), r.OrganizationID, r.ConfigArtifactID)
	require.NoError(t, err)
	b, err := bundle.FromTar(data)
	require.NoError(t, err)
	main := string(b.Files["main.tf"])
	require.Contains(t, main, `  gantry_environment_id = "`+dev+`"`+"\n")
	require.Contains(t, main, `  gantry_workspace_id   = "`+r.WorkspaceID+`"`+"\n")
	require.Contains(t, main, "provider \"kubernetes\" {}\n")
	require.False(t, strings.Contains(main, "sandbox"), main)
	require.Contains(t, string(b.Files[".terraform.lock.hcl"]), `provider "registry.opentofu.org/hashicorp/kubernetes"`)
}

// A template whose resources have no price says so on its page, rather than an empty
// table a reader takes for "free"; a priced one keeps its table.
func TestTemplateWithoutPricesSaysNoPrice(t *testing.T) {
	t.Parallel()
	app := webtest.Start(t)
	viewer := app.LoggedIn(t, "viewer@acme.test")
	page := webtest.ReadBody(t, app.Get(t, viewer, "/catalog/team-namespace"))
	require.Contains(t, page, `data-testid="no-prices"`)
	require.NotContains(t, page, `data-testid="prices"`)
	page = webtest.ReadBody(t, app.Get(t, viewer, "/catalog/bucket"))
	require.Contains(t, page, `data-testid="prices"`)
	require.NotContains(t, page, `data-testid="no-prices"`)
}
