package static_test

import (
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"io/fs"
	"strings"
	"testing"
	"testing/fstest"

	"github.com/stretchr/testify/require"

	"gantry/static"
)

func TestLoadNamesByContent(t *testing.T) {
	t.Parallel()
	css := []byte(strings.Repeat("body { color: black; }\n", 50))
	sum := sha256.Sum256(css)
	digest := hex.EncodeToString(sum[:])
	a, err := static.Load(fstest.MapFS{
		"css/app.css":         {Data: css},
		"vendor/lib-1.2.3.js": {Data: []byte(strings.Repeat("x();", 100))},
	})
	require.NoError(t, err)

	asset, hashed, ok := a.Lookup("css/app.css")
	require.True(t, ok)
	require.False(t, hashed)
	require.Equal(t, "css/app."+digest[:8]+".css", asset.Hashed, "the digest's prefix goes before the extension")
	require.Equal(t, "css/app."+digest[:8]+".css", a.Hashed("css/app.css"))
	require.Equal(t, `"`+digest+`"`, asset.ETag)
	require.Equal(t, "text/css; charset=utf-8", asset.ContentType)

	same, hashed, ok := a.Lookup(asset.Hashed)
	require.True(t, ok)
	require.True(t, hashed)
	require.Same(t, asset, same)

	// Only the last extension moves: a version in the name stays.
	require.Regexp(t, `^vendor/lib-1\.2\.3\.[0-9a-f]{8}\.js$`, a.Hashed("vendor/lib-1.2.3.js"))

	// Another version of the file is another name; the old one is not found.
	b, err := static.Load(fstest.MapFS{"css/app.css": {Data: append(css, '\n')}})
	require.NoError(t, err)
	require.NotEqual(t, asset.Hashed, b.Hashed("css/app.css"))
	_, _, ok = b.Lookup(asset.Hashed)
	require.False(t, ok)

	require.Panics(t, func() { a.Hashed("css/missing.css") }, "a name that is not embedded is a programming error")
}

func TestLoadCompressesOnlyWhenSmaller(t *testing.T) {
	t.Parallel()
	noise := make([]byte, 4096)
	_, err := rand.Read(noise)
	require.NoError(t, err)
	a, err := static.Load(fstest.MapFS{
		"css/app.css":   {Data: []byte(strings.Repeat("body { color: black; }\n", 50))},
		"img/noise.svg": {Data: noise},
		"img/tiny.svg":  {Data: []byte("<svg/>")},
	})
	require.NoError(t, err)
	css, _, _ := a.Lookup("css/app.css")
	require.NotNil(t, css.Gzip)
	require.Less(t, len(css.Gzip), len(css.Body))
	sum := sha256.Sum256(css.Gzip)
	require.Equal(t, `"`+hex.EncodeToString(sum[:])+`"`, css.GzipETag, "the compressed bytes' own digest")
	for _, name := range []string{"img/noise.svg", "img/tiny.svg"} {
		asset, _, _ := a.Lookup(name)
		require.Nil(t, asset.Gzip, name)
		require.Empty(t, asset.GzipETag, name)
	}
}

func TestLoadRefusesUnknownKinds(t *testing.T) {
	t.Parallel()
	_, err := static.Load(fstest.MapFS{"img/logo.png": {Data: []byte("png")}})
	require.ErrorContains(t, err, `no content type for ".png" files`)
}

// TestEmbedded: every embedded file is served by its hashed name, and the layout's
// names are embedded (a vendored file renamed without its constant fails at start).
func TestEmbedded(t *testing.T) {
	t.Parallel()
	n := 0
	err := fs.WalkDir(static.FS, ".", func(name string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		n++
		asset, hashed, ok := static.Embedded().Lookup(static.Hashed(name))
		require.True(t, ok, name)
		require.True(t, hashed, name)
		require.Equal(t, name, asset.Name)
		return nil
	})
	require.NoError(t, err)
	require.GreaterOrEqual(t, n, 4)
	for _, name := range []string{static.CSS, static.HTMX, static.HTMXSSE, static.Favicon, static.FormsJS, static.NavJS, static.CopyJS} {
		_, _, ok := static.Embedded().Lookup(name)
		require.True(t, ok, name)
	}
}
