package tofu

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestParseLockFileReadsWhatLockFileWrites(t *testing.T) {
	t.Parallel()
	a := Lock{Source: "portal.local/sandbox/sandbox", Version: "0.1.0", Constraints: "0.1.0", Hashes: []string{"h1:b=", "h1:a="}}
	b := Lock{Source: "portal.local/other/thing", Version: "2.0.0", Hashes: []string{"h1:c="}}
	got, err := ParseLockFile(LockFile(a, b))
	require.NoError(t, err)
	require.Equal(t, []Lock{
		{Source: "portal.local/other/thing", Version: "2.0.0", Hashes: []string{"h1:c="}},
		{Source: "portal.local/sandbox/sandbox", Version: "0.1.0", Constraints: "0.1.0", Hashes: []string{"h1:a=", "h1:b="}},
	}, got)

	_, err = ParseLockFile([]byte("provider {"))
	require.Error(t, err)
}

func TestPluginCacheUnpacksVerifiedProvidersOncePerLockFile(t *testing.T) {
	t.Parallel()
	mirror := t.TempDir()
	lock, err := BuildMirror(fakeBinary(t, "the provider"), mirror, testSource, testVersion, testPlatform)
	require.NoError(t, err)
	c := &PluginCache{Mirror: mirror, Root: t.TempDir(), Platform: testPlatform}

	dir, err := c.Dir(lock.File())
	require.NoError(t, err)
	installed := filepath.Join(dir, testSource, testVersion, testPlatform, testEntry)
	body, err := os.ReadFile(installed)
	require.NoError(t, err)
	require.Equal(t, "the provider", string(body))
	fi, err := os.Stat(installed)
	require.NoError(t, err)
	require.Equal(t, os.FileMode(0o755), fi.Mode().Perm(), "the job's uid must run it and nobody else write it")

	// The same lock file: the same directory, not prepared again.
	require.NoError(t, os.WriteFile(installed+".marker", nil, 0o644))
	again, err := c.Dir(lock.File())
	require.NoError(t, err)
	require.Equal(t, dir, again)
	_, err = os.Stat(installed + ".marker")
	require.NoError(t, err)

	// Another lock file (another hash listed too) gets its own directory.
	wider := lock
	wider.Hashes = append([]string{"h1:AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA="}, lock.Hashes...)
	other, err := c.Dir(wider.File())
	require.NoError(t, err)
	require.NotEqual(t, dir, other)

	// Nothing half-prepared is left in the root.
	entries, err := os.ReadDir(c.Root)
	require.NoError(t, err)
	for _, e := range entries {
		require.False(t, strings.HasPrefix(e.Name(), "."), e.Name())
	}
}

func TestPluginCacheRefusesWhatTheLockFileDoesNotAccept(t *testing.T) {
	t.Parallel()
	mirror := t.TempDir()
	lock, err := BuildMirror(fakeBinary(t, "the provider"), mirror, testSource, testVersion, testPlatform)
	require.NoError(t, err)
	c := &PluginCache{Mirror: mirror, Root: t.TempDir(), Platform: testPlatform}

	for name, l := range map[string]Lock{
		"another hash":      {Source: testSource, Version: testVersion, Hashes: []string{"h1:AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA="}},
		"not in the mirror": {Source: "portal.local/sandbox/other", Version: "1.0.0", Hashes: lock.Hashes},
		"another version":   {Source: testSource, Version: "0.2.0", Hashes: lock.Hashes},
		"a path version":    {Source: testSource, Version: "..", Hashes: lock.Hashes},
	} {
		_, err := c.Dir(l.File())
		require.True(t, errors.Is(err, ErrNotCached), "%s: %v", name, err)
	}
	_, err = c.Dir([]byte("# no providers\n"))
	require.ErrorIs(t, err, ErrNotCached)
	entries, err := os.ReadDir(c.Root)
	require.NoError(t, err)
	require.Empty(t, entries, "a refused lock file leaves nothing behind")
}
