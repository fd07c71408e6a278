package telemetry

import (
	"context"
	"log/slog"
)

type logAttrsKey struct{}

// WithLog returns ctx whose log lines carry args (key-value pairs or slog.Attrs, as
// slog takes them) besides those ctx already carries: the web layer adds a request's
// id, the queue a job's run id, so every line of a request's or a run's work can be
// found by it.
func WithLog(ctx context.Context, args ...any) context.Context {
	prev, _ := ctx.Value(logAttrsKey{}).([]slog.Attr)
	var r slog.Record
	r.Add(args...)
	attrs := append([]slog.Attr(nil), prev...)
	r.Attrs(func(a slog.Attr) bool { attrs = append(attrs, a); return true })
	return context.WithValue(ctx, logAttrsKey{}, attrs)
}

// LogHandler wraps h so that a line logged with a context (InfoContext, …) carries the
// attributes WithLog put into it.
func LogHandler(h slog.Handler) slog.Handler { return logHandler{h} }

type logHandler struct{ slog.Handler }

func (l logHandler) Handle(ctx context.Context, r slog.Record) error {
	if attrs, ok := ctx.Value(logAttrsKey{}).([]slog.Attr); ok {
		r = r.Clone()
		r.AddAttrs(attrs...)
	}
	return l.Handler.Handle(ctx, r)
}

func (l logHandler) WithAttrs(attrs []slog.Attr) slog.Handler {
	return logHandler{l.Handler.WithAttrs(attrs)}
}

func (l logHandler) WithGroup(name string) slog.Handler { return logHandler{l.Handler.WithGroup(name)} }
