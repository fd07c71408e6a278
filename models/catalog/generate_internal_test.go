package catalog

import (
	"context"
	"os"
	"testing"

	"github.com/stretchr/testify/require"
)

// Generation rechecks the tree it bundles, not only the one checked at load: an
// entry whose files changed (here, behind the package's back) is refused.
func TestGenerateRechecksModuleSources(t *testing.T) {
	t.Parallel()
	c, err := Load(context.Background(), os.DirFS("../../catalog"), &MemoryPins{})
	require.NoError(t, err)
	e, err := c.Get("network")
	require.NoError(t, err)
	in := GenerateInput{WorkspaceID: "ws-1", Inputs: map[string]any{"name": "core"}, StateAddress: "https://gantry.example/state/ws-1"}
	_, err = e.Generate(in)
	require.NoError(t, err)

	files := map[string][]byte{}
	for k, v := range e.files {
		files[k] = v
	}
	files["module/extra.tf"] = []byte("module \"x\" {\n  source = \"git::https://example.com/x.git\"\n}\n")
	e.files = files

	_, err = e.Generate(in)
	require.ErrorContains(t, err, "module tree is sha256:")

	e.ModuleDigest = treeDigest(files)
	_, err = e.Generate(in)
	require.EqualError(t, err, `generating network: module/extra.tf:2: module source "git::https://example.com/x.git" is not allowed: remote git sources are refused`)
}

func TestTreeDigestFraming(t *testing.T) {
	t.Parallel()
	// Moving bytes between paths and contents must change the digest.
	a := treeDigest(map[string][]byte{"module/a": []byte("bc")})
	require.NotEqual(t, a, treeDigest(map[string][]byte{"module/ab": []byte("c")}))
	require.Equal(t, a, treeDigest(map[string][]byte{"module/a": []byte("bc")}))
	// Without the length prefix these two trees would hash the same bytes:
	// "module/a\x00" "module/b\x00c" versus "module/a\x00" + "module/b\x00c".
	two := treeDigest(map[string][]byte{"module/a": nil, "module/b": []byte("c")})
	one := treeDigest(map[string][]byte{"module/a": []byte("module/b\x00c")})
	require.NotEqual(t, two, one)
}
