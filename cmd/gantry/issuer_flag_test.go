package main

import (
	"bytes"
	"context"
	"crypto/x509"
	"encoding/pem"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestWorkloadIssuerFlags: the issuer's URL and its TLS listener are documented in
// --help, conflicting or malformed settings are refused at start (before the database),
// and --workload-tls opens a listener whose https URL becomes the issuer's, with its CA
// written for the targets.
func TestWorkloadIssuerFlags(t *testing.T) {
	var out, errOut bytes.Buffer
	require.Equal(t, 0, run([]string{"help", "serve"}, &out, &errOut))
	for _, f := range []string{"-workload-issuer-url string", "-workload-tls string", "-workload-tls-ca string", "$GANTRY_WORKLOAD_TLS"} {
		require.Contains(t, out.String(), f)
	}
	base := []string{"serve", "--database-url", "postgres://nobody@127.0.0.1:1/none", "--base-url", "http://x", "--oidc-issuer", "http://idp", "--oidc-client-id", "c"}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--workload-tls", "127.0.0.1:0", "--workload-issuer-url", "https://g.example/workload"}, "drop --workload-issuer-url"},
		{[]string{"--workload-tls-ca", "/tmp/ca.pem"}, "--workload-tls-ca needs --workload-tls"},
		{[]string{"--workload-issuer-url", "ftp://g.example/workload"}, "is not an http(s) URL"},
		{[]string{"--workload-issuer-url", "https://user:pw@g.example/workload"}, "is not an http(s) URL"},
	} {
		out.Reset()
		errOut.Reset()
		require.Equal(t, 1, run(append(slices.Clone(base), tc.args...), &out, &errOut), tc.args)
		require.Contains(t, errOut.String(), tc.want)
		require.NotContains(t, errOut.String(), "connect", "refused before reaching the database")
	}

	caFile := filepath.Join(t.TempDir(), "issuer-ca.pem")
	i := &issuerFlags{tls: "127.0.0.1:0", caFile: caFile}
	require.NoError(t, i.check())
	require.NoError(t, i.open(slog.New(slog.NewTextHandler(io.Discard, nil))))
	t.Cleanup(func() { i.listening.Close(context.Background()) })
	require.True(t, strings.HasPrefix(i.issuerURL(), "https://127.0.0.1:"), i.issuerURL())
	require.True(t, strings.HasSuffix(i.issuerURL(), "/workload"))
	body, err := os.ReadFile(caFile)
	require.NoError(t, err)
	block, _ := pem.Decode(body)
	require.NotNil(t, block)
	ca, err := x509.ParseCertificate(block.Bytes)
	require.NoError(t, err)
	require.True(t, ca.IsCA)
	require.NotContains(t, string(body), "PRIVATE KEY")

	require.ErrorContains(t, (&issuerFlags{tls: ":0"}).open(slog.New(slog.NewTextHandler(io.Discard, nil))), "names no host")
	require.Empty(t, (*issuerFlags)(nil).issuerURL())
	require.Equal(t, "https://g.example/workload", (&issuerFlags{url: "https://g.example/workload"}).issuerURL())
}
