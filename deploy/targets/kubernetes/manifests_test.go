package kubernetes_test

import (
	"flag"
	"os"
	"testing"

	"github.com/stretchr/testify/require"

	"gantry/runner/targets/kubetarget"
)

var update = flag.Bool("update", false, "write the manifests again from kubetarget")

// The example values the files are rendered for: a platform team replaces them (README.md).
var (
	exampleTrust = kubetarget.Trust{IssuerURL: "https://gantry.example.com/workload", Audience: "kubernetes"}
	exampleGrant = kubetarget.Grant{Organization: "org-example"}
)

// TestManifestsAreCurrent: each file here is what kubetarget renders for the example values,
// so what a platform team reads is what Gantry's tests apply to a real API server.
func TestManifestsAreCurrent(t *testing.T) {
	files := map[string]func() ([]byte, error){
		"authentication-config.yaml": func() ([]byte, error) { return kubetarget.AuthenticationConfig(exampleTrust) },
		"roles.yaml":                 func() ([]byte, error) { return kubetarget.Roles(exampleGrant) },
		"bindings.yaml":              func() ([]byte, error) { return kubetarget.Bindings(exampleGrant) },
		"admission-policy.yaml":      kubetarget.AdmissionPolicy,
	}
	for name, render := range files {
		want, err := render()
		require.NoError(t, err)
		if *update {
			require.NoError(t, os.WriteFile(name, want, 0o644))
			continue
		}
		have, err := os.ReadFile(name)
		require.NoError(t, err)
		require.Equal(t, string(want), string(have), "%s is not what kubetarget renders: go test ./deploy/targets/kubernetes -update", name)
	}
}
