package catalog_test

import (
	"context"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"testing/fstest"

	"github.com/stretchr/testify/require"

	"gantry/models/catalog"
	"gantry/models/errs"
)

// realCatalog copies the repository's catalog/ into a MapFS that a test may edit.
func realCatalog(t *testing.T) fstest.MapFS {
	t.Helper()
	src := os.DirFS("../../catalog")
	m := fstest.MapFS{}
	err := fs.WalkDir(src, ".", func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		data, err := fs.ReadFile(src, p)
		m[p] = &fstest.MapFile{Data: data}
		return err
	})
	require.NoError(t, err)
	return m
}

// withFixture adds templates/<name> to m: one required string input "label", a
// module whose main.tf is the variable followed by extra, the sandbox provider's
// versions.tf, a local sub-module "inner" and the sandbox lock file.
func withFixture(m fstest.MapFS, name, extra string) fstest.MapFS {
	m["templates/"+name+"/template.yaml"] = &fstest.MapFile{Data: []byte(`name: ` + name + `
version: 1.0.0
title: Fixture
owner: tests
inputs:
  - name: label
    type: string
    required: true
`)}
	m["templates/"+name+"/module/main.tf"] = &fstest.MapFile{Data: []byte("variable \"label\" {\n  type = string\n}\n\n" + extra)}
	m["templates/"+name+"/module/versions.tf"] = m["templates/network/module/versions.tf"]
	m["templates/"+name+"/module/inner/main.tf"] = &fstest.MapFile{Data: []byte("output \"x\" {\n  value = 1\n}\n")}
	m["templates/"+name+"/.terraform.lock.hcl"] = m["templates/network/.terraform.lock.hcl"]
	return m
}

func load(t *testing.T, fsys fs.FS, pins catalog.Pins) *catalog.Catalog {
	t.Helper()
	if pins == nil {
		pins = &catalog.MemoryPins{}
	}
	c, err := catalog.Load(context.Background(), fsys, pins)
	require.NoError(t, err)
	return c
}

func entry(t *testing.T, c *catalog.Catalog, name string) catalog.Entry {
	t.Helper()
	for _, e := range c.All() {
		if e.Template.Name == name {
			return e
		}
	}
	t.Fatalf("no entry %s", name)
	return catalog.Entry{}
}

func TestRealCatalogLoads(t *testing.T) {
	t.Parallel()
	c := load(t, os.DirFS("../../catalog"), nil)
	all := c.All()
	require.Len(t, all, 6)
	want := map[string][]string{
		"bucket":    {"name", "versioning", "retention_days", "region"},
		"bucket-s3": {"name", "versioning"},
		"network":   {"name", "cidr", "subnet_count", "region"},
		"postgres":  {"name", "engine_version", "size", "storage_gb", "backup_retention_days", "network_cidr"},
		// It calls the allowlisted labels module, which ships vendored.
		"team-bucket": {"team", "name", "cost_center", "retention_days"},
		// gantry_workspace_id and gantry_environment_id are module variables Gantry sets.
		"team-namespace": {"name", "group", "cpu", "memory_gib", "pods"},
	}
	var names []string
	for _, e := range all {
		names = append(names, e.Template.Name)
		require.Empty(t, e.Refused, e.Template.Name)
		require.Regexp(t, `^sha256:[0-9a-f]{64}$`, e.ModuleDigest)
		var inputs []string
		for _, in := range e.Template.Inputs {
			inputs = append(inputs, in.Name)
			require.NotEmpty(t, in.Divergence)
		}
		require.Equal(t, want[e.Template.Name], inputs)
		got, err := c.Get(e.Template.Name)
		require.NoError(t, err)
		require.Equal(t, e.ModuleDigest, got.ModuleDigest)
	}
	require.Equal(t, []string{"bucket", "bucket-s3", "network", "postgres", "team-bucket", "team-namespace"}, names)

	pg := entry(t, c, "postgres").Template
	require.Equal(t, "1.1.1", pg.Version)
	require.Equal(t, 60.0, pg.Prices["sandbox_database"])
	require.Equal(t, []string{"sandbox_database"}, pg.Irreversible)
	require.Equal(t, 20.0, pg.Inputs[3].Default, "number defaults are float64")
	require.Equal(t, "16", pg.Inputs[1].Default)
	require.Equal(t, catalog.DivergenceCapacity, pg.Inputs[2].Divergence)

	again := load(t, os.DirFS("../../catalog"), nil)
	for i, e := range again.All() {
		require.Equal(t, all[i].ModuleDigest, e.ModuleDigest, "digest of %s is stable", e.Template.Name)
	}
	require.NotEqual(t, all[0].ModuleDigest, all[1].ModuleDigest)

	_, err := c.Get("nope")
	require.ErrorIs(t, err, errs.ErrNotFound)
}

func TestModuleSources(t *testing.T) {
	t.Parallel()
	const allowlist = `modules:
  - source: registry.example/acme/vpc/sandbox
    version: 1.2.0
    sha256: ` + "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa" + `
  - source: https://modules.example/vpc-1.2.0.zip
    sha256: sha256:` + "bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb" + `
`
	cases := []struct {
		source, version, why string // why empty = accepted
	}{
		{"git::https://example.com/x.git", "", "remote git sources are refused"},
		{"git://example.com/x.git", "", "remote git sources are refused"},
		{"git@github.com:acme/x.git", "", "remote git sources are refused"},
		{"http://example.com/x.zip", "", "plain http sources are refused"},
		{"https://example.com/x.zip", "", "https sources are refused unless listed in allowlist.yaml"},
		{"github.com/acme/x", "", "GitHub and Bitbucket shorthands fetch with git and are refused"},
		{"s3::https://s3.amazonaws.com/bucket/x.zip", "", "bucket sources are refused"},
		{"gcs::https://www.googleapis.com/storage/v1/x", "", "bucket sources are refused"},
		{"hg::https://example.com/x", "", `the "hg::" getter is refused`},
		{"/opt/modules/x", "", "absolute paths are refused"},
		{"../../outside", "", "it points outside the template's module directory"},
		{"../x", "", "it points outside the template's module directory"},
		{"./missing", "", "it points to a directory the template does not contain"},
		{"registry.example/acme/vpc/sandbox", "1.3.0", `version "1.3.0" is not the allowlisted "1.2.0"`},
		{"registry.example/acme/vpc/sandbox", "", `it needs version = "1.2.0", the allowlisted version`},
		{"registry.example/acme/other/sandbox", "1.2.0", "registry module is not in allowlist.yaml"},
		{"acme/vpc/sandbox", "1.2.0", "registry module is not in allowlist.yaml"},
		{"./inner", "", ""},
		{"registry.example/acme/vpc/sandbox", "1.2.0", ""},
		{"https://modules.example/vpc-1.2.0.zip", "", ""},
	}
	m := realCatalog(t)
	m["allowlist.yaml"] = &fstest.MapFile{Data: []byte(allowlist)}
	names := map[string]int{}
	for i, tc := range cases {
		name := "fixture" + string(rune('a'+i))
		names[name] = i
		block := "module \"dep\" {\n  source = \"" + tc.source + "\"\n"
		if tc.version != "" {
			block += "  version = \"" + tc.version + "\"\n"
		}
		withFixture(m, name, block+"}\n")
	}
	c := load(t, m, nil)
	for name, i := range names {
		tc := cases[i]
		e := entry(t, c, name)
		if tc.why == "" {
			require.Empty(t, e.Refused, tc.source)
			continue
		}
		// The module block starts on line 5, its source on line 6.
		require.Equal(t, `module/main.tf:6: module source "`+tc.source+`" is not allowed: `+tc.why, e.Refused, tc.source)
		_, err := c.Get(name)
		require.ErrorIs(t, err, errs.ErrNotFound)
	}
	for _, real := range []string{"bucket", "network", "postgres", "team-namespace"} {
		_, err := c.Get(real)
		require.NoError(t, err)
	}
}

func TestModuleRefusals(t *testing.T) {
	t.Parallel()
	m := realCatalog(t)
	withFixture(m, "creds", "provider \"sandbox\" {\n  region = \"eu-west\"\n  api_token = \"abc\"\n}\n")
	withFixture(m, "nested", "provider \"sandbox\" {\n  assume_role {\n    secret_key = \"abc\"\n  }\n}\n")
	withFixture(m, "computed", "locals {\n  s = \"./inner\"\n}\nmodule \"dep\" {\n  source = \"${local.s}\"\n}\n")
	withFixture(m, "concat", "module \"dep\" {\n  source = \"./in${\"ner\"}\"\n}\n")
	withFixture(m, "jsonfile", "")
	m["templates/jsonfile/module/extra.tf.json"] = &fstest.MapFile{Data: []byte(`{"module":{"x":{"source":"git::https://e.com/x"}}}`)}
	withFixture(m, "tofufile", "")
	m["templates/tofufile/module/inner/override.tofu"] = &fstest.MapFile{Data: []byte("module \"x\" {\n  source = \"git::https://e.com/x\"\n}\n")}
	withFixture(m, "nolock", "")
	delete(m, "templates/nolock/.terraform.lock.hcl")
	withFixture(m, "badhcl", "resource \"x\" {\n")
	withFixture(m, "novar", "")
	m["templates/novar/module/main.tf"] = &fstest.MapFile{Data: []byte("variable \"other\" {}\n")}

	c := load(t, m, nil)
	want := map[string]string{
		"creds":    `module/main.tf:7: provider "sandbox" sets api_token: templates never carry credentials (the runner's environment provides them)`,
		"nested":   `module/main.tf:7: provider "sandbox" sets secret_key: templates never carry credentials`,
		"computed": `module/main.tf:9: module "dep": source must be a literal string`,
		"concat":   `module/main.tf:6: module "dep": source must be a literal string`,
		"jsonfile": `module/extra.tf.json: JSON configuration is not supported, write it as .tf`,
		"tofufile": `module/inner/override.tofu:2: module source "git::https://e.com/x" is not allowed: remote git sources are refused`,
		"nolock":   `it has no .terraform.lock.hcl: providers must be locked`,
		"badhcl":   `module/main.tf:5`,
		"novar":    `input label has no variable "label" in module/; module variable "other" has no default and no input in template.yaml`,
	}
	for name, reason := range want {
		require.Contains(t, entry(t, c, name).Refused, reason, name)
	}
}

func TestSymlinkInModuleIsRefused(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	for p, f := range withFixture(realCatalog(t), "linked", "") {
		full := filepath.Join(dir, filepath.FromSlash(p))
		require.NoError(t, os.MkdirAll(filepath.Dir(full), 0o755))
		require.NoError(t, os.WriteFile(full, f.Data, 0o644))
	}
	require.NoError(t, os.Symlink("/etc/hostname", filepath.Join(dir, "templates/linked/module/host.tf")))
	c := load(t, os.DirFS(dir), nil)
	require.Contains(t, entry(t, c, "linked").Refused, "module/host.tf is not a regular file")
	require.Empty(t, entry(t, c, "network").Refused)
}

func TestPinning(t *testing.T) {
	t.Parallel()
	pins := &catalog.MemoryPins{}
	first := load(t, realCatalog(t), pins)
	network := entry(t, first, "network")
	require.Empty(t, network.Refused)

	// A description change leaves the module tree, and so the pin, alone.
	m := realCatalog(t)
	manifest := m["templates/network/template.yaml"]
	m["templates/network/template.yaml"] = &fstest.MapFile{Data: []byte(strings.Replace(string(manifest.Data),
		"description: A private network", "description: A better described private network", 1))}
	second := load(t, m, pins)
	require.Empty(t, entry(t, second, "network").Refused)
	require.Equal(t, network.ModuleDigest, entry(t, second, "network").ModuleDigest)
	require.Contains(t, entry(t, second, "network").Template.Description, "better described")

	// One changed byte in the module is a changed tree.
	tf := m["templates/network/module/main.tf"].Data
	changed := append([]byte(nil), tf...)
	changed[2] = 'B' // inside the leading comment: still valid HCL
	m["templates/network/module/main.tf"] = &fstest.MapFile{Data: changed}
	third := load(t, m, pins)
	now := entry(t, third, "network")
	require.NotEqual(t, network.ModuleDigest, now.ModuleDigest)
	require.Equal(t, "module tree of network 1.1.1 changed since it was pinned (pinned "+network.ModuleDigest+
		", now "+now.ModuleDigest+"); publish it as a new version", now.Refused)
	_, err := third.Get("network")
	require.ErrorIs(t, err, errs.ErrNotFound)
	for _, name := range []string{"bucket", "postgres"} {
		_, err := third.Get(name)
		require.NoError(t, err, name)
	}

	// The lock file is part of the tree too.
	m = realCatalog(t)
	m["templates/bucket/.terraform.lock.hcl"] = &fstest.MapFile{Data: append(m["templates/bucket/.terraform.lock.hcl"].Data, '\n')}
	require.Contains(t, entry(t, load(t, m, pins), "bucket").Refused, "changed since it was pinned")

	// A fresh set of pins accepts the edited tree: it is a first load.
	require.Empty(t, entry(t, load(t, m, &catalog.MemoryPins{}), "bucket").Refused)
}

func TestManifestErrors(t *testing.T) {
	t.Parallel()
	edit := func(m fstest.MapFS, name, old, new string) {
		p := "templates/" + name + "/template.yaml"
		s := string(m[p].Data)
		if !strings.Contains(s, old) {
			t.Fatalf("%s has no %q", p, old)
		}
		m[p] = &fstest.MapFile{Data: []byte(strings.Replace(s, old, new, 1))}
	}
	cases := []struct {
		template, old, new, reason string
	}{
		{"network", "    required: true\n", "    requried: true\n", `template.yaml: line 10: unknown key "requried"`},
		{"network", "owner: platform-networking\n", "owner: platform-networking\ncolour: blue\n", `template.yaml: line 6: unknown key "colour"`},
		{"network", "    type: number\n", "    type: integer\n", `template.yaml: inputs.subnet_count: type "integer" is not one of string, number, bool`},
		{"network", "    default: 2\n", "    default: 9\n", `template.yaml: inputs.subnet_count: default 9 is not allowed: Enter a number from 1 to 6.`},
		{"network", "    default: 2\n", "    default: two\n", `template.yaml: inputs.subnet_count: default two: is not a number`},
		{"network", "    default: 2\n", "    default: 2.5\n", `template.yaml: inputs.subnet_count: default 2.5 of an integer input is not a whole number`},
		{"network", "    label: Network name\n", "    label: Network name\n    integer: true\n", `template.yaml: inputs.name: integer applies only to number inputs`},
		{"network", "    label: Network name\n", "    label: " + strings.Repeat("x", 61) + "\n", `template.yaml: inputs.name: label must be one line of at most 60 characters`},
		{"network", "    default: eu-west\n", "    default: mars\n", `template.yaml: inputs.region: default mars is not one of the enum values eu-west, eu-central, us-east`},
		{"network", "    default: 10.20.0.0/16\n", "    default: 192.168.0.0/16\n", `template.yaml: inputs.cidr: default "192.168.0.0/16" does not match pattern`},
		{"network", "    divergence: count\n", "    divergence: sometimes\n", `template.yaml: inputs.subnet_count: divergence "sometimes" is not one of fixed, capacity, count, retention, scaling`},
		{"network", `pattern: "^[a-z][a-z0-9-]{2,30}$"`, `pattern: "^[a-z"`, `template.yaml: inputs.name: pattern does not compile`},
		{"network", "name: network\n", "name: netwerk\n", `template.yaml: name "netwerk" does not match its directory "network"`},
		{"network", "version: 1.1.1\n", "version: one\n", `template.yaml: version "one" is not a semantic version like 1.2.3`},
		{"network", "  - name: cidr\n", "  - name: Cidr\n", `template.yaml: inputs.Cidr: name "Cidr" must match`},
		{"network", "  - name: cidr\n", "  - name: name\n", `template.yaml: inputs.name: the name is used twice`},
		{"network", "  sandbox_subnet: 4.5\n", "  subnet: 4.5\n", `template.yaml: prices: "subnet" is not a resource type`},
		{"postgres", "irreversible: [sandbox_database]", "irreversible: [Database]", `template.yaml: irreversible: "Database" is not a resource type`},
		{"postgres", "irreversible: [sandbox_database]", "irreversible: [sandbox_database]\norg_scoped: [Policy]", `template.yaml: org_scoped: "Policy" is not a resource type`},
		{"postgres", "irreversible: [sandbox_database]", "irreversible: [sandbox_database]\norg_policy: [sandbox_org_policy]", `template.yaml: org_policy: "sandbox_org_policy" must also be listed in org_scoped`},
		{"bucket", "    default: true\n", "    default: yes please\n", `template.yaml: inputs.versioning: default yes please: is not true or false`},
		{"postgres", `    default: "16"`, `    default: 16`, `template.yaml: inputs.engine_version: default 16: is not a string; quote it`},
	}
	for _, tc := range cases {
		m := realCatalog(t)
		edit(m, tc.template, tc.old, tc.new)
		c := load(t, m, nil)
		e := entry(t, c, tc.template)
		require.Contains(t, e.Refused, tc.reason, tc.new)
		_, err := c.Get(tc.template)
		require.ErrorIs(t, err, errs.ErrNotFound)
	}
}

func TestAllowlistErrorsFailTheLoad(t *testing.T) {
	t.Parallel()
	for body, msg := range map[string]string{
		"modules:\n  - source: a/b/c\n    sha256: " + strings.Repeat("a", 64) + "\n": "needs a version",
		"modules:\n  - source: a/b/c\n    version: 1.0.0\n    sha256: abc\n":         "is not 64 lower-case hex digits",
		"modules:\n  - source: a/b/c\n    version: 1.0.0\n    checksum: abc\n":       `field checksum not found`,
		"": "", // an empty file is an empty allowlist
	} {
		m := realCatalog(t)
		m["allowlist.yaml"] = &fstest.MapFile{Data: []byte(body)}
		_, err := catalog.Load(context.Background(), m, &catalog.MemoryPins{})
		if msg == "" {
			require.NoError(t, err)
			continue
		}
		require.ErrorContains(t, err, msg)
	}
}
