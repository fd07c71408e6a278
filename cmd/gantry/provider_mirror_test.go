package main

import (
	"bytes"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestServeChecksProviderMirror: gantry serve checks the operator's provider mirror at
// start, before touching the database, and says what is wrong with it; the flag and its
// variable are documented in --help.
func TestServeChecksProviderMirror(t *testing.T) {
	base := []string{"serve", "--database-url", "postgres://nobody@127.0.0.1:1/none", "--base-url", "http://x", "--oidc-issuer", "http://idp", "--oidc-client-id", "c"}
	dir := t.TempDir()
	file := filepath.Join(dir, "file")
	require.NoError(t, os.WriteFile(file, nil, 0o644))
	for _, tc := range []struct {
		flag, env string
		want      string
	}{
		{flag: filepath.Join(dir, "missing"), want: "--provider-mirror: provider mirror " + filepath.Join(dir, "missing") + ": no such directory"},
		{flag: file, want: "--provider-mirror: provider mirror " + file + ": not a directory"},
		{flag: "http://mirror.example/", want: `--provider-mirror: provider mirror "http://mirror.example/": a network mirror must be an https:// URL`},
		{env: "https://user:pw@mirror.example/", want: "--provider-mirror: provider mirror: the URL must not carry credentials"},
	} {
		t.Setenv("GANTRY_PROVIDER_MIRROR", tc.env)
		args := slices.Clone(base)
		if tc.flag != "" {
			args = append(args, "--provider-mirror", tc.flag)
		}
		var out, errOut bytes.Buffer
		require.Equal(t, 1, run(args, &out, &errOut), tc)
		require.Contains(t, errOut.String(), tc.want)
		require.NotContains(t, errOut.String(), "connect", "refused before reaching the database")
	}

	var out, errOut bytes.Buffer
	require.Equal(t, 0, run([]string{"help", "serve"}, &out, &errOut))
	require.Contains(t, out.String(), "-provider-mirror")
	require.Contains(t, out.String(), "GANTRY_PROVIDER_MIRROR")
	require.Contains(t, out.String(), "docs/provider-mirror.md")
}
