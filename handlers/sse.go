package handlers

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/a-h/templ"
	"github.com/labstack/echo/v4"
)

// Server-sent events: the live pages' streams write through these.

// errGone is a write to a live stream whose browser went away: the stream just ends.
var errGone = errors.New("the browser closed the live stream")

// startStream answers a live stream's request: its headers, flushed at once (the
// browser's EventSource opens on them, before any event).
func startStream(w *echo.Response) {
	w.Header().Set(echo.HeaderContentType, "text/event-stream")
	w.Header().Set(echo.HeaderCacheControl, "no-store")
	w.Header().Set("X-Accel-Buffering", "no")
	w.WriteHeader(http.StatusOK)
	w.Flush()
}

// sendFragment writes comp as one SSE event named event (htmx's SSE extension swaps
// it in where sse-swap names the event).
func sendFragment(ctx context.Context, w *echo.Response, event string, comp templ.Component) error {
	return sendEvent(ctx, w, event, "", comp)
}

// sendEvent is sendFragment with an SSE id ("" none): the browser's EventSource sends
// the last id it got as Last-Event-ID when it reconnects. A failed write is errGone.
func sendEvent(ctx context.Context, w *echo.Response, event, id string, comp templ.Component) error {
	var buf bytes.Buffer
	if err := comp.Render(ctx, &buf); err != nil {
		return err
	}
	// A CR would end an SSE line as LF does; the HTML parser reads CR as LF anyway
	// (input stream preprocessing), so the swapped HTML is the same.
	html := strings.NewReplacer("\r\n", "\n", "\r", "\n").Replace(buf.String())
	var ev strings.Builder
	fmt.Fprintf(&ev, "event: %s\n", event)
	if id != "" {
		fmt.Fprintf(&ev, "id: %s\n", id)
	}
	for _, line := range strings.Split(html, "\n") {
		fmt.Fprintf(&ev, "data: %s\n", line)
	}
	ev.WriteString("\n")
	return write(w, ev.String())
}

// write writes raw SSE text and flushes it.
func write(w *echo.Response, s string) error {
	if _, err := fmt.Fprint(w, s); err != nil {
		return fmt.Errorf("%w: %w", errGone, err)
	}
	w.Flush()
	return nil
}

// waitForChange blocks until the run changes (true) or the stream ends (false),
// writing SSE comments as heartbeats meanwhile.
func waitForChange(ctx context.Context, w *echo.Response, changes <-chan struct{}, beat <-chan time.Time) bool {
	for {
		select {
		case <-ctx.Done():
			return false
		case <-beat:
			if write(w, ": keep-alive\n\n") != nil {
				return false
			}
		case <-changes:
			return true
		}
	}
}
