package web_test

import (
	"net/http"
	"net/url"
	"strings"
	"testing"
	"testing/fstest"

	"github.com/stretchr/testify/require"

	"gantry/cmd/gantry/webtest"
)

// catalogWith is the shipped catalog plus extra files.
func catalogWith(t testing.TB, extra map[string]string) fstest.MapFS {
	return webtest.CatalogWith(t, extra)
}

// TestRefusedTemplatesAreShownToAdmins: a template with a git:: module source is
// refused at load; admins see it with the reason (file, line, source), others do not,
// and nobody can request it.
func TestRefusedTemplatesAreShownToAdmins(t *testing.T) {
	t.Parallel()
	evil := catalogWith(t, nil)
	manifest := strings.ReplaceAll(string(evil["templates/bucket/template.yaml"].Data), "name: bucket", "name: remote")
	evil["templates/remote/template.yaml"] = &fstest.MapFile{Data: []byte(manifest)}
	evil["templates/remote/.terraform.lock.hcl"] = evil["templates/bucket/.terraform.lock.hcl"]
	for _, f := range []string{"variables.tf", "outputs.tf"} {
		evil["templates/remote/module/"+f] = evil["templates/bucket/module/"+f]
	}
	evil["templates/remote/module/main.tf"] = &fstest.MapFile{Data: []byte(string(evil["templates/bucket/module/main.tf"].Data) +
		"\nmodule \"extra\" {\n  source = \"git::https://example.com/modules.git\"\n}\n")}

	app := webtest.StartWith(t, webtest.Options{CatalogFS: evil})
	admin := app.LoggedIn(t, "admin@acme.test")
	body := webtest.ReadBody(t, app.Get(t, admin, "/catalog"))
	require.Contains(t, body, `data-testid="refused-remote"`)
	require.Contains(t, body, "module/main.tf:")
	require.Contains(t, body, "git::https://example.com/modules.git")
	require.Contains(t, body, `data-testid="template-bucket"`, "the other templates stay usable")

	operator := app.LoggedIn(t, "operator@acme.test")
	body = webtest.ReadBody(t, app.Get(t, operator, "/catalog"))
	require.NotContains(t, body, "refused-remote")
	resp := app.Get(t, operator, "/catalog/remote")
	webtest.ReadBody(t, resp)
	require.Equal(t, http.StatusNotFound, resp.StatusCode)
	resp = app.PostForm(t, operator, "/requests", url.Values{"_csrf": {app.CSRF(t, operator)}, "template": {"remote"},
		"environment": {app.OrgEnvironmentID(t, "acme", "development")}, "workspace": {"w"}, "kind": {"apply"}, "inputs.name": {"remote-bucket"}})
	body = webtest.ReadBody(t, resp)
	require.Equal(t, http.StatusUnprocessableEntity, resp.StatusCode)
	require.Contains(t, body, "no usable template")
}

// TestChangedTemplateTreeIsRefused: a template version whose module tree changed after
// it was pinned (by an earlier start of Gantry on the same database) is refused.
func TestChangedTemplateTreeIsRefused(t *testing.T) {
	t.Parallel()
	first := webtest.Start(t)
	changed := catalogWith(t, map[string]string{"templates/network/module/main.tf": "# edited in place\n" +
		string(catalogWith(t, nil)["templates/network/module/main.tf"].Data)})
	second := webtest.RestartWith(t, first, webtest.Options{CatalogFS: changed})
	admin := second.LoggedIn(t, "admin@acme.test")
	body := webtest.ReadBody(t, second.Get(t, admin, "/catalog"))
	require.Contains(t, body, `data-testid="refused-network"`)
	require.Contains(t, body, "changed since it was pinned")
	require.Contains(t, body, `data-testid="template-postgres"`)
}
