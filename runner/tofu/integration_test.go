//go:build !fast

// Live: needs live OpenTofu (bin/tofu, built from tools/tofu).

package tofu

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"golang.org/x/mod/modfile"
)

// The workspace every integration test initialises: one provider from the mirror, pinned exactly.
const workspaceConfig = `terraform {
  required_providers {
    sandbox = {
      source  = "portal.local/sandbox/sandbox"
      version = "0.1.0"
    }
  }
}

provider "sandbox" {}
`

// unreachableProxy is where every HTTP(S) request tofu might make would go: the discard port on
// loopback, where nothing listens. An init that touched the network would fail.
var unreachableProxy = []string{
	"HTTPS_PROXY=http://127.0.0.1:9", "https_proxy=http://127.0.0.1:9",
	"HTTP_PROXY=http://127.0.0.1:9", "http_proxy=http://127.0.0.1:9",
	"NO_PROXY=", "no_proxy=",
}

// TestOfflineInitFromMirror builds the pinned OpenTofu and a real provider, puts the provider in
// a packed mirror, and checks that `tofu init -lockfile=readonly` installs it with the generated
// lock file and no network, that the lock file is exactly what tofu itself writes, that the
// installed provider runs, and that a wrong hash stops init.
func TestOfflineInitFromMirror(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	root := repoRoot(t)

	tofu, err := EnsureBinary(ctx, root, t.Output())
	require.NoError(t, err)
	version := exec.CommandContext(ctx, tofu, "version")
	version.Env = Env(os.DevNull, t.TempDir())
	out, err := version.Output()
	require.NoError(t, err)
	require.True(t, strings.HasPrefix(string(out), "OpenTofu v1.10."), "tofu version: %s", out)

	tmp := t.TempDir()
	platform := runtime.GOOS + "_" + runtime.GOARCH
	provider := buildProvider(t, root, filepath.Join(tmp, "provider"))
	mirror := filepath.Join(tmp, "mirror")
	lock, err := BuildMirror(provider, mirror, testSource, testVersion, platform)
	require.NoError(t, err)
	cliConfig := filepath.Join(tmp, "tofurc.hcl")
	require.NoError(t, WriteCLIConfig(cliConfig, mirror))
	home := filepath.Join(tmp, "home")
	require.NoError(t, os.Mkdir(home, 0o700))
	env := append(Env(cliConfig, home), unreachableProxy...)

	run := func(dir string, args ...string) (string, error) {
		cmd := exec.CommandContext(ctx, tofu, args...)
		cmd.Dir, cmd.Env = dir, env
		out, err := cmd.CombinedOutput()
		return string(out), err
	}
	workspace := func(t *testing.T, lockFile []byte) string {
		dir := t.TempDir()
		require.NoError(t, os.WriteFile(filepath.Join(dir, "main.tf"), []byte(workspaceConfig), 0o644))
		if lockFile != nil {
			require.NoError(t, os.WriteFile(filepath.Join(dir, ".terraform.lock.hcl"), lockFile, 0o644))
		}
		return dir
	}

	t.Run("init with the generated lock, offline", func(t *testing.T) {
		ws := workspace(t, lock.File())
		out, err := run(ws, "init", "-input=false", "-lockfile=readonly")
		require.NoError(t, err, out)
		require.Contains(t, out, "Installed portal.local/sandbox/sandbox v0.1.0")
		require.Contains(t, out, "OpenTofu has been successfully initialized")

		got, err := os.ReadFile(filepath.Join(ws, ".terraform.lock.hcl"))
		require.NoError(t, err)
		require.Equal(t, string(lock.File()), string(got), "init changed the lock file")

		// The packed layout gives a real, executable copy in .terraform, not a symlink into the
		// mirror (which would break wherever the mirror is mounted elsewhere).
		installed := filepath.Join(ws, ".terraform", "providers", testSource, testVersion, platform, testEntry)
		fi, err := os.Lstat(installed)
		require.NoError(t, err)
		require.True(t, fi.Mode().IsRegular(), "%s is %v", installed, fi.Mode())
		require.NotZero(t, fi.Mode()&0o100, "%s is not executable", installed)

		// validate starts the provider to read its schema: the installed copy really runs.
		out, err = run(ws, "validate", "-no-color")
		require.NoError(t, err, out)
		require.Contains(t, out, "The configuration is valid")
	})

	t.Run("init links the providers from the plugin cache and writes nothing there", func(t *testing.T) {
		cache := &PluginCache{Mirror: mirror, Root: t.TempDir(), Platform: platform}
		dir, err := cache.Dir(lock.File())
		require.NoError(t, err)
		before := treeListing(t, dir)
		ws := workspace(t, lock.File())
		cmd := exec.CommandContext(ctx, tofu, "init", "-input=false", "-no-color", "-lockfile=readonly")
		cmd.Dir, cmd.Env = ws, append(env, "TF_PLUGIN_CACHE_DIR="+dir)
		out, err := cmd.CombinedOutput()
		require.NoError(t, err, "%s", out)
		require.Contains(t, string(out), "from the shared cache directory")
		require.NotContains(t, string(out), "Installing")
		require.Equal(t, before, treeListing(t, dir), "init wrote into the cache")
		out2, err := run(ws, "validate", "-no-color")
		require.NoError(t, err, out2)
	})

	t.Run("the lock file is the one tofu writes", func(t *testing.T) {
		ws := workspace(t, nil)
		out, err := run(ws, "init", "-input=false")
		require.NoError(t, err, out)
		got, err := os.ReadFile(filepath.Join(ws, ".terraform.lock.hcl"))
		require.NoError(t, err)
		require.Equal(t, string(got), string(lock.File()))
	})

	t.Run("a tampered hash fails init", func(t *testing.T) {
		other, err := BuildMirror(fakeBinary(t, "not the provider"), t.TempDir(), testSource, testVersion, platform)
		require.NoError(t, err)
		tampered := lock
		tampered.Hashes = other.Hashes
		ws := workspace(t, tampered.File())
		out, err := run(ws, "init", "-input=false", "-lockfile=readonly", "-no-color")
		require.Error(t, err, out)
		require.Contains(t, strings.Join(strings.Fields(out), " "),
			"doesn't match any of the checksums previously recorded in the dependency lock file", out)
	})
	t.Run("nothing outside the mirror is looked up", func(t *testing.T) {
		// Control: with no direct installation method a provider that is not in the mirror is
		// simply not found; tofu does not even try a registry (through the proxy, where it
		// would get "proxyconnect ... connection refused").
		ws := t.TempDir()
		require.NoError(t, os.WriteFile(filepath.Join(ws, "main.tf"), []byte(`terraform {
  required_providers {
    null = { source = "hashicorp/null" }
  }
}
`), 0o644))
		out, err := run(ws, "init", "-input=false", "-no-color")
		require.Error(t, err, out)
		require.Contains(t, out, "Failed to query available provider packages")
		require.NotContains(t, out, "proxyconnect")
	})
}

// repoRoot is the directory holding gantry's go.mod, two levels up from this package.
func repoRoot(t *testing.T) string {
	t.Helper()
	root, err := filepath.Abs(filepath.Join("..", ".."))
	require.NoError(t, err)
	_, err = os.Stat(filepath.Join(root, "tools", "tofu", "go.mod"))
	require.NoError(t, err)
	return root
}

// buildProvider compiles a terraform-plugin-framework provider serving portal.local/sandbox/sandbox
// into dir and returns its path: Gantry's own cmd/terraform-provider-sandbox when it exists and
// builds, otherwise the minimal one in testdata/fakeprovider.
func buildProvider(t *testing.T, root, dir string) string {
	t.Helper()
	out := filepath.Join(dir, testEntry)
	build := func(pkg string, extra ...string) error {
		args := append([]string{"build"}, extra...)
		args = append(args, "-trimpath", "-ldflags", "-s -w -X main.version="+testVersion, "-o", out, pkg)
		cmd := exec.CommandContext(t.Context(), "go", args...)
		cmd.Dir = root
		cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
		output, err := cmd.CombinedOutput()
		if err != nil {
			return errors.New(strings.TrimSpace(string(output)))
		}
		return nil
	}

	if _, err := os.Stat(filepath.Join(root, "cmd", "terraform-provider-sandbox")); err == nil {
		err := build("./cmd/terraform-provider-sandbox")
		if err == nil {
			t.Log("provider: cmd/terraform-provider-sandbox")
			return out
		}
		t.Logf("cmd/terraform-provider-sandbox does not build, using testdata/fakeprovider: %v", err)
	}

	const fake = "./runner/tofu/testdata/fakeprovider"
	err := build(fake)
	if err == nil {
		t.Log("provider: testdata/fakeprovider")
		return out
	}
	if !strings.Contains(err.Error(), "missing go.sum entry") {
		require.NoError(t, err, "building %s", fake)
	}
	// go.mod lists terraform-plugin-framework, but go.sum may still lack the checksums of the
	// modules its packages import until the first provider in the main module is tidied in.
	// Complete a copy of go.mod/go.sum (same versions), never the real files.
	t.Log("go.sum lacks checksums of the provider's dependencies; building with a completed copy of go.mod")
	modFile := filepath.Join(t.TempDir(), "go.mod")
	data, err := os.ReadFile(filepath.Join(root, "go.mod"))
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(modFile, data, 0o644))
	sum, err := os.ReadFile(filepath.Join(root, "go.sum"))
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(strings.TrimSuffix(modFile, ".mod")+".sum", sum, 0o644))

	f, err := modfile.ParseLax("go.mod", data, nil)
	require.NoError(t, err)
	framework := ""
	for _, r := range f.Require {
		if r.Mod.Path == "github.com/hashicorp/terraform-plugin-framework" {
			framework = r.Mod.Version
		}
	}
	require.NotEmpty(t, framework, "go.mod does not require terraform-plugin-framework")
	get := exec.CommandContext(t.Context(), "go", "get", "-modfile="+modFile,
		"github.com/hashicorp/terraform-plugin-framework/providerserver@"+framework)
	get.Dir = root
	output, err := get.CombinedOutput()
	require.NoError(t, err, "%s", output)
	require.NoError(t, build(fake, "-modfile="+modFile))
	t.Log("provider: testdata/fakeprovider (completed go.sum copy)")
	return out
}

// treeListing lists every path under dir with its mode and size.
func treeListing(t *testing.T, dir string) []string {
	t.Helper()
	var out []string
	require.NoError(t, filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		out = append(out, fmt.Sprintf("%s %s %d", rel, info.Mode(), info.Size()))
		return nil
	}))
	return out
}
