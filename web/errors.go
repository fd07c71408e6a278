package web

import (
	"errors"
	"log/slog"
	"net/http"

	"github.com/labstack/echo/v4"

	"gantry/models/errs"
	"gantry/views"
	"gantry/web/paths"
	"gantry/web/render"
)

// problem is an error as a person (or a script) should see it.
type problem struct {
	Status  int               `json:"status"`
	Title   string            `json:"title"`
	Message string            `json:"message"`
	Fields  map[string]string `json:"fields,omitempty"`
}

// classify maps any error onto the one status and message it deserves. Domain errors
// carry their meaning; anything unknown is a 500 whose details stay in the log.
func classify(err error) problem {
	p := classifyGeneric(err)
	var ex *errs.Explained
	if errors.As(err, &ex) && p.Status < 500 {
		p.Message = ex.Message
	}
	return p
}

func classifyGeneric(err error) problem {
	var httpErr *echo.HTTPError
	switch {
	case errors.Is(err, errs.ErrNotFound):
		return problem{Status: http.StatusNotFound, Title: "Not found",
			Message: "There is nothing here, or it belongs to an organization you are not acting in."}
	case errors.Is(err, errs.ErrForbidden):
		return problem{Status: http.StatusForbidden, Title: "Not allowed",
			Message: "Your role in this organization does not allow this. Ask an admin or owner if you need it."}
	case errors.Is(err, errs.ErrUnauthenticated):
		return problem{Status: http.StatusUnauthorized, Title: "Sign in required", Message: "Sign in to continue."}
	case errors.Is(err, errs.ErrConflict):
		return problem{Status: http.StatusConflict, Title: "Conflict",
			Message: "This clashes with a change made in the meantime. Reload and try again."}
	case errors.As(err, &httpErr):
		msg, _ := httpErr.Message.(string)
		if msg == "" {
			msg = http.StatusText(httpErr.Code)
		}
		return problem{Status: httpErr.Code, Title: http.StatusText(httpErr.Code), Message: msg}
	}
	if v, ok := errs.AsValidation(err); ok {
		return problem{Status: http.StatusUnprocessableEntity, Title: "Invalid input",
			Message: "Some fields need correcting.", Fields: v.Fields}
	}
	return problem{Status: http.StatusInternalServerError, Title: "Something went wrong",
		Message: "Gantry could not finish this request. The request id below helps an admin find what happened."}
}

// handleError is echo's one error handler: it logs server errors with the request id
// and answers with a page or, for API requests, JSON.
func (s *Server) handleError(err error, c echo.Context) {
	if c.Response().Committed {
		return
	}
	p := classify(err)
	if p.Status >= 500 {
		s.cfg.Logger.ErrorContext(c.Request().Context(), "request failed",
			slog.String("request_id", c.Response().Header().Get(echo.HeaderXRequestID)), slog.Any("error", err))
	}
	var werr error
	switch {
	case c.Request().Method == http.MethodHead:
		werr = c.NoContent(p.Status)
	case render.WantsJSON(c) || c.Request().Header.Get("HX-Request") == "true" && p.Status == http.StatusUnauthorized:
		werr = c.JSON(p.Status, p)
	default:
		props := views.ErrorProps{Status: p.Status, Title: p.Title, Message: p.Message, Fields: p.Fields, ActionHref: paths.Home(), ActionLabel: "Back to the dashboard"}
		if p.Status == http.StatusUnauthorized || p.Status == http.StatusBadRequest {
			props.ActionHref, props.ActionLabel = paths.Login(), "Sign in"
		}
		werr = render.Page(c, p.Status, views.ErrorPage(props))
	}
	if werr != nil {
		s.cfg.Logger.ErrorContext(c.Request().Context(), "writing error response", slog.Any("error", werr))
	}
}
