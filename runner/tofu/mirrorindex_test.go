package tofu

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestWriteMirrorIndex: the network mirror protocol's files, as `tofu providers mirror`
// writes them, keeping the versions and platforms already listed.
func TestWriteMirrorIndex(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	bin := filepath.Join(t.TempDir(), "terraform-provider-kubernetes_v1.13.4")
	require.NoError(t, os.WriteFile(bin, []byte("provider"), 0o755))
	l, err := BuildMirror(bin, dir, Kubernetes.Source, "1.13.4", "linux_amd64")
	require.NoError(t, err)
	_, err = BuildMirror(bin, dir, Kubernetes.Source, "1.13.4", "linux_arm64")
	require.NoError(t, err)
	require.NoError(t, WriteMirrorIndex(dir, l, "linux_amd64"))
	require.NoError(t, WriteMirrorIndex(dir, l, "linux_arm64"))
	old := filepath.Join(dir, "registry.opentofu.org", "hashicorp", "kubernetes")
	require.NoError(t, os.WriteFile(filepath.Join(old, "index.json"), []byte(`{"versions": {"1.13.3": {}, "1.13.4": {}}}`), 0o644))
	require.NoError(t, WriteMirrorIndex(dir, l, "linux_amd64"))

	index, err := os.ReadFile(filepath.Join(old, "index.json"))
	require.NoError(t, err)
	require.JSONEq(t, `{"versions": {"1.13.3": {}, "1.13.4": {}}}`, string(index))
	version, err := os.ReadFile(filepath.Join(old, "1.13.4.json"))
	require.NoError(t, err)
	require.JSONEq(t, `{"archives": {
		"linux_amd64": {"url": "terraform-provider-kubernetes_1.13.4_linux_amd64.zip", "hashes": ["`+l.Hashes[0]+`"]},
		"linux_arm64": {"url": "terraform-provider-kubernetes_1.13.4_linux_arm64.zip", "hashes": ["`+l.Hashes[0]+`"]}}}`, string(version))

	require.ErrorContains(t, WriteMirrorIndex(dir, l, "darwin_amd64"), "no such file", "only a package the mirror holds")
}
