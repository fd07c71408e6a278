package web_test

import (
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"encoding/hex"
	"io"
	"io/fs"
	"net/http"
	"path"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"gantry/cmd/gantry/webtest"
	"gantry/static"
	"gantry/views/paths"
)

// Static assets (issue 12): pages link to content-hashed names, served for a year as
// immutable; the plain name is revalidated every time; an old or wrong hash is a 404.
// Every answer has a strong ETag and honours If-None-Match; gzip is served to those who
// accept it, precompressed; Range and HEAD still work; the security headers stay.

// staticGet sends method to path with header (name, value pairs). Accept-Encoding is
// always set explicitly: without it Go's transport asks for gzip itself and hides the
// Content-Encoding of the answer.
func staticGet(t *testing.T, app *webtest.App, method, path string, header ...string) (*http.Response, []byte) {
	t.Helper()
	req, err := http.NewRequest(method, app.URL+path, nil)
	require.NoError(t, err)
	req.Header.Set("Accept-Encoding", "identity")
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	resp := do(t, app.Client(t), req)
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return resp, body
}

func gunzip(t *testing.T, b []byte) []byte {
	t.Helper()
	zr, err := gzip.NewReader(bytes.NewReader(b))
	require.NoError(t, err)
	out, err := io.ReadAll(zr)
	require.NoError(t, err)
	return out
}

func digestTag(b []byte) string {
	sum := sha256.Sum256(b)
	return `"` + hex.EncodeToString(sum[:]) + `"`
}

var staticLink = regexp.MustCompile(`(?:href|src)="(/static/[^"]*)"`)

// layoutAssets are the files the layout links to, with their Content-Type.
var layoutAssets = map[string]string{
	static.CSS:     "text/css; charset=utf-8",
	static.HTMX:    "text/javascript; charset=utf-8",
	static.HTMXSSE: "text/javascript; charset=utf-8",
	static.Favicon: "image/svg+xml",
	static.FormsJS: "text/javascript; charset=utf-8",
	static.NavJS:   "text/javascript; charset=utf-8",
	static.CopyJS:  "text/javascript; charset=utf-8",
}

func TestStaticAssets(t *testing.T) {
	t.Parallel()
	app := webtest.Start(t)
	css, err := fs.ReadFile(static.FS, static.CSS)
	require.NoError(t, err)
	hashedCSS := paths.Static(static.Hashed(static.CSS))

	t.Run("the layout links hashed names, each served as immutable", func(t *testing.T) {
		t.Parallel()
		admin := app.LoggedIn(t, "admin@acme.test")
		signedOut := webtest.ReadBody(t, app.Get(t, app.Client(t), paths.SignedOut()))
		for _, page := range []string{webtest.ReadBody(t, app.Get(t, admin, "/")), signedOut} {
			var links []string
			for _, m := range staticLink.FindAllStringSubmatch(page, -1) {
				links = append(links, m[1])
			}
			var want []string
			for name := range layoutAssets {
				want = append(want, paths.Static(static.Hashed(name)))
				// No page names an asset by its plain name: that one is revalidated on every use.
				require.NotContains(t, page, `"`+paths.Static(name)+`"`)
			}
			require.ElementsMatch(t, want, links)
		}
		for name, contentType := range layoutAssets {
			link := paths.Static(static.Hashed(name))
			require.Regexp(t, `^/static/.+\.[0-9a-f]{8}`+regexp.QuoteMeta(path.Ext(name))+`$`, link)
			resp, body := staticGet(t, app, http.MethodGet, link)
			require.Equal(t, http.StatusOK, resp.StatusCode, link)
			require.Equal(t, "public, max-age=31536000, immutable", resp.Header.Get("Cache-Control"), link)
			require.Equal(t, contentType, resp.Header.Get("Content-Type"), link)
			want, err := fs.ReadFile(static.FS, name)
			require.NoError(t, err)
			require.Equal(t, want, body, link)
			require.Equal(t, digestTag(want), resp.Header.Get("ETag"), "the ETag is the content's digest")
			require.Empty(t, resp.Header.Get("Content-Encoding"))
			require.Equal(t, strconv.Itoa(len(want)), resp.Header.Get("Content-Length"))
			// The security headers every answer carries stay.
			require.Contains(t, resp.Header.Get("Content-Security-Policy"), "default-src 'self'")
			require.Equal(t, "nosniff", resp.Header.Get("X-Content-Type-Options"))
		}
	})

	t.Run("gzip when accepted, plain when not", func(t *testing.T) {
		t.Parallel()
		for _, accept := range []string{"gzip", "gzip, deflate, br", "br;q=1.0, gzip;q=0.8", "x-gzip", "*"} {
			resp, body := staticGet(t, app, http.MethodGet, hashedCSS, "Accept-Encoding", accept)
			require.Equal(t, http.StatusOK, resp.StatusCode, accept)
			require.Equal(t, "gzip", resp.Header.Get("Content-Encoding"), accept)
			require.Contains(t, resp.Header.Values("Vary"), "Accept-Encoding", accept)
			require.Less(t, len(body), len(css), "compressed only when smaller")
			require.Equal(t, strconv.Itoa(len(body)), resp.Header.Get("Content-Length"))
			require.Equal(t, css, gunzip(t, body), "the compressed body decodes to the file")
			require.Equal(t, digestTag(body), resp.Header.Get("ETag"), "the compressed bytes have their own strong ETag")
			require.Equal(t, "text/css; charset=utf-8", resp.Header.Get("Content-Type"))
			require.Equal(t, "public, max-age=31536000, immutable", resp.Header.Get("Cache-Control"))
			require.Contains(t, resp.Header.Get("Content-Security-Policy"), "default-src 'self'")
		}
		for _, accept := range []string{"identity", "", "br", "gzip;q=0", "*, gzip;q=0", "gzip;q=0.000", "*;q=0", "gzip;q=nonsense"} {
			resp, body := staticGet(t, app, http.MethodGet, hashedCSS, "Accept-Encoding", accept)
			require.Equal(t, http.StatusOK, resp.StatusCode, accept)
			require.Empty(t, resp.Header.Get("Content-Encoding"), accept)
			require.Contains(t, resp.Header.Values("Vary"), "Accept-Encoding", "the plain answer depends on Accept-Encoding too")
			require.Equal(t, css, body, accept)
			require.Equal(t, digestTag(css), resp.Header.Get("ETag"), accept)
		}
	})

	t.Run("If-None-Match is a 304", func(t *testing.T) {
		t.Parallel()
		for _, accept := range []string{"identity", "gzip"} {
			resp, _ := staticGet(t, app, http.MethodGet, hashedCSS, "Accept-Encoding", accept)
			etag := resp.Header.Get("ETag")
			require.Regexp(t, `^"[0-9a-f]{64}"$`, etag, "a strong ETag")
			for _, inm := range []string{etag, "W/" + etag, `"other", ` + etag, "*"} {
				resp, body := staticGet(t, app, http.MethodGet, hashedCSS, "Accept-Encoding", accept, "If-None-Match", inm)
				require.Equal(t, http.StatusNotModified, resp.StatusCode, "%s: %s", accept, inm)
				require.Empty(t, body)
				require.Equal(t, etag, resp.Header.Get("ETag"))
				require.Equal(t, "public, max-age=31536000, immutable", resp.Header.Get("Cache-Control"))
				require.Empty(t, resp.Header.Get("Content-Encoding"))
			}
			resp, body := staticGet(t, app, http.MethodGet, hashedCSS, "Accept-Encoding", accept, "If-None-Match", `"`+strings.Repeat("0", 64)+`"`)
			require.Equal(t, http.StatusOK, resp.StatusCode, "another version's ETag")
			require.NotEmpty(t, body)
		}
		// The plain name has the same validators: its revalidation is a 304 too.
		resp, _ := staticGet(t, app, http.MethodGet, paths.Static(static.CSS), "If-None-Match", digestTag(css))
		require.Equal(t, http.StatusNotModified, resp.StatusCode)
		require.Equal(t, "no-cache", resp.Header.Get("Cache-Control"))
	})

	t.Run("the plain name is revalidated", func(t *testing.T) {
		t.Parallel()
		for _, accept := range []string{"identity", "gzip"} {
			resp, body := staticGet(t, app, http.MethodGet, paths.Static(static.CSS), "Accept-Encoding", accept)
			require.Equal(t, http.StatusOK, resp.StatusCode)
			require.Equal(t, "no-cache", resp.Header.Get("Cache-Control"))
			require.NotEmpty(t, resp.Header.Get("ETag"))
			if accept == "gzip" {
				body = gunzip(t, body)
			}
			require.Equal(t, css, body)
		}
	})

	t.Run("an old or wrong hash is a 404", func(t *testing.T) {
		t.Parallel()
		hashed := static.Hashed(static.CSS)
		digest := strings.TrimSuffix(strings.TrimPrefix(hashed, "css/gantry."), ".css")
		for _, p := range []string{
			"css/gantry.00000000.css",                        // an old version's
			"css/gantry." + strings.ToUpper(digest) + ".css", // not how Gantry spells it
			"css/gantry." + digest[:7] + ".css",
			hashed + ".css",
			"css/other.css",
			"css",
			"",
		} {
			resp, _ := staticGet(t, app, http.MethodGet, "/static/"+p)
			require.Equal(t, http.StatusNotFound, resp.StatusCode, p)
			require.Equal(t, "no-store", resp.Header.Get("Cache-Control"), p)
			require.Empty(t, resp.Header.Get("ETag"), p)
		}
	})

	t.Run("Range and HEAD", func(t *testing.T) {
		t.Parallel()
		// A range is of the plain bytes, also for a client that accepts gzip.
		resp, body := staticGet(t, app, http.MethodGet, hashedCSS, "Accept-Encoding", "gzip", "Range", "bytes=0-9")
		require.Equal(t, http.StatusPartialContent, resp.StatusCode)
		require.Empty(t, resp.Header.Get("Content-Encoding"))
		require.Equal(t, css[:10], body)
		require.Equal(t, "bytes 0-9/"+strconv.Itoa(len(css)), resp.Header.Get("Content-Range"))
		require.Equal(t, digestTag(css), resp.Header.Get("ETag"))

		resp, body = staticGet(t, app, http.MethodHead, hashedCSS)
		require.Equal(t, http.StatusOK, resp.StatusCode)
		require.Empty(t, body)
		require.Equal(t, strconv.Itoa(len(css)), resp.Header.Get("Content-Length"))
		require.Equal(t, digestTag(css), resp.Header.Get("ETag"))
		require.Equal(t, "public, max-age=31536000, immutable", resp.Header.Get("Cache-Control"))

		resp, body = staticGet(t, app, http.MethodHead, hashedCSS, "Accept-Encoding", "gzip")
		require.Equal(t, http.StatusOK, resp.StatusCode)
		require.Empty(t, body)
		require.Equal(t, "gzip", resp.Header.Get("Content-Encoding"))
		_, gz := staticGet(t, app, http.MethodGet, hashedCSS, "Accept-Encoding", "gzip")
		require.Equal(t, strconv.Itoa(len(gz)), resp.Header.Get("Content-Length"))
		require.Equal(t, digestTag(gz), resp.Header.Get("ETag"))

		resp, _ = staticGet(t, app, http.MethodHead, "/static/css/gantry.00000000.css")
		require.Equal(t, http.StatusNotFound, resp.StatusCode)
	})
}
