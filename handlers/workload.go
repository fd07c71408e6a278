package handlers

import (
	"context"
	"errors"
	"net/http"

	"github.com/labstack/echo/v4"

	"gantry/models/identity"
	"gantry/views/paths"
)

// WorkloadIssuer is the workload identity issuer's public half (identity.Issuer):
// what a cloud that trusts Gantry's workload tokens fetches and asks.
type WorkloadIssuer interface {
	Discovery() []byte
	JWKS(ctx context.Context) ([]byte, error)
	Introspect(ctx context.Context, token string) (identity.Introspection, error)
}

// Workload serves the issuer to clouds: discovery, keys and introspection. It lives
// outside the browser session and CSRF middleware: a cloud has neither, and an
// introspection request is authorized by the token it asks about (the answer says only
// whether that token is live, which its holder may know).
type Workload struct {
	Issuer WorkloadIssuer
}

// Register adds the issuer's routes to g, which must not carry the session or CSRF
// middleware.
func (h Workload) Register(g *echo.Group) {
	g.GET(paths.WorkloadDiscovery(), h.discovery)
	g.GET(paths.WorkloadJWKS(), h.jwks)
	// GET too, so that a caller who tries it is told how to ask rather than a bare 405.
	g.Match([]string{http.MethodGet, http.MethodPost}, paths.WorkloadIntrospection(), h.introspect)
}

func (h Workload) discovery(c echo.Context) error {
	c.Response().Header().Set(echo.HeaderCacheControl, "public, max-age=300")
	return c.Blob(http.StatusOK, echo.MIMEApplicationJSON, h.Issuer.Discovery())
}

func (h Workload) jwks(c echo.Context) error {
	keys, err := h.Issuer.JWKS(c.Request().Context())
	if err != nil {
		return err
	}
	c.Response().Header().Set(echo.HeaderCacheControl, "public, max-age=60")
	return c.Blob(http.StatusOK, echo.MIMEApplicationJSON, keys)
}

// introspect answers RFC 7662's question for the token in the POSTed form field token:
// {"active":false} for anything not live, the token's claims when it is. No answer is
// cached and none is audited: a cloud asks at every call a token makes.
func (h Workload) introspect(c echo.Context) error {
	c.Response().Header().Set(echo.HeaderCacheControl, "no-store")
	r := c.Request()
	if r.Method != http.MethodPost {
		return introspectionRefused(c, http.StatusBadRequest, "introspection takes a POST with the token in the form field token (RFC 7662)")
	}
	// The body only: a token in the address would end up in access logs.
	token := r.PostFormValue("token")
	if token == "" {
		return introspectionRefused(c, http.StatusBadRequest, "send the token in the form field token (application/x-www-form-urlencoded)")
	}
	answer, err := h.Issuer.Introspect(r.Context(), token)
	if errors.Is(err, identity.ErrNoIntrospection) {
		return introspectionRefused(c, http.StatusNotFound, err.Error())
	}
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, answer)
}

// introspectionRefused answers in OAuth's error form (RFC 6749 §5.2), which RFC 7662
// uses.
func introspectionRefused(c echo.Context, status int, why string) error {
	return c.JSON(status, map[string]string{"error": "invalid_request", "error_description": why})
}
