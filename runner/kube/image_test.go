//go:build !fast

// Live: needs kube.RunnerImage's layout of the provider mirror (a stand-in provider binary
// here); no tofu or cluster runs.

package kube_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"gantry/runner/kube"
	"gantry/runner/tofu"
)

// The runner image caches the providers of every catalog lock file the toolchain's mirror
// holds, and leaves out a lock file whose provider it does not hold (one built on demand,
// as terraform-provider-kubernetes is): its jobs fail at init, naming the provider. A
// package that does not match its lock file still fails the image.
func TestRunnerImageSkipsProvidersTheMirrorLacks(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	bin := filepath.Join(dir, "provider")
	require.NoError(t, os.WriteFile(bin, []byte("#!/bin/sh\n"), 0o755))
	mirror := filepath.Join(dir, "mirror")
	held, err := tofu.BuildMirror(bin, mirror, "portal.local/sandbox/sandbox", "0.1.0", tofu.ProviderPlatform)
	require.NoError(t, err)
	tc := tofu.Toolchain{Tofu: bin, Mirror: mirror}
	missing := tofu.Lock{Source: "registry.opentofu.org/hashicorp/kubernetes", Version: "1.13.4", Constraints: "1.13.4",
		Hashes: []string{"h1:d66pwuKKZGztGLPinovn/HKE24IwIENlQ6uw+sXr2XM="}}

	img, err := kube.RunnerImage(tc, bin, [][]byte{held.File(), missing.File()})
	require.NoError(t, err)
	var plugins []string
	for _, f := range img.Files {
		if strings.HasPrefix(f.Path, kube.ImagePlugins+"/") && strings.Contains(f.Path, "terraform-provider-") {
			plugins = append(plugins, f.Path)
		}
	}
	require.Len(t, plugins, 1, "the sandbox provider is cached, the missing one is not")
	require.Contains(t, plugins[0], "portal.local/sandbox/sandbox")

	wrong := held
	wrong.Hashes = []string{"h1:AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA="}
	_, err = kube.RunnerImage(tc, bin, [][]byte{wrong.File()})
	require.ErrorIs(t, err, tofu.ErrNotCached, "a package its lock file does not accept fails the image")
}
