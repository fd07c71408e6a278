package modules_test

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"testing"

	"github.com/stretchr/testify/require"
	"gorm.io/gorm"

	"gantry/models/bundle"
	"gantry/models/db/dbtest"
	"gantry/models/modules"
	"gantry/models/modules/modulestest"
)

func TestMain(m *testing.M) { os.Exit(dbtest.Main(m)) }

const (
	labels  = "registry.acme.example/platform/labels/sandbox"
	version = "1.0.0"
	key     = "platform/labels/sandbox/1.0.0"
)

// shipped is the labels module's archive as the catalog ships it.
func shipped(t *testing.T) []byte {
	t.Helper()
	data, err := os.ReadFile("../../catalog/modules/labels-1.0.0.tar.gz")
	require.NoError(t, err)
	return data
}

func kept(t *testing.T, gdb *gorm.DB) []map[string]any {
	t.Helper()
	var rows []map[string]any
	require.NoError(t, gdb.Raw("SELECT sha256, package, version, location, size FROM module_archives ORDER BY sha256").Scan(&rows).Error)
	return rows
}

// TestRegistryModuleIsFetchedOnce: the registry protocol (discovery, a download answer
// with a relative X-Terraform-Get, the archive over https) is followed once; the
// archive is kept by its sha256, and every later read, this replica's or another's,
// comes from the store.
func TestRegistryModuleIsFetchedOnce(t *testing.T) {
	t.Parallel()
	gdb := dbtest.New(t)
	archive := shipped(t)
	sum := bundle.Digest(archive)
	reg := modulestest.NewRegistry(t, map[string][]byte{key: archive})
	a := modules.New(gdb, reg.Client())

	got, err := a.Archive(t.Context(), labels, version, sum)
	require.NoError(t, err)
	require.Equal(t, archive, got)
	require.Equal(t, 1, reg.Hits("/.well-known/terraform.json"))
	require.Equal(t, 1, reg.Hits("/v1/modules/"+key+"/download"))
	require.Equal(t, 1, reg.Hits(modulestest.ArchivePath(key)))
	require.Equal(t, []map[string]any{{"sha256": sum, "package": labels, "version": version, "size": int32(len(archive)),
		"location": "https://registry.acme.example" + modulestest.ArchivePath(key)}}, kept(t, gdb), "the location is kept without its query")

	got, err = a.Archive(t.Context(), labels, version, sum)
	require.NoError(t, err)
	require.Equal(t, archive, got)
	// Another replica, whose client reaches nothing, reads the same row.
	dead := httptest.NewTLSServer(http.NotFoundHandler())
	dead.Close()
	got, err = modules.New(gdb, modulestest.ClientFor(dead)).Archive(t.Context(), labels, version, sum)
	require.NoError(t, err)
	require.Equal(t, archive, got)
	require.Equal(t, 3, reg.Requests(), "fetched once")
}

// TestJSONLocationAndHTTPSSource: a registry answering its location in JSON, and an
// https source fetched directly.
func TestJSONLocationAndHTTPSSource(t *testing.T) {
	t.Parallel()
	archive := shipped(t)
	reg := modulestest.NewRegistry(t, map[string][]byte{key: archive})
	reg.JSONLocation = true
	got, err := modules.New(dbtest.New(t), reg.Client()).Archive(t.Context(), labels, version, bundle.Digest(archive))
	require.NoError(t, err)
	require.Equal(t, archive, got)

	direct := "https://modules.acme.example" + modulestest.ArchivePath(key) + "?archive=tar.gz"
	got, err = modules.New(dbtest.New(t), reg.Client()).Archive(t.Context(), direct, "", bundle.Digest(archive))
	require.NoError(t, err)
	require.Equal(t, archive, got)
	require.Equal(t, 2, reg.Hits(modulestest.ArchivePath(key)))
}

// TestChangedArchiveIsRefused: the registry serves another archive under the pinned
// version; it is refused, naming the module, where it came from and both sha256, and
// nothing is kept.
func TestChangedArchiveIsRefused(t *testing.T) {
	t.Parallel()
	gdb := dbtest.New(t)
	archive := shipped(t)
	changed := append(append([]byte(nil), archive...), 0)
	reg := modulestest.NewRegistry(t, map[string][]byte{key: changed})

	_, err := modules.New(gdb, reg.Client()).Archive(t.Context(), labels, version, bundle.Digest(archive))
	require.EqualError(t, err, fmt.Sprintf("module %s %s: the archive fetched from https://registry.acme.example%s has %s, not the allowlisted %s; "+
		"it was refused and nothing was kept", labels, version, modulestest.ArchivePath(key), bundle.Digest(changed), bundle.Digest(archive)))
	require.True(t, modules.IsMismatch(err))
	require.Empty(t, kept(t, gdb))
}

// TestTamperedStoreIsRefused: a kept archive whose content changed underneath is
// refused at the next read, and not fetched again over it.
func TestTamperedStoreIsRefused(t *testing.T) {
	t.Parallel()
	gdb := dbtest.New(t)
	archive := shipped(t)
	sum := bundle.Digest(archive)
	reg := modulestest.NewRegistry(t, map[string][]byte{key: archive})
	a := modules.New(gdb, reg.Client())
	_, err := a.Archive(t.Context(), labels, version, sum)
	require.NoError(t, err)

	evil := []byte("not the module")
	require.NoError(t, gdb.Exec("UPDATE module_archives SET content = ?, size = ? WHERE sha256 = ?", evil, len(evil), sum).Error)
	_, err = a.Archive(t.Context(), labels, version, sum)
	require.EqualError(t, err, fmt.Sprintf("module %s %s: the kept archive %s now has %s: the store was changed underneath, so it is refused "+
		"(an operator must delete the row for Gantry to fetch it again)", labels, version, sum, bundle.Digest(evil)))
	require.Equal(t, 3, reg.Requests(), "not fetched again")
}

// TestRefusedLocations: what Gantry does not fetch, in words.
func TestRefusedLocations(t *testing.T) {
	t.Parallel()
	archive := shipped(t)
	sum := bundle.Digest(archive)
	for name, tc := range map[string]struct {
		handler http.HandlerFunc
		want    string
	}{
		"git location": {func(w http.ResponseWriter, r *http.Request) {
			registryAnswer(w, r, "git::https://github.com/acme/labels?ref=v1.0.0")
		}, `the registry hands out a "git::" location, which Gantry does not fetch: only https archives (zip or tar.gz)`},
		"http location": {func(w http.ResponseWriter, r *http.Request) {
			registryAnswer(w, r, "http://registry.acme.example/a.tar.gz")
		}, "the archive's location http://registry.acme.example/a.tar.gz is not https: Gantry fetches modules over https only"},
		"redirect to http": {func(w http.ResponseWriter, r *http.Request) {
			if r.URL.Path == "/a.tar.gz" {
				http.Redirect(w, r, "http://elsewhere.example/a.tar.gz?sig=secret", http.StatusFound)
				return
			}
			registryAnswer(w, r, "/a.tar.gz")
		}, "fetching https://registry.acme.example/a.tar.gz: a redirect to http://elsewhere.example/a.tar.gz: only https is followed"},
		"unknown version": {func(w http.ResponseWriter, r *http.Request) {
			registryAnswer(w, r, "")
		}, "asking https://registry.acme.example/v1/modules/platform/labels/sandbox/1.0.0/download: the registry has no such module or version (404)"},
		"no module registry": {func(w http.ResponseWriter, r *http.Request) {
			fmt.Fprint(w, `{"providers.v1": "/v1/providers/"}`)
		}, "service discovery at https://registry.acme.example/.well-known/terraform.json: registry.acme.example offers no module registry (modules.v1)"},
		"too large": {func(w http.ResponseWriter, r *http.Request) {
			if r.URL.Path == "/a.tar.gz" {
				w.Header().Set("Content-Length", "9000000")
				w.WriteHeader(http.StatusOK)
				return
			}
			registryAnswer(w, r, "/a.tar.gz")
		}, "fetching https://registry.acme.example/a.tar.gz: the archive is 9000000 bytes, more than 8388608"},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			srv := httptest.NewTLSServer(tc.handler)
			defer srv.Close()
			_, err := modules.New(dbtest.New(t), modulestest.ClientFor(srv)).Archive(t.Context(), labels, version, sum)
			require.EqualError(t, err, "module "+labels+" "+version+": "+tc.want)
		})
	}
}

// registryAnswer answers discovery and the download request with location ("": 404).
func registryAnswer(w http.ResponseWriter, r *http.Request, location string) {
	switch {
	case r.URL.Path == "/.well-known/terraform.json":
		fmt.Fprint(w, `{"modules.v1": "https://registry.acme.example/v1/modules"}`)
	case location == "":
		http.NotFound(w, r)
	default:
		w.Header().Set("X-Terraform-Get", location)
		w.WriteHeader(http.StatusNoContent)
	}
}
