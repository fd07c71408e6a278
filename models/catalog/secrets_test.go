package catalog_test

import (
	"os"
	"strings"
	"testing"
	"testing/fstest"

	"github.com/stretchr/testify/require"

	"github.com/hashicorp/hcl/v2"
	"github.com/zclconf/go-cty/cty"

	"gantry/models/catalog"
	"gantry/models/runport"
)

// sensitiveBucket is the catalog with the bucket's name input marked sensitive.
func sensitiveBucket(t *testing.T) *catalog.Catalog {
	t.Helper()
	m := realCatalog(t)
	manifest := string(m["templates/bucket/template.yaml"].Data)
	marked := strings.Replace(manifest, "    help: Lower-case bucket name, 3 to 41 characters, starting with a letter.\n",
		"    help: Lower-case bucket name, 3 to 41 characters, starting with a letter.\n    sensitive: true\n", 1)
	require.NotEqual(t, manifest, marked, "the test's edit of the manifest must apply")
	m["templates/bucket/template.yaml"] = &fstest.MapFile{Data: []byte(marked)}
	return load(t, m, nil)
}

// bucketBundle is the bucket's config bundle from catalog c, as a tarball.
func bucketBundle(t *testing.T, c *catalog.Catalog, raw map[string]string) []byte {
	t.Helper()
	e, err := c.Get("bucket")
	require.NoError(t, err)
	inputs, v := e.Template.ValidateInputs(raw)
	require.Nil(t, v)
	b, err := e.Generate(catalog.GenerateInput{WorkspaceID: "ws-1", Inputs: inputs, StateAddress: stateURL})
	require.NoError(t, err)
	tarball, _, err := b.Tar()
	require.NoError(t, err)
	return tarball
}

// TestSensitiveInputsAreNotInTheBundle: a sensitive input is declared as a sensitive
// root variable and passed on as var.<name>; its value is nowhere in the bundle.
func TestSensitiveInputsAreNotInTheBundle(t *testing.T) {
	t.Parallel()
	c := sensitiveBucket(t)
	e, err := c.Get("bucket")
	require.NoError(t, err)
	inputs, v := e.Template.ValidateInputs(map[string]string{"name": "quiet-bucket", "retention_days": "12"})
	require.Nil(t, v)
	b, err := e.Generate(catalog.GenerateInput{WorkspaceID: "ws-1", Inputs: inputs, StateAddress: stateURL})
	require.NoError(t, err)
	for name, body := range b.Files {
		require.NotContains(t, string(body), "quiet-bucket", "%s holds the sensitive value", name)
	}
	blocks := parseMain(t, b.Files["main.tf"])
	require.Len(t, blocks["variable"], 1)
	decl := blocks["variable"][0]
	require.Equal(t, []string{"name"}, decl.Labels)
	require.Len(t, decl.Body.Attributes, 2, "type and sensitive, no default")
	typ, diags := hcl.AbsTraversalForExpr(decl.Body.Attributes["type"].Expr)
	require.False(t, diags.HasErrors())
	require.Equal(t, "string", typ.RootName())
	require.Equal(t, cty.True, attrValue(t, decl.Body, "sensitive"))

	mod := blocks["module"][0].Body
	ref, diags := hcl.AbsTraversalForExpr(mod.Attributes["name"].Expr)
	require.False(t, diags.HasErrors())
	require.Equal(t, "var", ref.RootName())
	require.Equal(t, "name", ref[1].(hcl.TraverseAttr).Name)
	require.Equal(t, 12.0, func() float64 { f, _ := attrValue(t, mod, "retention_days").AsBigFloat().Float64(); return f }(),
		"non-sensitive inputs stay literal")
	require.Equal(t, "eu-west", attrValue(t, mod, "region").AsString())

	tarball, _, err := b.Tar()
	require.NoError(t, err)
	require.Empty(t, c.Secrets("bucket", tarball), "nothing to read back: the value is sealed with the run")
	in, err := c.Inputs("bucket", tarball, map[string]any{"name": "quiet-bucket"})
	require.NoError(t, err)
	require.Equal(t, runport.InputValue{Name: "name", Label: "Bucket name", Divergence: "fixed", Sensitive: true, Value: `"quiet-bucket"`, Set: true}, in[0],
		"a promotion compares the sealed value, encoded as a literal is")
	in, err = c.Inputs("bucket", tarball, nil)
	require.NoError(t, err)
	require.False(t, in[0].Set, "without the sealed values the bundle says nothing of it")
}

// TestSecretsReadBackSensitiveInputs: a bundle generated before sensitive inputs were
// sealed holds them as literals; a run's live log still masks them, read back from
// the bundle: nothing else of it, and every literal once the template is gone.
func TestSecretsReadBackSensitiveInputs(t *testing.T) {
	t.Parallel()
	c := sensitiveBucket(t)
	plain := load(t, os.DirFS("../../catalog"), nil)
	// The shipped bucket's name is not sensitive, so its bundle holds it as a literal:
	// what a bundle of a sensitive input looked like before.
	older := bucketBundle(t, plain, map[string]string{"name": "quiet-bucket", "retention_days": "12"})

	require.Equal(t, []string{"quiet-bucket"}, c.Secrets("bucket", older))
	require.Empty(t, plain.Secrets("bucket", older), "no input of the shipped bucket is sensitive")
	gone := plain.Secrets("retired", older)
	require.ElementsMatch(t, []string{"quiet-bucket", "12", "eu-west"}, gone,
		"a template the catalog no longer offers: every argument but the bool counts")
	require.Empty(t, c.Secrets("bucket", []byte("not a tar")), "an unreadable bundle has nothing to mask")
	in, err := c.Inputs("bucket", older, map[string]any{"name": "other-bucket"})
	require.NoError(t, err)
	require.Equal(t, `"quiet-bucket"`, in[0].Value, "an older bundle's literal is what it was planned with")
}
