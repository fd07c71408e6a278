package tofu

import (
	"testing"

	"github.com/stretchr/testify/require"
)

// providersOut is `tofu providers` (OpenTofu 1.10) for a configuration whose module requires
// two providers, with one more in the state.
const providersOut = `
Providers required by configuration:
.
├── provider[portal.local/sandbox/extra] 0.1.0
├── provider[registry.opentofu.org/hashicorp/kubernetes] 1.13.4
└── module.m
    ├── provider[portal.local/sandbox/extra]
    └── provider[registry.opentofu.org/hashicorp/null]

Providers required by state:

    provider[registry.opentofu.org/hashicorp/random]

`

// hashInitOut is `tofu init -lockfile=readonly -no-color` (OpenTofu 1.10) refusing a mirror
// package whose hash the lock file does not list, wrapped as tofu wraps it.
const hashInitOut = `
Initializing the backend...

Initializing provider plugins...
- Reusing previous version of hashicorp/kubernetes from the dependency lock file
- Installing hashicorp/kubernetes v1.13.4...

Error: Failed to install provider

Error while installing hashicorp/kubernetes v1.13.4: the current package for
registry.opentofu.org/hashicorp/kubernetes 1.13.4 doesn't match any of the
checksums previously recorded in the dependency lock file; for more
information:
https://opentofu.org/docs/language/files/dependency-lock/#checksum-verification

Error: Failed to install provider

Error while installing portal.local/sandbox/sandbox v0.1.0: provider package doesn't match the any of the expected checksums

Error: Failed to install provider

Error while installing portal.local/sandbox/other v0.2.0: the mirror is down
`

func TestRequiredProviders(t *testing.T) {
	t.Parallel()
	require.Equal(t, []string{"portal.local/sandbox/extra", "registry.opentofu.org/hashicorp/kubernetes",
		"registry.opentofu.org/hashicorp/null", "registry.opentofu.org/hashicorp/random"}, RequiredProviders(providersOut))
	require.Empty(t, RequiredProviders(""))
}

// TestRefusals: which provider init refused and why, from the lock file, the providers
// required and init's output; a failure of another kind is not blamed on the lock file.
func TestRefusals(t *testing.T) {
	t.Parallel()
	locks := []Lock{{Source: "registry.opentofu.org/hashicorp/kubernetes", Version: "1.13.4"}, {Source: "portal.local/sandbox/sandbox", Version: "0.1.0"}}
	got := Refusals(locks, RequiredProviders(providersOut), hashInitOut)
	require.Equal(t, []Refusal{
		{Provider: "portal.local/sandbox/extra", Why: WhyNotPinned},
		{Provider: "registry.opentofu.org/hashicorp/null", Why: WhyNotPinned},
		{Provider: "registry.opentofu.org/hashicorp/random", Why: WhyNotPinned},
		{Provider: "registry.opentofu.org/hashicorp/kubernetes", Version: "1.13.4", Why: WhyHashMismatch},
		{Provider: "portal.local/sandbox/sandbox", Version: "0.1.0", Why: WhyHashMismatch},
	}, got)
	require.Equal(t, "provider registry.opentofu.org/hashicorp/kubernetes 1.13.4 refused: "+WhyHashMismatch, got[3].String())
	require.Equal(t, "provider portal.local/sandbox/extra refused: "+WhyNotPinned, got[0].String())

	require.Empty(t, Refusals(locks, []string{"portal.local/sandbox/sandbox"}, "Error: Failed to query available provider packages"),
		"everything pinned, no checksum refused: init failed for another reason")
	require.Equal(t, []Refusal{{Provider: "portal.local/sandbox/sandbox", Why: WhyNotPinned}},
		Refusals(nil, []string{"portal.local/sandbox/sandbox"}, ""), "no lock file pins nothing")
}
