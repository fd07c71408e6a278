package catalog_test

import (
	"os"
	"strings"
	"testing"
	"testing/fstest"

	"github.com/stretchr/testify/require"

	"gantry/models/catalog"
	"gantry/models/runport"
)

// A module variable named gantry_workspace_id, gantry_environment_id or
// gantry_organization_id is set by Gantry from the run, never by a person: it needs no
// input, an input may not take the name, and a bundle is never generated without it.
func TestContextVariables(t *testing.T) {
	t.Parallel()
	m := realCatalog(t)
	withFixture(m, "ctx", "variable \"gantry_workspace_id\" {\n  type = string\n}\n\nvariable \"gantry_environment_id\" {\n  type = string\n}\n\n"+
		"variable \"gantry_organization_id\" {\n  type = string\n}\n")
	withFixture(m, "wsonly", "variable \"gantry_workspace_id\" {\n  type = string\n}\n")
	for i, name := range []string{"gantry_workspace_id", "gantry_later"} {
		fixture := "reserved" + string(rune('a'+i))
		withFixture(m, fixture, "variable \""+name+"\" {\n  type = string\n}\n")
		p := "templates/" + fixture + "/template.yaml"
		m[p] = &fstest.MapFile{Data: append(m[p].Data, []byte("  - name: "+name+"\n    type: string\n")...)}
	}
	c := load(t, m, nil)
	for _, name := range []string{"reserveda", "reservedb"} {
		require.Contains(t, entry(t, c, name).Refused, "template.yaml: inputs.gantry_", name)
		require.Contains(t, entry(t, c, name).Refused,
			": names starting with gantry_ are reserved for what Gantry sets itself (gantry_environment_id, gantry_organization_id, gantry_workspace_id)", name)
	}

	e, err := c.Get("ctx")
	require.NoError(t, err)
	full := catalog.GenerateInput{WorkspaceID: "ws-1", EnvironmentID: "env-2", OrganizationID: "org-3", Inputs: map[string]any{"label": "x"}, StateAddress: stateURL}
	b, err := e.Generate(full)
	require.NoError(t, err)
	mod := parseMain(t, b.Files["main.tf"])["module"][0].Body
	require.Equal(t, "ws-1", attrValue(t, mod, "gantry_workspace_id").AsString())
	require.Equal(t, "env-2", attrValue(t, mod, "gantry_environment_id").AsString())
	require.Equal(t, "org-3", attrValue(t, mod, "gantry_organization_id").AsString())
	require.Equal(t, "x", attrValue(t, mod, "label").AsString())

	for _, tc := range []struct {
		edit func(*catalog.GenerateInput)
		want string
	}{
		{func(in *catalog.GenerateInput) { in.EnvironmentID = "" }, "generating ctx: the module declares gantry_environment_id, but no environment id was given"},
		{func(in *catalog.GenerateInput) { in.OrganizationID = "" }, "generating ctx: the module declares gantry_organization_id, but no organization id was given"},
		{func(in *catalog.GenerateInput) { in.EnvironmentID = "env 2\"" }, `generating ctx: environment id "env 2\"" is not a plain id`},
		{func(in *catalog.GenerateInput) {
			in.Inputs = map[string]any{"label": "x", "gantry_workspace_id": "ws-9"}
		}, "generating ctx: template has no input named gantry_workspace_id"},
	} {
		in := full
		tc.edit(&in)
		_, err := e.Generate(in)
		require.EqualError(t, err, tc.want)
	}

	// A module that declares only the workspace needs only the workspace.
	only, err := c.Get("wsonly")
	require.NoError(t, err)
	b, err = only.Generate(catalog.GenerateInput{WorkspaceID: "ws-1", Inputs: map[string]any{"label": "x"}, StateAddress: stateURL})
	require.NoError(t, err)
	require.Contains(t, string(b.Files["main.tf"]), "  gantry_workspace_id = \"ws-1\"\n")
	require.NotContains(t, string(b.Files["main.tf"]), "gantry_environment_id")
}

// The team namespace template: the real hashicorp/kubernetes provider, pinned; the
// namespace labelled with the run's workspace and environment, which the runs'
// catalog takes from the validated request.
func TestGenerateTeamNamespace(t *testing.T) {
	t.Parallel()
	c := load(t, os.DirFS("../../catalog"), nil)
	rc := catalog.ForRuns(c)
	v, err := rc.Validate("team-namespace", map[string]string{"name": "payments", "group": "team-payments"})
	require.NoError(t, err)
	require.Equal(t, map[string]any{"name": "payments", "group": "team-payments", "cpu": 4.0, "memory_gib": 8.0, "pods": 20.0}, v.Inputs)
	v.OrganizationID, v.EnvironmentID = "org-acme", "env-dev"
	b, err := rc.Generate(v, "ws-42", stateURL)
	require.NoError(t, err)

	main := string(b.Files["main.tf"])
	require.Contains(t, main, "    kubernetes = {\n      source  = \"hashicorp/kubernetes\"\n      version = \"1.13.4\"\n    }\n")
	require.Contains(t, main, "provider \"kubernetes\" {}\n")
	require.NotContains(t, main, "sandbox")
	blocks := parseMain(t, b.Files["main.tf"])
	mod := blocks["module"][0].Body
	require.Equal(t, "ws-42", attrValue(t, mod, "gantry_workspace_id").AsString())
	require.Equal(t, "env-dev", attrValue(t, mod, "gantry_environment_id").AsString())
	require.NotContains(t, mod.Attributes, "gantry_organization_id", "the module does not declare it")
	require.Equal(t, []string{"namespace"}, blocks["output"][0].Labels)

	lock, err := os.ReadFile("../../catalog/templates/team-namespace/.terraform.lock.hcl")
	require.NoError(t, err)
	require.Equal(t, lock, b.Files[".terraform.lock.hcl"])
	require.Contains(t, string(lock), `"h1:d66pwuKKZGztGLPinovn/HKE24IwIENlQ6uw+sXr2XM="`)
	require.Contains(t, string(b.Files["modules/team-namespace/main.tf"]), `"gantry.dev/workspace"   = var.gantry_workspace_id`)

	// The promotion reads the inputs back; the context variables are no inputs.
	config, _, err := b.Tar()
	require.NoError(t, err)
	values, err := rc.Inputs("team-namespace", config, nil)
	require.NoError(t, err)
	var names []string
	for _, iv := range values {
		names = append(names, iv.Name)
	}
	require.Equal(t, []string{"name", "group", "cpu", "memory_gib", "pods"}, names)
	require.ElementsMatch(t, []string{"payments", "team-payments", "4", "8", "20"}, c.Secrets("retired", config),
		"a template no longer offered: its inputs are masked in logs, not the ids Gantry set")

	// Without the run's environment there is no bundle.
	_, err = rc.Generate(runport.Validated{Template: "team-namespace", Inputs: v.Inputs}, "ws-42", stateURL)
	require.ErrorContains(t, err, "the module declares gantry_environment_id, but no environment id was given")

	// The inputs are DNS-label names and plain group names: no group of Kubernetes itself.
	for raw, field := range map[string]string{"name=Payments": "inputs.name", "name=-payments": "inputs.name", "name=" + strings.Repeat("a", 64): "inputs.name",
		"group=system:authenticated": "inputs.group", "group=team a": "inputs.group", "cpu=0": "inputs.cpu", "cpu=65": "inputs.cpu", "pods=1.5": "inputs.pods",
		"memory_gib=257": "inputs.memory_gib"} {
		k, val, _ := strings.Cut(raw, "=")
		in := map[string]string{"name": "payments", "group": "team-payments", k: val}
		_, err := rc.Validate("team-namespace", in)
		require.ErrorContains(t, err, field, raw)
	}
}
