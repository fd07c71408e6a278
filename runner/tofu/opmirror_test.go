package tofu

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestParseProviderMirror: the operator's --provider-mirror is checked at start, and each
// refusal says what is wrong with the value.
func TestParseProviderMirror(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "file")
	require.NoError(t, os.WriteFile(file, nil, 0o644))
	loop := filepath.Join(dir, "loop")
	require.NoError(t, os.Symlink(loop, loop))
	t.Chdir(dir)
	require.NoError(t, os.Mkdir("relative", 0o755))

	for _, tc := range []struct {
		value string
		want  ProviderMirror
		err   string
	}{
		{value: "", want: ProviderMirror{}},
		{value: "registry", want: ProviderMirror{Registry: true}},
		{value: dir, want: ProviderMirror{Dir: dir}},
		{value: "relative", want: ProviderMirror{Dir: filepath.Join(dir, "relative")}},
		{value: "https://mirror.example/providers/", want: ProviderMirror{URL: "https://mirror.example/providers/"}},
		{value: "https://mirror.example/providers", want: ProviderMirror{URL: "https://mirror.example/providers/"}},
		{value: "https://mirror.example:8443", want: ProviderMirror{URL: "https://mirror.example:8443/"}},
		{value: filepath.Join(dir, "missing"), err: "provider mirror " + filepath.Join(dir, "missing") + ": no such directory (fill one with `tofu providers mirror"},
		{value: file, err: "provider mirror " + file + ": not a directory"},
		{value: loop, err: "provider mirror " + loop + ": stat " + loop + ": too many levels of symbolic links"},
		{value: "http://mirror.example/", err: `provider mirror "http://mirror.example/": a network mirror must be an https:// URL`},
		{value: "ftp://mirror.example/", err: "must be an https:// URL"},
		{value: "https:///providers/", err: "the URL has no host"},
		{value: "https://user:secret@mirror.example/", err: "provider mirror: the URL must not carry credentials"},
		{value: "https://mirror.example/?token=x", err: "the URL must have no query or fragment"},
		{value: "https://mirror.example/#x", err: "the URL must have no query or fragment"},
	} {
		got, err := ParseProviderMirror(tc.value)
		if tc.err != "" {
			require.ErrorIs(t, err, ErrProviderMirror, tc.value)
			require.ErrorContains(t, err, tc.err)
			require.NotContains(t, err.Error(), "secret", "credentials are not repeated")
			continue
		}
		require.NoError(t, err, tc.value)
		require.Equal(t, tc.want, got, tc.value)
		require.Equal(t, tc.value != "", got.String() != "")
	}
}
