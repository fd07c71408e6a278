package tofu

import (
	"archive/zip"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"golang.org/x/mod/sumdb/dirhash"
)

const (
	testSource   = "portal.local/sandbox/sandbox"
	testVersion  = "0.1.0"
	testPlatform = "linux_amd64"
	testZip      = "portal.local/sandbox/sandbox/terraform-provider-sandbox_0.1.0_linux_amd64.zip"
	testEntry    = "terraform-provider-sandbox_v0.1.0"
)

// fakeBinary writes bytes standing in for a provider: the mirror and its hash never run it.
func fakeBinary(t *testing.T, content string) string {
	t.Helper()
	name := filepath.Join(t.TempDir(), "provider")
	require.NoError(t, os.WriteFile(name, []byte(content), 0o755))
	return name
}

func TestBuildMirrorIsDeterministic(t *testing.T) {
	t.Parallel()
	bin := fakeBinary(t, "#!/bin/false\nnot really a provider\n")

	first, second := t.TempDir(), t.TempDir()
	lock1, err := BuildMirror(bin, first, testSource, testVersion, testPlatform)
	require.NoError(t, err)
	lock2, err := BuildMirror(bin, second, testSource, testVersion, testPlatform)
	require.NoError(t, err)

	zip1, err := os.ReadFile(filepath.Join(first, testZip))
	require.NoError(t, err)
	zip2, err := os.ReadFile(filepath.Join(second, testZip))
	require.NoError(t, err)
	require.Equal(t, zip1, zip2, "two builds of the same binary give different zips")
	require.Equal(t, lock1, lock2)
	require.Equal(t, Lock{Source: testSource, Version: testVersion, Constraints: testVersion, Hashes: lock1.Hashes}, lock1)
	require.Len(t, lock1.Hashes, 1)
	require.True(t, strings.HasPrefix(lock1.Hashes[0], "h1:"), lock1.Hashes[0])

	// Rebuilding in place replaces the zip and leaves no temporary files behind.
	_, err = BuildMirror(bin, first, testSource, testVersion, testPlatform)
	require.NoError(t, err)
	entries, err := os.ReadDir(filepath.Join(first, testSource))
	require.NoError(t, err)
	require.Len(t, entries, 1)

	// Another binary is another hash.
	other, err := BuildMirror(fakeBinary(t, "another provider"), t.TempDir(), testSource, testVersion, testPlatform)
	require.NoError(t, err)
	require.NotEqual(t, lock1.Hashes, other.Hashes)
}

func TestBuildMirrorZipLayout(t *testing.T) {
	t.Parallel()
	content := "provider bytes"
	mirror := t.TempDir()
	_, err := BuildMirror(fakeBinary(t, content), mirror, testSource, testVersion, testPlatform)
	require.NoError(t, err)

	zr, err := zip.OpenReader(filepath.Join(mirror, testZip))
	require.NoError(t, err)
	defer zr.Close()
	require.Len(t, zr.File, 1)
	f := zr.File[0]
	require.Equal(t, testEntry, f.Name)
	require.Equal(t, os.FileMode(0o755), f.Mode(), "the provider must stay executable once tofu extracts it")
	require.Equal(t, zipTime, f.Modified.UTC())
	rc, err := f.Open()
	require.NoError(t, err)
	got, err := io.ReadAll(rc)
	require.NoError(t, err)
	require.NoError(t, rc.Close())
	require.Equal(t, content, string(got))
}

// The lock hash is dirhash's h1 of the unpacked provider directory, so the same value holds for
// the unpacked mirror layout and for what tofu extracts into .terraform.
func TestBuildMirrorHashIsDirHashOfUnpackedDir(t *testing.T) {
	t.Parallel()
	bin := fakeBinary(t, "some provider\x00\x01\x02")
	lock, err := BuildMirror(bin, t.TempDir(), testSource, testVersion, testPlatform)
	require.NoError(t, err)

	unpacked := filepath.Join(t.TempDir(), "portal.local", "sandbox", "sandbox", testVersion, testPlatform)
	require.NoError(t, os.MkdirAll(unpacked, 0o755))
	data, err := os.ReadFile(bin)
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(filepath.Join(unpacked, testEntry), data, 0o755))
	want, err := dirhash.HashDir(unpacked, "", dirhash.Hash1)
	require.NoError(t, err)
	require.Equal(t, []string{want}, lock.Hashes)
}

func TestBuildMirrorRejectsBadInput(t *testing.T) {
	t.Parallel()
	bin := fakeBinary(t, "x")
	for name, args := range map[string][3]string{
		"two-part source":  {"sandbox/sandbox", testVersion, testPlatform},
		"empty namespace":  {"portal.local//sandbox", testVersion, testPlatform},
		"dot-dot part":     {"../sandbox/sandbox", testVersion, testPlatform},
		"empty version":    {testSource, "", testPlatform},
		"version with dir": {testSource, "../0.1.0", testPlatform},
		"bad platform":     {testSource, testVersion, "linux"},
	} {
		_, err := BuildMirror(bin, t.TempDir(), args[0], args[1], args[2])
		require.Error(t, err, name)
	}
	_, err := BuildMirror(filepath.Join(t.TempDir(), "missing"), t.TempDir(), testSource, testVersion, testPlatform)
	require.Error(t, err)
}

func TestLockFile(t *testing.T) {
	t.Parallel()
	lock := Lock{
		Source:      testSource,
		Version:     testVersion,
		Constraints: testVersion,
		Hashes:      []string{"h1:GcQSSRmJ51ibI85kfyyBEjt6HA2fFoi3BUb70FDphwg="},
	}
	require.Equal(t, `# This file is maintained automatically by "tofu init".
# Manual edits may be lost in future updates.

provider "portal.local/sandbox/sandbox" {
  version     = "0.1.0"
  constraints = "0.1.0"
  hashes = [
    "h1:GcQSSRmJ51ibI85kfyyBEjt6HA2fFoi3BUb70FDphwg=",
  ]
}
`, string(lock.File()))
}

// Several providers follow tofu's normalisation (the layout of its own locks_file_test.go):
// blocks ordered by address parts, hashes sorted and de-duplicated, alignment only when there
// are constraints, no hashes attribute when there are none, template sequences escaped.
func TestLockFileSeveralProviders(t *testing.T) {
	t.Parallel()
	got := LockFile(
		Lock{Source: "registry.opentofu.org/test/foo", Version: "1.0.0", Constraints: ">= 1.0.0",
			Hashes: []string{"test:c", "test:a", "test:b", "test:a"}},
		Lock{Source: "registry.opentofu.org/test/baz", Version: "1.2.0"},
		Lock{Source: "a/x/y", Version: "1.0.0", Hashes: []string{"h1:${x}"}},
		Lock{Source: "a-b/x/y", Version: "1.0.0"},
	)
	require.Equal(t, `# This file is maintained automatically by "tofu init".
# Manual edits may be lost in future updates.

provider "a/x/y" {
  version = "1.0.0"
  hashes = [
    "h1:$${x}",
  ]
}

provider "a-b/x/y" {
  version = "1.0.0"
}

provider "registry.opentofu.org/test/baz" {
  version = "1.2.0"
}

provider "registry.opentofu.org/test/foo" {
  version     = "1.0.0"
  constraints = ">= 1.0.0"
  hashes = [
    "test:a",
    "test:b",
    "test:c",
  ]
}
`, string(got))
}
