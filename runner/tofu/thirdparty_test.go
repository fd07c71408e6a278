package tofu

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestThirdPartyCacheDir: the cache key covers every file of the tools module (and the Go
// toolchain's version), so an edited pin gets a directory of its own; the same sources
// always give the same directory, under the user cache directory.
func TestThirdPartyCacheDir(t *testing.T) {
	cache := t.TempDir()
	t.Setenv("XDG_CACHE_HOME", cache)
	ctx := t.Context()
	root := t.TempDir()
	tools := filepath.Join(root, "tools", Kubernetes.Tools)
	require.NoError(t, os.CopyFS(tools, os.DirFS(filepath.Join("..", "..", "tools", Kubernetes.Tools))))

	first, err := Kubernetes.CacheDir(ctx, root)
	require.NoError(t, err)
	require.True(t, strings.HasPrefix(first, filepath.Join(cache, "gantry", "providers", "kubernetes", "1.13.4-")), first)
	again, err := Kubernetes.CacheDir(ctx, root)
	require.NoError(t, err)
	require.Equal(t, first, again)

	license := filepath.Join(tools, "third_party", "vbomutil", "LICENSE")
	require.NoError(t, os.Chmod(license, 0o644))
	require.NoError(t, os.WriteFile(license, []byte("changed"), 0o644))
	changed, err := Kubernetes.CacheDir(ctx, root)
	require.NoError(t, err)
	require.NotEqual(t, first, changed, "a file deep in the tools module is part of the key")

	require.Empty(t, Kubernetes.Built(ctx, root), "nothing is built in an empty cache")
	require.NoError(t, os.MkdirAll(changed, 0o755))
	self, err := os.Executable()
	require.NoError(t, err)
	data, err := os.ReadFile(self)
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(filepath.Join(changed, Kubernetes.BinaryName()), data, 0o755))
	require.Empty(t, Kubernetes.Built(ctx, root), "a Go program of another module is not the provider")
}

// TestThirdPartyPinned: the tools module must pin the version Gantry publishes; a go.mod
// bumped alone is refused before anything is built.
func TestThirdPartyPinned(t *testing.T) {
	t.Parallel()
	require.NoError(t, Kubernetes.pinned(filepath.Join("..", "..")))
	require.Equal(t, "terraform-provider-kubernetes_v1.13.4", Kubernetes.BinaryName())

	root := t.TempDir()
	gomod := filepath.Join(root, "tools", Kubernetes.Tools, "go.mod")
	require.NoError(t, os.MkdirAll(filepath.Dir(gomod), 0o755))
	require.NoError(t, os.WriteFile(gomod, []byte("module x\n\ngo 1.26\n\nrequire github.com/hashicorp/terraform-provider-kubernetes v1.13.3\n"), 0o644))
	_, err := Kubernetes.Ensure(t.Context(), root, nil, nil)
	require.ErrorContains(t, err, "pins github.com/hashicorp/terraform-provider-kubernetes v1.13.3, but Gantry publishes registry.opentofu.org/hashicorp/kubernetes 1.13.4")
}
