//go:build !fast

// Live: needs live OpenTofu (bin/tofu, built from tools/tofu).

package tofu

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestCatalogLockFilesMatchProvider: the lock file of every catalog template pins exactly
// the providers its module requires, as built from this tree: the sandbox provider and the
// third-party ones Gantry builds (built here when a template requires one). When a provider
// changes, run `go tool task provider:lock` (and publish the templates as new versions).
func TestCatalogLockFilesMatchProvider(t *testing.T) {
	t.Parallel()
	dirs, err := filepath.Glob("../../catalog/templates/*")
	require.NoError(t, err)
	require.NotEmpty(t, dirs)
	var sources []string
	for _, dir := range dirs {
		required, err := RequiredSources(dir)
		require.NoError(t, err)
		require.NotEmpty(t, required, "%s requires no provider", dir)
		sources = append(sources, required...)
	}
	tc, _, err := Build{Root: "../..", Dir: t.TempDir(), Providers: ThirdPartiesFor(sources), Log: t.Output()}.Run(t.Context())
	require.NoError(t, err)
	for _, dir := range dirs {
		got, err := os.ReadFile(filepath.Join(dir, ".terraform.lock.hcl"))
		require.NoError(t, err)
		want, err := TemplateLockFile(dir, got, tc.Locks)
		require.NoError(t, err, dir)
		require.Equal(t, string(want), string(got), "%s: lock file does not match the providers built here; run go tool task provider:lock", dir)
	}
}
