package catalog_test

import (
	"strings"
	"testing"
	"testing/fstest"

	"github.com/stretchr/testify/require"

	"gantry/models/catalog"
	"gantry/models/errs"
)

const (
	sandboxLock = `provider "portal.local/sandbox/sandbox" {
  version     = "0.1.0"
  constraints = "0.1.0"
  hashes = [
    "h1:8RdYeEc7wGXPNaWIARdNlNgqOmmdkpNEUFrGZdUZDR8=",
  ]
}
`
	kubernetesLock = `provider "registry.opentofu.org/hashicorp/kubernetes" {
  version     = "1.13.4"
  constraints = "1.13.4"
  hashes = [
    "h1:d66pwuKKZGztGLPinovn/HKE24IwIENlQ6uw+sXr2XM=",
  ]
}
`
	// versionsBoth requires both providers; kubernetes on line 4, sandbox on line 8.
	versionsBoth = `terraform {
  required_providers {
    # The Kubernetes provider, the only third-party one the module proxy builds.
    kubernetes = {
      source  = "hashicorp/kubernetes"
      version = "1.13.4"
    }
    sandbox = {
      source  = "portal.local/sandbox/sandbox"
      version = "0.1.0"
    }
  }
}
`
	// resourcesBoth uses both providers, from line 5 of main.tf on.
	resourcesBoth = `resource "kubernetes_namespace" "ns" {
  metadata {
    name = var.label
  }
}

resource "sandbox_bucket" "b" {
  name = var.label
}
`
)

// withProviders is withFixture with a module that requires what versions says and a
// lock file holding lock.
func withProviders(m fstest.MapFS, name, versions, lock, extra string) fstest.MapFS {
	withFixture(m, name, extra)
	m["templates/"+name+"/module/versions.tf"] = &fstest.MapFile{Data: []byte(versions)}
	m["templates/"+name+"/.terraform.lock.hcl"] = &fstest.MapFile{Data: []byte(lock)}
	return m
}

// A template's providers are exactly the ones its lock file pins, each at the one
// version its module asks for, with an h1: hash OpenTofu checks before using it.
func TestProviderRefusals(t *testing.T) {
	t.Parallel()
	kubernetesOnly := strings.Replace(versionsBoth, `    sandbox = {
      source  = "portal.local/sandbox/sandbox"
      version = "0.1.0"
    }
`, "", 1)
	withVersion := func(v string) string {
		return strings.Replace(kubernetesOnly, `version = "1.13.4"`, `version = "`+v+`"`, 1)
	}
	cases := []struct {
		name, versions, lock, extra, reason string
	}{
		{"unlocked", versionsBoth, sandboxLock, "",
			`module/versions.tf:4: provider registry.opentofu.org/hashicorp/kubernetes 1.13.4 has no entry in .terraform.lock.hcl: lock it (tofu providers lock) so its hash is checked before use`},
		{"otherversion", versionsBoth, sandboxLock + "\n" + strings.ReplaceAll(kubernetesLock, "1.13.4", "1.13.3"), "",
			`.terraform.lock.hcl:9: provider registry.opentofu.org/hashicorp/kubernetes is locked at version "1.13.3", but the module requires 1.13.4`},
		{"noh1", versionsBoth, sandboxLock + "\n" + strings.Replace(kubernetesLock, "h1:", "zh:", 1), "",
			`.terraform.lock.hcl:9: provider registry.opentofu.org/hashicorp/kubernetes has no h1: hash: without one OpenTofu installs it from a mirror unverified`},
		{"range", withVersion(">= 1.13.4"), kubernetesLock, "",
			`module/versions.tf:4: required provider "kubernetes" asks for version ">= 1.13.4", which is not one exact version: write it as "1.2.3", the version its lock file entry holds`},
		{"pessimistic", withVersion("~> 1.13"), kubernetesLock, "",
			`module/versions.tf:4: required provider "kubernetes" asks for version "~> 1.13", which is not one exact version`},
		{"operator", withVersion("= 1.13.4"), kubernetesLock, "",
			`module/versions.tf:4: required provider "kubernetes" asks for version "= 1.13.4", which is not one exact version`},
		{"noversion", strings.Replace(kubernetesOnly, "      version = \"1.13.4\"\n", "", 1), kubernetesLock, "",
			`module/versions.tf:4: required provider "kubernetes" has no version: pin one exact version, the one its lock file entry holds`},
		{"nosource", strings.Replace(kubernetesOnly, "      source  = \"hashicorp/kubernetes\"\n", "", 1), kubernetesLock, "",
			`module/versions.tf:4: required provider "kubernetes" has no source: give it as namespace/name (or host/namespace/name)`},
		{"legacy", "terraform {\n  required_providers {\n    kubernetes = \"1.13.4\"\n  }\n}\n", kubernetesLock, "",
			`module/versions.tf:3: required provider "kubernetes" must be written { source = "namespace/name", version = "1.2.3" }`},
		{"unrequired", kubernetesOnly, kubernetesLock + "\n" + sandboxLock, "",
			`.terraform.lock.hcl:9: provider portal.local/sandbox/sandbox is locked, but no module of the template requires it`},
		{"implicit", kubernetesOnly, kubernetesLock, "resource \"sandbox_bucket\" \"b\" {\n  name = var.label\n}\n",
			`module/main.tf:5: resource sandbox_bucket uses provider "sandbox", which module/ does not list in terraform { required_providers } with a source and version`},
		{"credentials", kubernetesOnly, kubernetesLock, "provider \"kubernetes\" {\n  token = \"abc\"\n}\n",
			`module/main.tf:6: provider "kubernetes" sets token: templates never carry credentials (the runner's environment provides them)`},
	}
	m := realCatalog(t)
	for _, tc := range cases {
		withProviders(m, tc.name, tc.versions, tc.lock, tc.extra)
	}
	// A sub-module asking for another version of a provider the module requires.
	withProviders(m, "twoversions", kubernetesOnly, kubernetesLock, "")
	m["templates/twoversions/module/inner/versions.tf"] = &fstest.MapFile{Data: []byte(withVersion("1.13.3"))}
	// The same provider under two local names.
	withProviders(m, "twonames", kubernetesOnly, kubernetesLock, "")
	m["templates/twonames/module/inner/versions.tf"] = &fstest.MapFile{Data: []byte(strings.Replace(kubernetesOnly, "kubernetes = {", "k8s = {", 1))}
	cases = append(cases,
		struct{ name, versions, lock, extra, reason string }{name: "twoversions",
			reason: `module/versions.tf:4: provider registry.opentofu.org/hashicorp/kubernetes asks for version 1.13.4 here but 1.13.3 at module/inner/versions.tf:4: one exact version per provider`},
		struct{ name, versions, lock, extra, reason string }{name: "twonames",
			reason: `module/versions.tf:4: provider registry.opentofu.org/hashicorp/kubernetes is called "kubernetes" here but "k8s" at module/inner/versions.tf:4: use one local name`},
	)

	c := load(t, m, nil)
	for _, tc := range cases {
		e := entry(t, c, tc.name)
		require.Contains(t, e.Refused, tc.reason, tc.name)
		_, err := c.Get(tc.name)
		require.ErrorIs(t, err, errs.ErrNotFound, tc.name)
	}
	for _, real := range []string{"bucket", "network", "postgres", "team-namespace"} {
		require.Empty(t, entry(t, c, real).Refused, real)
	}
}

// A template may require several providers: the root module requires and configures
// each (empty blocks: credentials come from the runner's environment), and the lock
// file goes into the bundle as it is.
func TestGenerateTwoProviders(t *testing.T) {
	t.Parallel()
	lock := kubernetesLock + "\n" + sandboxLock
	c := load(t, withProviders(realCatalog(t), "both", versionsBoth, lock, resourcesBoth), nil)
	e, err := c.Get("both")
	require.NoError(t, err)
	b, err := e.Generate(catalog.GenerateInput{WorkspaceID: "ws-1", Inputs: map[string]any{"label": "x"}, StateAddress: stateURL})
	require.NoError(t, err)
	require.Equal(t, lock, string(b.Files[".terraform.lock.hcl"]))

	main := string(b.Files["main.tf"])
	require.Contains(t, main, `  required_providers {
    kubernetes = {
      source  = "hashicorp/kubernetes"
      version = "1.13.4"
    }
    sandbox = {
      source  = "portal.local/sandbox/sandbox"
      version = "0.1.0"
    }
  }
`)
	require.Contains(t, main, "# Credentials come only from the runner's environment, never from this file.\nprovider \"kubernetes\" {}\nprovider \"sandbox\" {}\n\n")
	blocks := parseMain(t, b.Files["main.tf"])
	require.Len(t, blocks["provider"], 2)
	for _, p := range blocks["provider"] {
		require.Empty(t, p.Body.Attributes, p.Labels[0])
		require.Empty(t, p.Body.Blocks, p.Labels[0])
	}
}

// The sandbox templates generate what they did before providers were read from their
// modules: the same root module, byte for byte (and so the same config digests).
func TestGenerateSandboxRootUnchanged(t *testing.T) {
	t.Parallel()
	e, err := load(t, realCatalog(t), nil).Get("bucket")
	require.NoError(t, err)
	b, err := e.Generate(catalog.GenerateInput{WorkspaceID: "ws-1", Inputs: map[string]any{"name": "logs"}, StateAddress: stateURL})
	require.NoError(t, err)
	require.Equal(t, `# Generated by Gantry for workspace ws-1 from template bucket 1.1.1. Do not edit.
terraform {
  required_providers {
    sandbox = {
      source  = "portal.local/sandbox/sandbox"
      version = "0.1.0"
    }
  }
  backend "http" {
    address        = "https://gantry.example/state/ws-123"
    lock_address   = "https://gantry.example/state/ws-123/lock"
    unlock_address = "https://gantry.example/state/ws-123/lock"
  }
}

# Credentials come only from the runner's environment, never from this file.
provider "sandbox" {}

module "bucket" {
  source = "./modules/bucket"
  name   = "logs"
}

output "bucket_id" {
  value = module.bucket.bucket_id
}

output "url" {
  value = module.bucket.url
}
`, string(b.Files["main.tf"]))
}
