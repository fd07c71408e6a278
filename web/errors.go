package web

import (
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"strings"

	"github.com/labstack/echo/v4"

	"gantry/handlers/render"
	"gantry/models/errs"
	"gantry/views"
	"gantry/views/paths"
)

// problem is an error as a person (or a script) should see it: in JSON an RFC 9457
// problem document with a stable machine code.
type problem struct {
	Type   string            `json:"type"`
	Status int               `json:"status"`
	Title  string            `json:"title"`
	Detail string            `json:"detail"`
	Code   errs.Code         `json:"code"`
	Fields map[string]string `json:"fields,omitempty"`
}

// classify maps any error onto the one status and message it deserves. Domain errors
// carry their meaning; anything unknown is a 500 whose details stay in the log.
func classify(err error) problem {
	p := classifyGeneric(err)
	var ws *statusError
	if errors.As(err, &ws) {
		p.Status = ws.status
	}
	var ex *errs.Explained
	if errors.As(err, &ex) && p.Status < 500 {
		p.Detail = ex.Message
	}
	p.Type = "urn:gantry:problem:" + strings.ToLower(strings.ReplaceAll(string(p.Code), "_", "-"))
	return p
}

func classifyGeneric(err error) problem {
	code := errs.CodeOf(err)
	var httpErr *echo.HTTPError
	switch code {
	case errs.CodeStaleEvidence:
		return problem{Status: http.StatusConflict, Code: code, Title: "The evidence changed",
			Detail: "What you decided on is no longer what the run carries: the plan, its configuration, the state it was planned against or the policy result moved since the page was drawn. Reload the page, review again and decide again."}
	case errs.CodeApprovalExpired:
		return problem{Status: http.StatusConflict, Code: code, Title: "Too late to decide",
			Detail: "The time to decide on this run ran out before your decision was recorded, so the run has expired. Plan again to decide on a fresh plan."}
	case errs.CodeNotFound:
		return problem{Status: http.StatusNotFound, Code: code, Title: "Not found",
			Detail: "There is nothing here, or it belongs to an organization you are not acting in."}
	case errs.CodeForbidden:
		return problem{Status: http.StatusForbidden, Code: code, Title: "Not allowed",
			Detail: "Your role in this organization does not allow this. Ask an admin or owner if you need it."}
	case errs.CodeUnauthenticated:
		return problem{Status: http.StatusUnauthorized, Code: code, Title: "Sign in required", Detail: "Sign in to continue."}
	case errs.CodeConflict:
		return problem{Status: http.StatusConflict, Code: code, Title: "Conflict",
			Detail: "This clashes with a change made in the meantime. Reload and try again."}
	case errs.CodeBadRequest:
		return problem{Status: http.StatusBadRequest, Code: code, Title: "Bad request",
			Detail: "The request could not be read. Go back, check what you entered and send it again."}
	case errs.CodeRateLimited:
		// The limit's own message says when to try again (web/ratelimit.go).
		return problem{Status: http.StatusTooManyRequests, Code: code, Title: "Too many requests",
			Detail: "Too many requests of this kind came from you in a short time, so this one was not carried out. Wait a little and try again."}
	case errs.CodeInvalidInput:
		v, _ := errs.AsValidation(err)
		return problem{Status: http.StatusUnprocessableEntity, Code: code, Title: "Invalid input",
			Detail: "Some fields need correcting.", Fields: v.Fields}
	}
	if errors.As(err, &httpErr) && httpErr.Code == http.StatusRequestEntityTooLarge {
		return problem{Status: httpErr.Code, Code: httpCode(httpErr.Code), Title: "Too large to accept",
			Detail: fmt.Sprintf("What you sent is larger than Gantry accepts (%d MB at most), so nothing was saved. Go back, send less and try again.", maxBodyBytes/1_000_000)}
	}
	if errors.As(err, &httpErr) {
		msg, _ := httpErr.Message.(string)
		if msg == "" {
			msg = http.StatusText(httpErr.Code)
		}
		return problem{Status: httpErr.Code, Code: httpCode(httpErr.Code), Title: http.StatusText(httpErr.Code), Detail: msg}
	}
	return problem{Status: http.StatusInternalServerError, Code: errs.CodeInternal, Title: "Something went wrong",
		Detail: "Gantry could not finish this request. The request id below helps an admin find what happened."}
}

// statusError is an error answered with its own status, its code and message as
// the error it wraps says (an API call without an Idempotency-Key: 400 INVALID_INPUT).
type statusError struct {
	status int
	err    error
}

func (e *statusError) Error() string { return e.err.Error() }
func (e *statusError) Unwrap() error { return e.err }

func withStatus(status int, err error) error { return &statusError{status: status, err: err} }

// httpCode is the machine code of a plain HTTP error status.
func httpCode(status int) errs.Code {
	switch {
	case status == http.StatusNotFound || status == http.StatusMethodNotAllowed:
		return errs.CodeNotFound
	case status == http.StatusForbidden:
		return errs.CodeForbidden
	case status == http.StatusUnauthorized:
		return errs.CodeUnauthenticated
	case status == http.StatusConflict:
		return errs.CodeConflict
	case status == http.StatusRequestEntityTooLarge:
		return "PAYLOAD_TOO_LARGE"
	case status == http.StatusRequestedRangeNotSatisfiable:
		return "RANGE_NOT_SATISFIABLE"
	case status == http.StatusPreconditionFailed:
		return "PRECONDITION_FAILED"
	case status == http.StatusTooManyRequests:
		return errs.CodeRateLimited
	case status >= 400 && status < 500:
		return errs.CodeBadRequest
	}
	return errs.CodeInternal
}

// handleError is echo's one error handler: it logs server errors with the request id
// and answers with a page or, for API requests, JSON. An error answer is about this one
// request and may name who is signed in: no cache keeps it.
func (s *Server) handleError(err error, c echo.Context) {
	if c.Response().Committed {
		return
	}
	p := classify(err)
	if p.Status >= 500 {
		s.cfg.Logger.ErrorContext(c.Request().Context(), "request failed",
			slog.String("request_id", c.Response().Header().Get(echo.HeaderXRequestID)), slog.Any("error", err))
	}
	c.Response().Header().Set(echo.HeaderCacheControl, "no-store")
	var werr error
	switch {
	case c.Request().Method == http.MethodHead:
		werr = c.NoContent(p.Status)
	case render.WantsJSON(c) || c.Request().Header.Get("HX-Request") == "true" && p.Status == http.StatusUnauthorized:
		c.Response().Header().Set(echo.HeaderContentType, "application/problem+json")
		c.Response().WriteHeader(p.Status)
		werr = json.NewEncoder(c.Response()).Encode(p)
	case unknownPage(err):
		// An address no route answers: a page in words (the JSON above stays as it was).
		werr = render.Page(c, http.StatusNotFound, views.NotFoundPage(views.NotFoundProps{SignedIn: s.signedInChrome(c)}))
	default:
		props := views.ErrorProps{Status: p.Status, StatusLine: fmt.Sprintf("%d · %s", p.Status, http.StatusText(p.Status)), Title: p.Title, Message: p.Detail, Fields: p.Fields, ActionHref: paths.Home(), ActionLabel: "Back to the dashboard"}
		switch {
		case s.signedInChrome(c):
			if back := s.backTo(c); back != "" {
				props.ActionHref, props.ActionLabel = back, "Go back"
			}
		case p.Status == http.StatusUnauthorized || p.Status == http.StatusBadRequest || p.Status == http.StatusTooManyRequests:
			// Signed out, a 429 is a sign-in refused for a while: the way on is signing in again.
			props.ActionHref, props.ActionLabel = paths.Login(), "Sign in"
		}
		werr = render.Page(c, p.Status, views.ErrorPage(props))
	}
	if werr != nil {
		s.cfg.Logger.ErrorContext(c.Request().Context(), "writing error response", slog.Any("error", werr))
	}
}

// unknownPage reports whether err is the router's "no page here" (not a missing object,
// which the domain's not-found error explains).
func unknownPage(err error) bool {
	var httpErr *echo.HTTPError
	return errors.As(err, &httpErr) && httpErr.Code == http.StatusNotFound && errs.CodeOf(err) != errs.CodeNotFound
}

// signedInChrome makes an error page show who is signed in, also when the request was
// refused before requireMember filled the page chrome (a missing CSRF token, a body over
// the limit, bad bytes at the edge), and reports whether someone is. What fails here
// leaves the chrome of a signed-out visitor: the error page must still render.
func (s *Server) signedInChrome(c echo.Context) bool {
	if views.ChromeFrom(c.Request().Context()).SignedIn {
		return true
	}
	rs, err := s.findSession(c)
	if err != nil || !rs.found || !rs.sess.SignedIn() {
		s.setChrome(c, func(*views.Chrome) {}) // the request id in the footer
		return false
	}
	m, err := s.memberOf(c.Request().Context(), rs)
	if err != nil {
		s.cfg.Logger.WarnContext(c.Request().Context(), "error page without the signed-in user", slog.Any("error", err))
		s.setChrome(c, func(*views.Chrome) {})
		return false
	}
	s.setChrome(c, func(ch *views.Chrome) {
		m.fill(ch)
		ch.CSRFToken = maskCSRF(rs.sess.CSRFToken)
	})
	return true
}

// backTo is where an error page's way back leads: the page the request came from (its
// same-origin Referer, made safe), unless that is where it failed; "" for the dashboard.
func (s *Server) backTo(c echo.Context) string {
	ref, err := url.Parse(c.Request().Referer())
	if err != nil || ref.Host == "" {
		return ""
	}
	base, err := url.Parse(s.cfg.BaseURL)
	if err != nil || ref.Scheme != base.Scheme || ref.Host != base.Host {
		return ""
	}
	back := safeReturn(ref.RequestURI())
	if back == paths.Home() || (c.Request().Method == http.MethodGet && back == c.Request().URL.RequestURI()) {
		return ""
	}
	return back
}
