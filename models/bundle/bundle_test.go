package bundle_test

import (
	"archive/tar"
	"bytes"
	"testing"

	"github.com/stretchr/testify/require"

	"gantry/models/bundle"
)

func TestTarIsDeterministicAndRoundTrips(t *testing.T) {
	t.Parallel()
	b := bundle.Bundle{Files: map[string][]byte{"main.tf": []byte("a"), "modules/x/main.tf": []byte("b"), ".terraform.lock.hcl": []byte("c")}}
	one, d1, err := b.Tar()
	require.NoError(t, err)
	two, d2, err := bundle.Bundle{Files: map[string][]byte{"modules/x/main.tf": []byte("b"), ".terraform.lock.hcl": []byte("c"), "main.tf": []byte("a")}}.Tar()
	require.NoError(t, err)
	require.Equal(t, one, two)
	require.Equal(t, d1, d2)
	require.Regexp(t, `^sha256:[0-9a-f]{64}$`, d1)

	back, err := bundle.FromTar(one)
	require.NoError(t, err)
	require.Equal(t, b.Files, back.Files)

	b.Files["main.tf"] = []byte("A")
	_, d3, err := b.Tar()
	require.NoError(t, err)
	require.NotEqual(t, d1, d3)
}

func TestRefusesUnsafePaths(t *testing.T) {
	t.Parallel()
	for _, name := range []string{"../escape", "/abs", "a/../../b", "a\\b", ""} {
		_, _, err := bundle.Bundle{Files: map[string][]byte{name: nil}}.Tar()
		require.Error(t, err, name)
	}
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	require.NoError(t, tw.WriteHeader(&tar.Header{Name: "link", Typeflag: tar.TypeSymlink, Linkname: "/etc/passwd"}))
	require.NoError(t, tw.Close())
	_, err := bundle.FromTar(buf.Bytes())
	require.ErrorContains(t, err, "not a regular file")
}
