package web_test

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"testing/fstest"

	"github.com/stretchr/testify/require"

	"gantry/cmd/gantry/webtest"
	"gantry/models/authz"
	"gantry/models/bundle"
	"gantry/models/modules/modulestest"
)

const (
	labelsSource = "registry.acme.example/platform/labels/sandbox"
	labelsKey    = "platform/labels/sandbox/1.0.0"
)

// fetchingCatalog is the shipped catalog whose allowlist lists the labels module
// without its vendored copy, so Gantry fetches it; and the shipped archive.
func fetchingCatalog(t testing.TB) (fstest.MapFS, []byte) {
	t.Helper()
	cat := webtest.CatalogWith(t, nil)
	allow := string(cat["allowlist.yaml"].Data)
	require.Contains(t, allow, "    vendored: modules/labels-1.0.0.tar.gz\n")
	cat["allowlist.yaml"] = &fstest.MapFile{Data: []byte(strings.Replace(allow, "    vendored: modules/labels-1.0.0.tar.gz\n", "", 1))}
	return cat, cat["modules/labels-1.0.0.tar.gz"].Data
}

// repacked is the archive with extra appended to one of its files: the same module
// republished, changed, under the same version.
func repacked(t testing.TB, archive []byte, file, extra string) []byte {
	t.Helper()
	zr, err := gzip.NewReader(bytes.NewReader(archive))
	require.NoError(t, err)
	tr := tar.NewReader(zr)
	var out bytes.Buffer
	zw := gzip.NewWriter(&out)
	tw := tar.NewWriter(zw)
	for {
		hdr, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		require.NoError(t, err)
		body, err := io.ReadAll(tr)
		require.NoError(t, err)
		if hdr.Name == file {
			body = append(body, extra...)
			hdr.Size = int64(len(body))
		}
		require.NoError(t, tw.WriteHeader(hdr))
		_, err = tw.Write(body)
		require.NoError(t, err)
	}
	require.NoError(t, tw.Close())
	require.NoError(t, zw.Close())
	return out.Bytes()
}

func teamBucketForm(envID, workspace string) url.Values {
	return url.Values{"template": {"team-bucket"}, "environment": {envID}, "workspace": {workspace}, "kind": {"apply"},
		"inputs.team": {"payments"}, "inputs.name": {"invoices"}, "inputs.cost_center": {"cc-1042"}, "inputs.retention_days": {"30"}}
}

// TestChangedModuleArchiveRefusesTheRun: the registry serves a changed archive of the
// allowlisted labels module under its pinned version. Requesting the team-bucket
// template is refused with the module, the allowlisted sha256 and the one received,
// and nothing is written: no run, no workspace, no artifact, no kept archive, no audit
// event. Once the registry serves the pinned archive again, the same request queues a
// run whose config bundle holds the module, fetched and kept once.
func TestChangedModuleArchiveRefusesTheRun(t *testing.T) {
	t.Parallel()
	cat, archive := fetchingCatalog(t)
	changed := repacked(t, archive, "main.tf", "\nresource \"sandbox_bucket\" \"copy\" {\n  name = \"exfiltrated\"\n}\n")
	reg := modulestest.NewRegistry(t, map[string][]byte{labelsKey: changed})
	app := webtest.StartWith(t, webtest.Options{CatalogFS: cat, ModuleClient: reg.Client()})
	operator := app.LoggedIn(t, "operator@acme.test")
	dev := app.OrgEnvironmentID(t, "acme", "development")
	counts := func() string {
		return fmt.Sprint(countRows(t, app, "SELECT count(*) FROM runs"), countRows(t, app, "SELECT count(*) FROM workspaces WHERE name = 'payments-invoices'"),
			countRows(t, app, "SELECT count(*) FROM artifacts"), countRows(t, app, "SELECT count(*) FROM module_archives"),
			// A token's first use is recorded, whatever it asks for.
			countRows(t, app, "SELECT count(*) FROM audit_events WHERE action <> 'api_token.used'"))
	}
	member := app.NewMember(t, "acme", "Pipeline", authz.RoleOperator, true)
	token := app.Token(t, member, "read", "plan", "apply")
	before := counts()

	form := teamBucketForm(dev, "payments-invoices")
	form.Set("_csrf", app.CSRF(t, operator))
	resp := app.PostForm(t, operator, "/requests", form)
	body := webtest.ReadBody(t, resp)
	require.Equal(t, http.StatusUnprocessableEntity, resp.StatusCode)
	refusal := fmt.Sprintf("Template team-bucket cannot be used now: module %s 1.0.0: the archive fetched from https://registry.acme.example%s has %s, "+
		"not the allowlisted %s; it was refused and nothing was kept.", labelsSource, modulestest.ArchivePath(labelsKey), bundle.Digest(changed), bundle.Digest(archive))
	require.Contains(t, body, refusal)
	// The refused form is drawn again with its preview, which asks the registry again:
	// nothing of a refused archive is kept.
	require.Equal(t, 2, reg.Hits(modulestest.ArchivePath(labelsKey)))
	require.Contains(t, body, "Choose a template that can be used", "the preview points at the template, not at the inputs")
	require.NotContains(t, body, "Fill in the template")

	resp = app.API(t, token, http.MethodPost, "/api/v1/requests", fmt.Sprintf(`{"template": "team-bucket", "environment_id": %q, "workspace": "payments-invoices",
		"inputs": {"team": "payments", "name": "invoices", "cost_center": "cc-1042"}}`, dev))
	body = webtest.ReadBody(t, resp)
	require.Equal(t, http.StatusUnprocessableEntity, resp.StatusCode, body)
	var problem struct {
		Code   string            `json:"code"`
		Fields map[string]string `json:"fields"`
	}
	require.NoError(t, json.Unmarshal([]byte(body), &problem), body)
	require.Equal(t, "INVALID_INPUT", problem.Code, body)
	require.Equal(t, refusal, problem.Fields["template"])
	require.Equal(t, 3, reg.Hits(modulestest.ArchivePath(labelsKey)))
	require.Equal(t, before, counts(), "nothing was written")

	reg.Serve(labelsKey, archive)
	runID := app.RequestRun(t, operator, teamBucketForm(dev, "payments-invoices"))
	var configID string
	require.NoError(t, app.DB.Raw("SELECT config_artifact_id FROM runs WHERE id = ?", runID).Scan(&configID).Error)
	var orgID string
	require.NoError(t, app.DB.Raw("SELECT organization_id FROM runs WHERE id = ?", runID).Scan(&orgID).Error)
	tarball, _, err := app.System.Artifacts.Get(t.Context(), orgID, configID)
	require.NoError(t, err)
	b, err := bundle.FromTar(tarball)
	require.NoError(t, err)
	dir := "modules/team-bucket/.modules/registry.acme.example-platform-labels-sandbox-" + strings.TrimPrefix(bundle.Digest(archive), "sha256:")[:12]
	require.Contains(t, string(b.Files[dir+"/main.tf"]), `name = "${var.team}-${var.name}"`)
	require.Contains(t, string(b.Files["modules/team-bucket/main.tf"]), `source = "./.modules/`)
	require.Equal(t, int64(1), countRows(t, app, "SELECT count(*) FROM module_archives WHERE sha256 = ?", bundle.Digest(archive)))

	// A second request reads the kept archive: the registry is not asked again.
	asked := reg.Requests()
	app.RequestRun(t, operator, teamBucketForm(dev, "ledger"))
	require.Equal(t, asked, reg.Requests())
}
