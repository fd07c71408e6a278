//go:build !fast

// Live: needs live OpenTofu (bin/tofu, built from tools/tofu) and, for the Kubernetes
// provider, its pinned build (tools/kubernetes-provider: minutes the first time, then cached).

package tofu_test

import (
	"bytes"
	"encoding/json"
	"encoding/pem"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"gantry/runner/tofu"
	"gantry/runner/tofu/tofutest"
)

// tofuIn runs tofu in dir with the toolchain's closed environment (and extra) and returns
// its combined output.
func tofuIn(t *testing.T, tofuPath, cliConfig, dir string, extra []string, args ...string) (string, error) {
	t.Helper()
	cmd := exec.CommandContext(t.Context(), tofuPath, args...)
	cmd.Dir = dir
	cmd.Env = append(tofu.Env(cliConfig, t.TempDir()), extra...)
	out, err := cmd.CombinedOutput()
	return string(out), err
}

// workspaceWith writes main.tf and, when lock is not nil, .terraform.lock.hcl.
func workspaceWith(t *testing.T, mainTF string, lock []byte) string {
	t.Helper()
	dir := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(dir, "main.tf"), []byte(mainTF), 0o644))
	if lock != nil {
		require.NoError(t, os.WriteFile(filepath.Join(dir, ".terraform.lock.hcl"), lock, 0o644))
	}
	return dir
}

const namespaceTF = `terraform {
  required_providers {
    kubernetes = {
      source  = "hashicorp/kubernetes"
      version = "1.13.4"
    }
  }
}

provider "kubernetes" {
  load_config_file = false
}

resource "kubernetes_namespace" "team" {
  metadata {
    name = "team-a"
  }
}
`

// TestKubernetesProviderFromMirror: a toolchain built with the Kubernetes provider holds it in
// its offline mirror as registry.opentofu.org/hashicorp/kubernetes 1.13.4 with its lock
// entry; `tofu init -lockfile=readonly` installs it from there with that lock file, offline,
// and the provider runs under the pinned OpenTofu (validate and its schema start it). The
// build is cached: asking again builds nothing and gives the same binary.
func TestKubernetesProviderFromMirror(t *testing.T) {
	t.Parallel()
	root, err := filepath.Abs(filepath.Join("..", ".."))
	require.NoError(t, err)
	tc := tofutest.Toolchain(t, root, t.TempDir(), t.Output(), tofu.Kubernetes)

	lock, ok := tc.LockOf(tofu.Kubernetes.Source)
	require.True(t, ok, "the toolchain's locks: %v", tc.Locks)
	require.Equal(t, "1.13.4", lock.Version)
	require.Len(t, lock.Hashes, 1)
	require.True(t, strings.HasPrefix(lock.Hashes[0], "h1:"), lock.Hashes[0])
	require.Equal(t, tc.Lock, tc.Locks[0], "the sandbox provider's entry comes first")
	require.FileExists(t, filepath.Join(tc.Mirror, "registry.opentofu.org", "hashicorp", "kubernetes", "terraform-provider-kubernetes_1.13.4_linux_amd64.zip"))

	var log bytes.Buffer
	path, err := tofu.Kubernetes.Ensure(t.Context(), root, nil, &log)
	require.NoError(t, err)
	require.Empty(t, log.String(), "a second ask builds nothing")
	require.Equal(t, path, tofu.Kubernetes.Built(t.Context(), root))
	again, err := tofu.BuildMirror(path, t.TempDir(), tofu.Kubernetes.Source, tofu.Kubernetes.Version, tofu.ProviderPlatform)
	require.NoError(t, err)
	require.Equal(t, lock, again, "the cached binary is the one published")

	ws := workspaceWith(t, namespaceTF, lock.File())
	// Offline: any request would go to a proxy where nothing listens.
	offline := []string{"HTTPS_PROXY=http://127.0.0.1:9", "HTTP_PROXY=http://127.0.0.1:9"}
	out, err := tofuIn(t, tc.Tofu, tc.CLIConfig, ws, offline, "init", "-input=false", "-no-color", "-lockfile=readonly")
	require.NoError(t, err, out)
	require.Contains(t, out, "Installed hashicorp/kubernetes v1.13.4")
	out, err = tofuIn(t, tc.Tofu, tc.CLIConfig, ws, offline, "validate", "-no-color")
	require.NoError(t, err, out)
	require.Contains(t, out, "The configuration is valid")
	out, err = tofuIn(t, tc.Tofu, tc.CLIConfig, ws, offline, "providers", "schema", "-json")
	require.NoError(t, err, out)
	var schema struct {
		Providers map[string]struct {
			Resources map[string]json.RawMessage `json:"resource_schemas"`
		} `json:"provider_schemas"`
	}
	require.NoError(t, json.Unmarshal([]byte(out), &schema))
	resources := schema.Providers[tofu.Kubernetes.Source].Resources
	for _, r := range []string{"kubernetes_namespace", "kubernetes_resource_quota", "kubernetes_limit_range", "kubernetes_role_binding"} {
		require.Contains(t, resources, r)
	}
}

// TestOperatorMirror: providers other than the sandbox one come from the operator's mirror,
// a directory or an https network mirror (the same directory with WriteMirrorIndex's files,
// served statically), as the CLI configuration Gantry writes says; the sandbox provider
// comes from the built-in mirror (listed first, and excluded from the operator's: the
// operator's mirror here offers a tampered one, which the lock file's hash would refuse),
// and the lock file still decides what is installed.
func TestOperatorMirror(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	tc := tofutest.Toolchain(t, filepath.Join("..", ".."), dir, io.Discard)

	const acme = "mirror.example/acme/extra"
	operator := filepath.Join(dir, "operator")
	acmeLock, err := tofu.BuildMirror(tc.Provider, operator, acme, "0.1.0", tofu.ProviderPlatform)
	require.NoError(t, err)
	bin, err := os.ReadFile(tc.Provider)
	require.NoError(t, err)
	evil := filepath.Join(dir, "evil", "terraform-provider-sandbox_v0.1.0")
	require.NoError(t, os.MkdirAll(filepath.Dir(evil), 0o755))
	require.NoError(t, os.WriteFile(evil, append(bin, 0), 0o755))
	evilLock, err := tofu.BuildMirror(evil, operator, tofu.ProviderSource, tofu.ProviderVersion, tofu.ProviderPlatform)
	require.NoError(t, err)

	// The same directory as a network mirror: the protocol's JSON files beside the zips,
	// behind a static https server.
	for _, l := range []tofu.Lock{acmeLock, evilLock} {
		require.NoError(t, tofu.WriteMirrorIndex(operator, l, tofu.ProviderPlatform))
	}
	srv := httptest.NewTLSServer(http.StripPrefix("/providers/", http.FileServer(http.Dir(operator))))
	t.Cleanup(srv.Close)
	caFile := filepath.Join(dir, "mirror-ca.pem")
	require.NoError(t, os.WriteFile(caFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw}), 0o644))
	byURL, err := tofu.ParseProviderMirror(srv.URL + "/providers") // the slash is added
	require.NoError(t, err)
	byDir, err := tofu.ParseProviderMirror(operator)
	require.NoError(t, err)

	mainTF := `terraform {
  required_providers {
    sandbox = {
      source  = "portal.local/sandbox/sandbox"
      version = "0.1.0"
    }
    extra = {
      source  = "` + acme + `"
      version = "0.1.0"
    }
  }
}
`
	for name, m := range map[string]tofu.ProviderMirror{"directory": byDir, "network mirror": byURL} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			cli := filepath.Join(t.TempDir(), "tofurc.hcl")
			require.NoError(t, tofu.CLIConfig{Mirror: tc.Mirror, Operator: m}.Write(cli))
			trust := []string{"SSL_CERT_FILE=" + caFile}

			ws := workspaceWith(t, mainTF, tofu.LockFile(tc.Lock, acmeLock))
			out, err := tofuIn(t, tc.Tofu, cli, ws, trust, "init", "-input=false", "-no-color", "-lockfile=readonly")
			require.NoError(t, err, out)
			require.Contains(t, out, "Installed "+acme+" v0.1.0")
			require.Contains(t, out, "Installed portal.local/sandbox/sandbox v0.1.0", "from the built-in mirror: the operator's tampered one would fail the hash")

			ws = workspaceWith(t, mainTF, tc.Lock.File())
			out, err = tofuIn(t, tc.Tofu, cli, ws, trust, "init", "-input=false", "-no-color", "-lockfile=readonly")
			require.Error(t, err, out)
			require.Contains(t, out, "Provider dependency changes detected", "a provider the lock file does not pin is not installed")
		})
	}
}
