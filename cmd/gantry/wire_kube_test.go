package main

import (
	"bytes"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestServeKubernetesFlags: tofu/kubernetes as the default needs its runner image, and
// needs no OpenTofu binary on the portal's host (the pods carry their own): serve refuses
// the first before touching anything, and does not ask the second for --tofu.
func TestServeKubernetesFlags(t *testing.T) {
	base := []string{"serve", "--database-url", "postgres://nobody@127.0.0.1:1/none", "--base-url", "http://x", "--oidc-issuer", "http://idp",
		"--oidc-client-id", "c", "--runner", "tofu/kubernetes", "--migrate=false"}
	var out, errOut bytes.Buffer
	require.Equal(t, 1, run(base, &out, &errOut))
	require.Contains(t, errOut.String(), "--runner tofu/kubernetes: --kube-image is not set")
	require.NotContains(t, errOut.String(), "connect", "refused before reaching the database")

	out.Reset()
	errOut.Reset()
	require.Equal(t, 1, run(append(base, "--kube-image", "gantry.local/runner:x"), &out, &errOut))
	require.NotContains(t, errOut.String(), "--tofu", "the pods carry their own tofu")
}
