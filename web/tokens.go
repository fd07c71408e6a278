package web

import (
	"context"
	"net/http"
	"strings"

	"github.com/labstack/echo/v4"

	"gantry/models/authz"
	"gantry/models/errs"
)

// TokenAuthenticator turns an API token into the subject it acts as (apitoken.Service).
type TokenAuthenticator interface {
	Authenticate(ctx context.Context, raw string) (authz.Subject, error)
}

// tokenKey marks a request authenticated by an API token.
const tokenKey = "gantry.token"

// viaToken reports whether the request was authenticated by an API token.
func viaToken(c echo.Context) bool { v, _ := c.Get(tokenKey).(bool); return v }

// bearer authenticates a request that carries `Authorization: Bearer <token>`: on the
// JSON API only, it acts as the token's holder narrowed to its scopes, with no session
// and no CSRF token (a bearer token is not sent by a browser on its own, so it cannot be
// forged across sites). Cookies never authenticate the API without CSRF: a request
// without a bearer token goes through the session and CSRF checks as any other. A wrong
// token counts against its client address's limit (RateLimits.FailedToken).
func (s *Server) bearer(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		scheme, raw, found := strings.Cut(c.Request().Header.Get(echo.HeaderAuthorization), " ")
		if !found || !strings.EqualFold(scheme, "Bearer") {
			return next(c)
		}
		c.Response().Header().Set(echo.HeaderWWWAuthenticate, `Bearer realm="gantry"`)
		if !strings.HasPrefix(c.Request().URL.Path, "/api/") {
			return errs.Explain(errs.ErrUnauthenticated, "API tokens work on the JSON API (/api/v1) only; pages need a sign-in.")
		}
		if s.tokens == nil {
			return errs.Explain(errs.ErrUnauthenticated, "This Gantry takes no API tokens.")
		}
		// Wrong tokens count per client address (failures.go): an address over the limit
		// is refused here, before its token is looked up, whether it is right or wrong.
		ip := clientAddress(c)
		if err := s.stillRefused(c, limitFailedToken, ip, whyFailedToken); err != nil {
			return err
		}
		subject, err := s.tokens.Authenticate(c.Request().Context(), strings.TrimSpace(raw))
		if err != nil {
			if errs.CodeOf(err) != errs.CodeUnauthenticated {
				return err
			}
			c.Response().Header().Set(echo.HeaderWWWAuthenticate, `Bearer realm="gantry", error="invalid_token"`)
			if over := s.failed(c, s.cfg.RateLimits.FailedToken, limitFailedToken, ip, whyFailedToken); over != nil {
				return over
			}
			return err
		}
		c.Set(tokenKey, true)
		c.Response().Header().Set(echo.HeaderCacheControl, "no-store")
		c.SetRequest(c.Request().WithContext(authz.WithSubject(c.Request().Context(), subject)))
		return next(c)
	}
}

// methodNeedsNoCSRF reports the methods a CSRF check leaves alone.
func methodNeedsNoCSRF(method string) bool {
	return method == http.MethodGet || method == http.MethodHead || method == http.MethodOptions
}
