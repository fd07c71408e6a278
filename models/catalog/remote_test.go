package catalog_test

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"context"
	"errors"
	"os"
	"sort"
	"strings"
	"testing"
	"testing/fstest"

	"github.com/stretchr/testify/require"

	"gantry/models/bundle"
	"gantry/models/catalog"
	"gantry/models/errs"
	"gantry/models/runport"
)

// tarGz is a gzip-compressed tar of files (path -> body), in path order.
func tarGz(t *testing.T, files map[string]string) []byte {
	t.Helper()
	names := make([]string, 0, len(files))
	for n := range files {
		names = append(names, n)
	}
	sort.Strings(names)
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	tw := tar.NewWriter(zw)
	for _, n := range names {
		require.NoError(t, tw.WriteHeader(&tar.Header{Name: n, Mode: 0o644, Size: int64(len(files[n])), Typeflag: tar.TypeReg}))
		_, err := tw.Write([]byte(files[n]))
		require.NoError(t, err)
	}
	require.NoError(t, tw.Close())
	require.NoError(t, zw.Close())
	return buf.Bytes()
}

const (
	netSource = "https://modules.example/net-1.0.0.tar.gz//modules/cidr"
	netPkg    = "https://modules.example/net-1.0.0.tar.gz"
)

// netModule is a fetched module: modules/cidr calls ../common inside its archive;
// examples/ calls the registry, but nothing loads it.
var netModule = map[string]string{
	"modules/cidr/main.tf":   "module \"common\" {\n  source = \"../common\"\n}\n\noutput \"cidr\" {\n  value = \"10.0.0.0/16\"\n}\n",
	"modules/common/main.tf": "output \"ok\" {\n  value = true\n}\n",
	"examples/x/main.tf":     "module \"x\" {\n  source  = \"acme/x/aws\"\n  version = \"1.0.0\"\n}\n",
	"README.md":              "# net\n",
}

// withNetCaller adds templates/<name>, calling netSource from a subdirectory, and an
// allowlist pinning archive to m.
func withNetCaller(t *testing.T, m fstest.MapFS, name string, archive []byte) fstest.MapFS {
	t.Helper()
	withFixture(m, name, "module \"inner\" {\n  source = \"./inner\"\n}\n")
	m["templates/"+name+"/module/inner/main.tf"] = &fstest.MapFile{Data: []byte("module \"net\" {\n  source = \"" + netSource + "\"\n}\n\noutput \"x\" {\n  value = module.net.cidr\n}\n")}
	m["allowlist.yaml"] = &fstest.MapFile{Data: []byte("modules:\n  - source: " + netSource + "\n    sha256: " + bundle.Digest(archive) + "\n")}
	return m
}

// fakeArchives hands out archives by package and records what was asked.
type fakeArchives struct {
	archives map[string][]byte
	err      error
	asked    []string
}

func (f *fakeArchives) Archive(_ context.Context, pkg, version, sum string) ([]byte, error) {
	f.asked = append(f.asked, pkg+" "+version+" "+sum)
	return f.archives[pkg], f.err
}

// TestFetchedModuleBecomesLocal: the archive of an allowlisted https module, fetched
// through RunCatalog.Modules, goes into the bundle under the template's module
// directory; the call points at it by a relative path and the archive's //subdir; what
// OpenTofu would not load is left out; without the archive, or with another one,
// generation refuses.
func TestFetchedModuleBecomesLocal(t *testing.T) {
	t.Parallel()
	archive := tarGz(t, netModule)
	c := load(t, withNetCaller(t, realCatalog(t), "netcall", archive), nil)
	e, err := c.Get("netcall")
	require.NoError(t, err)
	in := catalog.GenerateInput{WorkspaceID: "ws-1", Inputs: map[string]any{"label": "a"}, StateAddress: stateURL}

	_, err = e.Generate(in)
	require.EqualError(t, err, "generating netcall: module "+netSource+": its archive was not fetched before generation")
	in.Modules = map[string][]byte{netSource: tarGz(t, map[string]string{"modules/cidr/main.tf": "#"})}
	_, err = e.Generate(in)
	require.ErrorContains(t, err, "generating netcall: module "+netSource+": the archive handed to generation has sha256:")
	require.ErrorContains(t, err, "not the allowlisted "+bundle.Digest(archive)+"; refused")

	fetcher := &fakeArchives{archives: map[string][]byte{netPkg: archive}}
	rc := catalog.ForRuns(c).WithArchives(fetcher)
	mods, err := rc.Modules(t.Context(), "netcall")
	require.NoError(t, err)
	require.Equal(t, []string{netPkg + "  " + bundle.Digest(archive)}, fetcher.asked, "the package, no version, the pinned sha256")
	b, err := rc.Generate(runport.Validated{Template: "netcall", Inputs: map[string]any{"label": "a"}, Modules: mods}, "ws-1", stateURL)
	require.NoError(t, err)
	dir := "modules/netcall/.modules/modules.example-net-1.0.0.tar.gz-" + strings.TrimPrefix(bundle.Digest(archive), "sha256:")[:12]
	var names []string
	for n := range b.Files {
		if strings.HasPrefix(n, "modules/netcall/.modules/") {
			names = append(names, n)
		}
	}
	sort.Strings(names)
	require.Equal(t, []string{dir + "/README.md", dir + "/modules/cidr/main.tf", dir + "/modules/common/main.tf"}, names)
	require.Equal(t, netModule["modules/cidr/main.tf"], string(b.Files[dir+"/modules/cidr/main.tf"]))
	require.Equal(t, "module \"net\" {\n  source = \"../.modules/"+strings.TrimPrefix(dir, "modules/netcall/.modules/")+"/modules/cidr\"\n}\n\noutput \"x\" {\n  value = module.net.cidr\n}\n",
		string(b.Files["modules/netcall/inner/main.tf"]))
}

// TestModulesRefusalsAreFieldMessages: a module that cannot be had or used makes the
// template unusable for now, in words on its "template" field; a cancelled request is
// not the module's fault.
func TestModulesRefusalsAreFieldMessages(t *testing.T) {
	t.Parallel()
	archive := tarGz(t, netModule)
	m := withNetCaller(t, realCatalog(t), "netcall", archive)
	c := load(t, m, nil)
	field := func(err error) string {
		v, ok := errs.AsValidation(err)
		require.True(t, ok, "%v", err)
		return v.Fields["template"]
	}
	_, err := catalog.ForRuns(c).Modules(t.Context(), "netcall")
	require.Equal(t, "Template netcall cannot be used now: module "+netSource+" must be fetched, and this Gantry fetches no modules.", field(err))

	_, err = catalog.ForRuns(c).WithArchives(&fakeArchives{err: errors.New("module x: the archive fetched from y has a, not the allowlisted b")}).Modules(t.Context(), "netcall")
	require.Equal(t, "Template netcall cannot be used now: module x: the archive fetched from y has a, not the allowlisted b.", field(err))

	cancelled, cancel := context.WithCancel(t.Context())
	cancel()
	_, err = catalog.ForRuns(c).WithArchives(&fakeArchives{err: context.Canceled}).Modules(cancelled, "netcall")
	require.ErrorIs(t, err, context.Canceled)

	// A fetched module carrying a credential, or requiring a provider the template's
	// lock file does not pin, is refused as a template's own module would be.
	for body, want := range map[string]string{
		"provider \"sandbox\" {\n  api_token = \"x\"\n}\n": `provider "sandbox" sets api_token: templates never carry credentials`,
		"terraform {\n  required_providers {\n    aws = {\n      source  = \"hashicorp/aws\"\n      version = \"5.0.0\"\n    }\n  }\n}\n": "provider registry.opentofu.org/hashicorp/aws 5.0.0 has no entry in .terraform.lock.hcl",
	} {
		bad := tarGz(t, map[string]string{"modules/cidr/main.tf": netModule["modules/common/main.tf"] + "\noutput \"cidr\" {\n  value = 1\n}\n" + body})
		c := load(t, withNetCaller(t, realCatalog(t), "netcall", bad), nil)
		_, err := catalog.ForRuns(c).WithArchives(&fakeArchives{archives: map[string][]byte{netPkg: bad}}).Modules(t.Context(), "netcall")
		require.Contains(t, field(err), want)
	}
}

// TestPinCoversTheAllowlist: the pinned digest of a template calling an allowlisted
// module covers the allowlisted sha256, so another archive under the same template
// version is a changed template; a template without such calls keeps its tree's digest.
func TestPinCoversTheAllowlist(t *testing.T) {
	t.Parallel()
	pins := &catalog.MemoryPins{}
	firstLoad := load(t, withNetCaller(t, realCatalog(t), "netcall", tarGz(t, netModule)), pins)
	require.Empty(t, entry(t, firstLoad, "netcall").Refused)
	other := tarGz(t, map[string]string{"modules/cidr/main.tf": "output \"cidr\" {\n  value = 1\n}\n"})
	again := entry(t, load(t, withNetCaller(t, realCatalog(t), "netcall", other), pins), "netcall")
	require.Contains(t, again.Refused, "module tree of netcall 1.0.0 changed since it was pinned")
	require.Equal(t, entry(t, load(t, realCatalog(t), nil), "network").ModuleDigest, entry(t, firstLoad, "network").ModuleDigest)
}

// TestVendoredAndReservedRefusals: a vendored archive that is not the pinned one
// breaks the allowlist (the load fails); a template may not bring its own .modules/.
func TestVendoredAndReservedRefusals(t *testing.T) {
	t.Parallel()
	m := realCatalog(t)
	m["allowlist.yaml"] = &fstest.MapFile{Data: []byte(strings.Replace(string(m["allowlist.yaml"].Data), "sha256:de", "sha256:ed", 1))}
	_, err := catalog.Load(t.Context(), m, &catalog.MemoryPins{})
	require.ErrorContains(t, err, "allowlist.yaml: modules[0] (registry.acme.example/platform/labels/sandbox): the vendored archive modules/labels-1.0.0.tar.gz has sha256:de")

	m = withFixture(realCatalog(t), "own", "")
	m["templates/own/module/.modules/x/main.tf"] = &fstest.MapFile{Data: []byte("output \"x\" {\n  value = 1\n}\n")}
	require.Equal(t, "module/.modules/x/main.tf: module/.modules/ is where Gantry puts the modules it fetches; a template may not have it",
		entry(t, load(t, m, nil), "own").Refused)
}

// TestGenerateTeamBucket: the shipped example calls the allowlisted labels module,
// whose archive ships vendored: it generates with no fetch, the module's files (from
// catalog/modules/labels) under modules/team-bucket/.modules/, and no remote source
// or version left in the bundle.
func TestGenerateTeamBucket(t *testing.T) {
	t.Parallel()
	c := load(t, os.DirFS("../../catalog"), nil)
	mods, err := catalog.ForRuns(c).Modules(t.Context(), "team-bucket")
	require.NoError(t, err)
	require.Empty(t, mods, "vendored: nothing to fetch")
	e, err := c.Get("team-bucket")
	require.NoError(t, err)
	inputs, v := e.Template.ValidateInputs(map[string]string{"team": "payments", "name": "invoices", "cost_center": "cc-1042"})
	require.Nil(t, v)
	b, err := e.Generate(catalog.GenerateInput{WorkspaceID: "ws-1", EnvironmentID: "env-1", Inputs: inputs, StateAddress: stateURL})
	require.NoError(t, err)

	archive, err := os.ReadFile("../../catalog/modules/labels-1.0.0.tar.gz")
	require.NoError(t, err)
	dir := "modules/team-bucket/.modules/registry.acme.example-platform-labels-sandbox-" + strings.TrimPrefix(bundle.Digest(archive), "sha256:")[:12]
	for _, name := range []string{"main.tf", "variables.tf", "outputs.tf", "README.md"} {
		src, err := os.ReadFile("../../catalog/modules/labels/" + name)
		require.NoError(t, err)
		require.Equal(t, string(src), string(b.Files[dir+"/"+name]), name)
	}
	main := string(b.Files["modules/team-bucket/main.tf"])
	require.Contains(t, main, "module \"labels\" {\n  source = \"./.modules/"+strings.TrimPrefix(dir, "modules/team-bucket/.modules/")+"\"\n")
	for name, body := range b.Files {
		if strings.HasSuffix(name, ".tf") {
			require.NotContains(t, string(body), "registry.acme.example/platform", name)
			require.NotContains(t, string(body), "version = \"1.0.0\"", name)
		}
	}
}
