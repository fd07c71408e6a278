//go:build !fast

// Live: needs live OpenTofu (bin/tofu, built from tools/tofu).

package tofu

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestCatalogLockFilesMatchProvider: the lock file of every catalog template accepts
// exactly the sandbox provider built from this tree. When the provider changes, run
// `go tool task provider:lock` (and publish the templates as new versions).
func TestCatalogLockFilesMatchProvider(t *testing.T) {
	t.Parallel()
	tc, err := PrepareToolchain(t.Context(), "../..", t.TempDir(), t.Output())
	require.NoError(t, err)
	want := tc.Lock.File()
	dirs, err := filepath.Glob("../../catalog/templates/*")
	require.NoError(t, err)
	require.NotEmpty(t, dirs)
	for _, dir := range dirs {
		got, err := os.ReadFile(filepath.Join(dir, ".terraform.lock.hcl"))
		require.NoError(t, err)
		require.Equal(t, string(want), string(got), "%s: lock file does not match the provider built here; run go tool task provider:lock", dir)
	}
}
