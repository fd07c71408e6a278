package web

import (
	"bytes"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/labstack/echo/v4"

	"gantry/handlers/render"
	"gantry/static"
)

// Cache policies of /static/. A hashed name names one version of a file forever, so it
// may be kept a year without asking again; a plain name is a file that changes with
// each release, so it is revalidated (cheaply, by its ETag) on every use.
const (
	cacheImmutable  = "public, max-age=31536000, immutable"
	cacheRevalidate = "no-cache"
)

// serveAssets answers /static/*: a file by its current hashed name or its plain name;
// an earlier version's hashed name is a 404, so a stale page cannot pin a stale file
// under a year-long cache. Every answer carries a strong ETag and honours
// If-None-Match; a client that accepts gzip gets the body compressed at start, when
// that is smaller.
func serveAssets(assets *static.Assets) echo.HandlerFunc {
	return func(c echo.Context) error {
		a, hashed, ok := assets.Lookup(c.Param("*"))
		if !ok {
			return echo.ErrNotFound
		}
		h, r := c.Response().Header(), c.Request()
		h.Set(echo.HeaderCacheControl, cacheRevalidate)
		if hashed {
			h.Set(echo.HeaderCacheControl, cacheImmutable)
		}
		h.Set(echo.HeaderContentType, a.ContentType)
		if a.Gzip != nil {
			// Both answers say they depend on Accept-Encoding, or a shared cache could
			// hand the compressed one to a client that cannot read it.
			h.Add(echo.HeaderVary, echo.HeaderAcceptEncoding)
			// A range is of the plain bytes: identity is always acceptable, and ranges of
			// a compressed body are of no use to a browser.
			if r.Header.Get("Range") == "" && render.AcceptsGzip(r.Header.Get(echo.HeaderAcceptEncoding)) {
				return serveGzip(c, a)
			}
		}
		h.Set("ETag", a.ETag)
		// ServeContent answers If-None-Match (304), If-Match, Range and HEAD.
		http.ServeContent(c.Response(), r, a.Name, time.Time{}, bytes.NewReader(a.Body))
		return nil
	}
}

// serveGzip answers with a's compressed body. http.ServeContent would not set its
// Content-Length (it assumes a Content-Encoding means compression on the fly), so this
// is the conditional GET (and HEAD) for a whole, precompressed body.
func serveGzip(c echo.Context, a *static.Asset) error {
	h := c.Response().Header()
	h.Set("ETag", a.GzipETag)
	if matchesETag(c.Request().Header.Get("If-None-Match"), a.GzipETag) {
		// A 304 carries no representation metadata (RFC 9110 §15.4.5).
		h.Del(echo.HeaderContentType)
		return c.NoContent(http.StatusNotModified)
	}
	h.Set(echo.HeaderContentEncoding, "gzip")
	h.Set(echo.HeaderContentLength, strconv.Itoa(len(a.Gzip)))
	if c.Request().Method == http.MethodHead {
		return c.NoContent(http.StatusOK)
	}
	return c.Blob(http.StatusOK, a.ContentType, a.Gzip)
}

// matchesETag reports whether an If-None-Match value names etag or is "*". The
// comparison is weak (RFC 9110 §13.1.2): a W/ prefix does not matter.
func matchesETag(ifNoneMatch, etag string) bool {
	for _, tag := range strings.Split(ifNoneMatch, ",") {
		tag = strings.TrimSpace(tag)
		if tag == "*" || strings.TrimPrefix(tag, "W/") == etag {
			return true
		}
	}
	return false
}
