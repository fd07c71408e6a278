package catalog_test

import (
	"os"
	"strings"
	"testing"
	"testing/fstest"

	"github.com/stretchr/testify/require"

	"gantry/models/catalog"
)

// TestSecretsReadBackSensitiveInputs: a run's live log masks the values of its
// template's sensitive inputs, read back from the config bundle generated for it;
// nothing else of the bundle, and everything once the template is gone.
func TestSecretsReadBackSensitiveInputs(t *testing.T) {
	t.Parallel()
	m := realCatalog(t)
	manifest := string(m["templates/bucket/template.yaml"].Data)
	marked := strings.Replace(manifest, "    help: Lower-case bucket name, 3 to 41 characters, starting with a letter.\n",
		"    help: Lower-case bucket name, 3 to 41 characters, starting with a letter.\n    sensitive: true\n", 1)
	require.NotEqual(t, manifest, marked, "the test's edit of the manifest must apply")
	m["templates/bucket/template.yaml"] = &fstest.MapFile{Data: []byte(marked)}
	c := load(t, m, nil)
	e, err := c.Get("bucket")
	require.NoError(t, err)
	inputs, v := e.Template.ValidateInputs(map[string]string{"name": "quiet-bucket", "retention_days": "12"})
	require.Nil(t, v)
	b, err := e.Generate(catalog.GenerateInput{WorkspaceID: "ws-1", Inputs: inputs, StateAddress: stateURL})
	require.NoError(t, err)
	tarball, _, err := b.Tar()
	require.NoError(t, err)

	require.Equal(t, []string{"quiet-bucket"}, c.Secrets("bucket", tarball))
	plain := load(t, os.DirFS("../../catalog"), nil)
	require.Empty(t, plain.Secrets("bucket", tarball), "no input of the shipped bucket is sensitive")
	gone := plain.Secrets("retired", tarball)
	require.ElementsMatch(t, []string{"quiet-bucket", "12", "eu-west"}, gone,
		"a template the catalog no longer offers: every argument but the bool counts")
	require.Empty(t, c.Secrets("bucket", []byte("not a tar")), "an unreadable bundle has nothing to mask")
}
