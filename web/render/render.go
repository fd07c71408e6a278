// Package render writes templ components and JSON as echo responses. It sits below
// both web (the error handler) and handlers, so both render the same way.
package render

import (
	"net/http"
	"strings"

	"github.com/a-h/templ"
	"github.com/labstack/echo/v4"
)

// Page writes component comp with status.
func Page(c echo.Context, status int, comp templ.Component) error {
	w := c.Response()
	w.Header().Set(echo.HeaderContentType, echo.MIMETextHTMLCharsetUTF8)
	w.WriteHeader(status)
	return comp.Render(c.Request().Context(), w)
}

// Fragment writes only the templ.Fragment named id of comp: htmx partials come from
// the same component as the full page, never from a twin handler.
func Fragment(c echo.Context, status int, comp templ.Component, id string) error {
	w := c.Response()
	w.Header().Set(echo.HeaderContentType, echo.MIMETextHTMLCharsetUTF8)
	w.WriteHeader(status)
	return templ.RenderFragments(c.Request().Context(), w, comp, id)
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
