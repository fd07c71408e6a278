package web

// What each request leaves behind: its id on every log line of its work, its latency in
// the metrics by route, and one access log line.

import (
	"log/slog"
	"time"

	"github.com/labstack/echo/v4"
	"github.com/labstack/echo/v4/middleware"

	"gantry/telemetry"
)

// logRequestID makes every line logged with the request's context carry its id.
func logRequestID(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		id := c.Response().Header().Get(echo.HeaderXRequestID)
		c.SetRequest(c.Request().WithContext(telemetry.WithLog(c.Request().Context(), "request_id", id)))
		return next(c)
	}
}

// observe records each request's latency by method, route pattern and status (the
// status the error handler will answer with, for an error).
func (s *Server) observe(next echo.HandlerFunc) echo.HandlerFunc {
	if s.metrics == nil {
		return next
	}
	return func(c echo.Context) error {
		start := time.Now()
		err := next(c)
		status := c.Response().Status
		if err != nil && !c.Response().Committed {
			status = classify(err).Status
		}
		s.metrics.ObserveHTTP(c.Request().Method, c.Path(), status, time.Since(start))
		return err
	}
}

// accessLog writes one line per request (its id comes from the request's context).
func (s *Server) accessLog() echo.MiddlewareFunc {
	return middleware.RequestLoggerWithConfig(middleware.RequestLoggerConfig{
		// The path only: query strings can carry OAuth codes and state.
		LogURIPath: true, LogMethod: true, LogStatus: true, LogLatency: true,
		LogRemoteIP: true, LogResponseSize: true, LogRoutePath: true,
		LogValuesFunc: func(c echo.Context, v middleware.RequestLoggerValues) error {
			level := slog.LevelInfo
			if v.Status >= 500 {
				level = slog.LevelError
			}
			// The request's context carries its id (logRequestID).
			s.cfg.Logger.LogAttrs(c.Request().Context(), level, "request", slog.String("method", v.Method),
				slog.String("path", v.URIPath), slog.String("route", v.RoutePath), slog.Int("status", v.Status),
				slog.Duration("latency", v.Latency), slog.Int64("bytes", v.ResponseSize), slog.String("remote_ip", v.RemoteIP))
			return nil
		},
	})
}
