// Package render writes templ components and JSON as echo responses. It sits below
// both web (the error handler) and handlers, so both render the same way.
package render

import (
	"bytes"
	"compress/gzip"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync"

	"github.com/a-h/templ"
	"github.com/labstack/echo/v4"
)

// Page writes component comp with status.
func Page(c echo.Context, status int, comp templ.Component) error {
	return write(c, status, func(w io.Writer) error { return comp.Render(c.Request().Context(), w) })
}

// Fragment writes only the templ.Fragment named id of comp: htmx partials come from
// the same component as the full page, never from a twin handler.
func Fragment(c echo.Context, status int, comp templ.Component, id string) error {
	return write(c, status, func(w io.Writer) error { return templ.RenderFragments(c.Request().Context(), w, comp, id) })
}

// minGzip is the smallest page worth compressing: below it, gzip's header and the
// work cost more than they save.
const minGzip = 1024

var (
	buffers = sync.Pool{New: func() any { return new(bytes.Buffer) }}
	zippers = sync.Pool{New: func() any { w, _ := gzip.NewWriterLevel(nil, gzip.DefaultCompression); return w }}
)

func borrow() *bytes.Buffer {
	b := buffers.Get().(*bytes.Buffer)
	b.Reset()
	return b
}

// giveBack keeps a buffer for the next page unless a huge page grew it: the pool would
// hold that memory for good.
func giveBack(b *bytes.Buffer) {
	if b.Cap() <= 1<<20 {
		buffers.Put(b)
	}
}

// write renders a page into a buffer first, so a component that fails half way is an
// error page rather than half a page, then sends it, gzip-compressed to a client that
// accepts it (pages are mostly markup that repeats row after row: a list of 50 rows is
// a tenth of its size compressed). Compression is safe beside the text pages reflect
// because they hold no fixed secret: the CSRF token is masked afresh for every
// response (web/csrf.go), and the session cookie never enters a body.
func write(c echo.Context, status int, render func(io.Writer) error) error {
	buf := borrow()
	defer giveBack(buf)
	if err := render(buf); err != nil {
		return err
	}
	h := c.Response().Header()
	h.Set(echo.HeaderContentType, echo.MIMETextHTMLCharsetUTF8)
	h.Add(echo.HeaderVary, echo.HeaderAcceptEncoding)
	if buf.Len() < minGzip || !AcceptsGzip(c.Request().Header.Get(echo.HeaderAcceptEncoding)) {
		c.Response().WriteHeader(status)
		_, err := c.Response().Write(buf.Bytes())
		return err
	}
	zipped := borrow()
	defer giveBack(zipped)
	zw := zippers.Get().(*gzip.Writer)
	defer zippers.Put(zw)
	zw.Reset(zipped)
	if _, err := zw.Write(buf.Bytes()); err != nil {
		return err
	}
	if err := zw.Close(); err != nil {
		return err
	}
	h.Set(echo.HeaderContentEncoding, "gzip")
	h.Set(echo.HeaderContentLength, strconv.Itoa(zipped.Len()))
	c.Response().WriteHeader(status)
	_, err := c.Response().Write(zipped.Bytes())
	return err
}

// Redirect sends the browser to url after a successful form post: 303 for a plain
// form, HX-Redirect for htmx (which would otherwise swap the target page in place).
func Redirect(c echo.Context, url string) error {
	if c.Request().Header.Get("HX-Request") == "true" {
		c.Response().Header().Set("HX-Redirect", url)
		return c.NoContent(http.StatusNoContent)
	}
	return c.Redirect(http.StatusSeeOther, url)
}

// WantsJSON reports whether the client asked for JSON: every /api/ route, and any
// request whose Accept header prefers application/json over HTML.
func WantsJSON(c echo.Context) bool {
	if strings.HasPrefix(c.Request().URL.Path, "/api/") {
		return true
	}
	return strings.HasPrefix(c.Request().Header.Get(echo.HeaderAccept), echo.MIMEApplicationJSON)
}

// Flasher adds a one-time message to the session; web installs one per request.
type Flasher func(kind, message string) error

const flashKey = "gantry.flash"

// SetFlasher is called by the session middleware.
func SetFlasher(c echo.Context, f Flasher) { c.Set(flashKey, f) }

// Flash queues a message for the next page. Without a session it does nothing.
func Flash(c echo.Context, kind, message string) error {
	if f, ok := c.Get(flashKey).(Flasher); ok {
		return f(kind, message)
	}
	return nil
}

// AcceptsGzip reports whether an Accept-Encoding value allows gzip: named (or as
// x-gzip) or covered by "*", with a weight above zero. A weight that cannot be read
// counts as zero: a client Gantry does not understand gets the plain bytes.
func AcceptsGzip(acceptEncoding string) bool {
	star := false
	for _, part := range strings.Split(acceptEncoding, ",") {
		coding, params, _ := strings.Cut(part, ";")
		accepted := true
		for _, p := range strings.Split(params, ";") {
			if v, ok := strings.CutPrefix(strings.ToLower(strings.TrimSpace(p)), "q="); ok {
				q, err := strconv.ParseFloat(v, 64)
				accepted = err == nil && q > 0
			}
		}
		switch strings.ToLower(strings.TrimSpace(coding)) {
		case "gzip", "x-gzip":
			return accepted
		case "*":
			star = accepted
		}
	}
	return star
}

// OnFlash calls see with each flash message the request queues, as it queues it: the
// web layer's idempotency keeps a form's flash to show it again to a repeat.
func OnFlash(c echo.Context, see func(kind, message string)) {
	f, ok := c.Get(flashKey).(Flasher)
	if !ok {
		return
	}
	c.Set(flashKey, Flasher(func(kind, message string) error {
		see(kind, message)
		return f(kind, message)
	}))
}

const (
	replayToKey = "gantry.replay_to"
	notKeptKey  = "gantry.not_kept"
)

// ReplayTo says where a repeat of this form request (same idempotency key) is sent
// when the handler answers with a page rather than a redirect: the page itself (a
// secret shown once) is never kept.
func ReplayTo(c echo.Context, location string) { c.Set(replayToKey, location) }

// ReplayLocation is what ReplayTo set ("": nothing).
func ReplayLocation(c echo.Context) string { s, _ := c.Get(replayToKey).(string); return s }

// DoNotKeep says this API answer holds a secret: its idempotency key is kept, its body
// is not, and a repeat is told the request was done.
func DoNotKeep(c echo.Context) { c.Set(notKeptKey, true) }

// NotKept reports whether DoNotKeep was said.
func NotKept(c echo.Context) bool { v, _ := c.Get(notKeptKey).(bool); return v }
