package tofu

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
)

func writeTemplate(t *testing.T, files map[string]string) string {
	t.Helper()
	dir := t.TempDir()
	for name, body := range files {
		path := filepath.Join(dir, filepath.FromSlash(name))
		require.NoError(t, os.MkdirAll(filepath.Dir(path), 0o755))
		require.NoError(t, os.WriteFile(path, []byte(body), 0o644))
	}
	return dir
}

// TestTemplateLockFile: a template's lock file pins every provider its module requires:
// the entries Gantry builds from what it publishes, an entry only the operator's mirror can
// give kept from the current lock file, and a provider nobody can pin refused by name.
func TestTemplateLockFile(t *testing.T) {
	t.Parallel()
	dir := writeTemplate(t, map[string]string{
		"template.yaml": "name: team-namespace\n",
		"module/versions.tf": `terraform {
  required_providers {
    kubernetes = {
      source  = "hashicorp/kubernetes"
      version = "1.13.4"
    }
    sandbox = {
      source  = "portal.local/sandbox/sandbox"
      version = "0.1.0"
    }
  }
}`,
		"module/extra/main.tf": `terraform {
  required_providers {
    acme = { source = "mirror.example/acme/acme" }
  }
}`,
	})
	sources, err := RequiredSources(dir)
	require.NoError(t, err)
	require.Equal(t, []string{"mirror.example/acme/acme", "portal.local/sandbox/sandbox", "registry.opentofu.org/hashicorp/kubernetes"}, sources)
	require.Equal(t, []ThirdParty{Kubernetes}, ThirdPartiesFor(sources))

	built := []Lock{
		{Source: ProviderSource, Version: ProviderVersion, Constraints: ProviderVersion, Hashes: []string{"h1:sandbox"}},
		{Source: Kubernetes.Source, Version: Kubernetes.Version, Constraints: Kubernetes.Version, Hashes: []string{"h1:kube"}},
	}
	acme := Lock{Source: "mirror.example/acme/acme", Version: "2.0.0", Hashes: []string{"h1:acme", "zh:acme"}}
	stale := Lock{Source: Kubernetes.Source, Version: Kubernetes.Version, Constraints: Kubernetes.Version, Hashes: []string{"h1:old"}}
	got, err := TemplateLockFile(dir, LockFile(acme, stale), built)
	require.NoError(t, err)
	require.Equal(t, string(LockFile(acme, built[0], built[1])), string(got))

	_, err = TemplateLockFile(dir, nil, built)
	require.ErrorIs(t, err, ErrNoLockEntry)
	require.ErrorContains(t, err, "mirror.example/acme/acme: Gantry does not build it")

	bad := writeTemplate(t, map[string]string{"main.tf": `terraform {
  required_providers {
    x = { source = "a/b/c/d" }
  }
}`})
	_, err = RequiredSources(bad)
	require.ErrorContains(t, err, `required_providers.x.source "a/b/c/d" is not [hostname/]namespace/type`)
	implicit := writeTemplate(t, map[string]string{"main.tf": "terraform {\n  required_providers {\n    null = {}\n  }\n}\n"})
	sources, err = RequiredSources(implicit)
	require.NoError(t, err)
	require.Equal(t, []string{"registry.opentofu.org/hashicorp/null"}, sources)
}
