//go:build !fast

// Live: needs live OpenTofu (bin/tofu, built from tools/tofu).

package tofurun_test

import (
	"io"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"gantry/models/bundle"
	"gantry/runner"
	"gantry/runner/tofu"
	"gantry/runner/tofu/tofutest"
	"gantry/runner/tofurun"
)

// extraSource is a second provider the test's mirror holds: the sandbox provider's binary
// published under another address, so that only the lock file decides whether it may be
// installed.
const extraSource = "portal.local/sandbox/extra"

// lockConfig requires the sandbox provider and, with extra, the second one; it has no
// resource, so a plan that gets to run needs no cloud and no state backend.
func lockConfig(extra bool) string {
	more := ""
	if extra {
		more = `
    extra = {
      source  = "` + extraSource + `"
      version = "0.1.0"
    }`
	}
	return `terraform {
  required_providers {
    sandbox = {
      source  = "portal.local/sandbox/sandbox"
      version = "0.1.0"
    }` + more + `
  }
}
`
}

// TestLockFileRefusesProviders: a configuration's lock file decides which providers a
// phase may install and which packages. With real tofu and the process executor (and the
// plugin cache, as in production):
//   - a mirror whose sandbox package was tampered with (its zip holds other bytes) is
//     refused: the plan fails before any `tofu plan`, the error is ErrProviderRefused
//     and the phase log names the provider and says its package does not match the
//     lock file's hashes;
//   - a configuration requiring a provider the mirror holds but the lock file does not
//     pin is refused the same way, the log naming that provider as not pinned;
//   - the same configurations with an untampered mirror and a lock file pinning both
//     providers plan (the refusals are the lock file's doing, nothing else's).
func TestLockFileRefusesProviders(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	tc := tofutest.Toolchain(t, "../..", dir, io.Discard)
	extraLock, err := tofu.BuildMirror(tc.Provider, tc.Mirror, extraSource, tofu.ProviderVersion, tofu.ProviderPlatform)
	require.NoError(t, err)

	// A mirror like tc's, with the sandbox provider's package tampered: the same entry,
	// one byte more.
	tampered := filepath.Join(dir, "tampered")
	require.NoError(t, os.CopyFS(tampered, os.DirFS(tc.Mirror)))
	bin, err := os.ReadFile(tc.Provider)
	require.NoError(t, err)
	evil := filepath.Join(dir, "evil", "terraform-provider-sandbox_v0.1.0")
	require.NoError(t, os.MkdirAll(filepath.Dir(evil), 0o755))
	require.NoError(t, os.WriteFile(evil, append(bin, 0), 0o755))
	evilLock, err := tofu.BuildMirror(evil, tampered, tofu.ProviderSource, tofu.ProviderVersion, tofu.ProviderPlatform)
	require.NoError(t, err)
	require.NotEqual(t, tc.Lock.Hashes, evilLock.Hashes)
	tamperedCLI := filepath.Join(dir, "tampered.hcl")
	require.NoError(t, tofu.WriteCLIConfig(tamperedCLI, tampered))

	plan := func(t *testing.T, cliConfig, mirror, cfg string, locks ...tofu.Lock) (runner.PlanResult, error) {
		config, _, err := bundle.Bundle{Files: map[string][]byte{"main.tf": []byte(cfg), ".terraform.lock.hcl": tofu.LockFile(locks...)}}.Tar()
		require.NoError(t, err)
		// Short: the process executor's plugin sockets live in the job's directory.
		work, err := os.MkdirTemp("", "tofurun-lock-")
		require.NoError(t, err)
		t.Cleanup(func() { os.RemoveAll(work) })
		r := tofurun.New(&tofurun.Process{Tofu: tc.Tofu, CLIConfig: cliConfig}, work, &tofu.PluginCache{Mirror: mirror, Root: t.TempDir()})
		return r.Plan(t.Context(), runner.PlanRequest{RunID: "run-1", WorkspaceID: "ws-1", Kind: runner.KindApply, Config: config})
	}
	refused := func(t *testing.T, res runner.PlanResult, err error, want string) {
		t.Helper()
		log := string(res.Log)
		require.ErrorIs(t, err, tofurun.ErrProviderRefused, "%s", log)
		require.Contains(t, err.Error(), want)
		require.Contains(t, log, "# "+want+": nothing is planned or applied")
		require.Contains(t, log, "$ tofu init ")
		require.NotContains(t, log, "$ tofu plan", "refused before any plan")
		require.Nil(t, res.PlanFile)
	}

	t.Run("tampered package", func(t *testing.T) {
		t.Parallel()
		res, err := plan(t, tamperedCLI, tampered, lockConfig(false), tc.Lock)
		refused(t, res, err, "provider portal.local/sandbox/sandbox 0.1.0 refused: "+tofu.WhyHashMismatch)
		require.Contains(t, string(res.Log), "doesn't match any of the\nchecksums previously recorded", "tofu's own refusal")
	})
	t.Run("unpinned provider", func(t *testing.T) {
		t.Parallel()
		res, err := plan(t, tc.CLIConfig, tc.Mirror, lockConfig(true), tc.Lock)
		refused(t, res, err, "provider "+extraSource+" refused: "+tofu.WhyNotPinned)
		require.NotContains(t, string(res.Log), "provider portal.local/sandbox/sandbox", "the pinned provider is not blamed")
	})
	t.Run("pinned and intact", func(t *testing.T) {
		t.Parallel()
		res, err := plan(t, tc.CLIConfig, tc.Mirror, lockConfig(true), tc.Lock, extraLock)
		require.NoError(t, err, "%s", res.Log)
		require.Contains(t, string(res.Log), "$ tofu plan")
		require.False(t, res.HasChanges)
	})
}
