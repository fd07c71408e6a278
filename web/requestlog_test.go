package web_test

import (
	"bufio"
	"bytes"
	"encoding/json"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"gantry/bench"
	"gantry/cmd/gantry/webtest"
	"gantry/models/authz"
)

// TestRequestLogLinesCarryTheRequestID: the access log line of a request carries its id
// once, the one the answer's X-Request-Id names.
func TestRequestLogLinesCarryTheRequestID(t *testing.T) {
	t.Parallel()
	var log lockedBuffer
	app := webtest.StartWith(t, webtest.Options{Log: &log})
	token := app.Token(t, app.NewMember(t, "acme", "Lou Log", authz.RoleViewer, false), "read")
	resp := app.API(t, token, http.MethodGet, "/api/v1/templates", "")
	webtest.ReadBody(t, resp)
	id := resp.Header.Get("X-Request-Id")
	require.NotEmpty(t, id)
	// The access line is written once the answer went out: wait for it, woken by each
	// write to the log.
	var line map[string]any
	bench.Eventually(t, "the request's access log line", 5*time.Second, func() (bool, any) {
		sc := bufio.NewScanner(strings.NewReader(log.String()))
		for sc.Scan() {
			if strings.Contains(sc.Text(), `"msg":"request"`) && strings.Contains(sc.Text(), id) {
				require.Equal(t, 1, strings.Count(sc.Text(), `"request_id"`), "the id once: %s", sc.Text())
				require.NoError(t, json.Unmarshal(sc.Bytes(), &line))
				return true, nil
			}
		}
		return false, "no line for " + id
	}, bench.Wake(log.Written()))
	require.Equal(t, id, line["request_id"])
	require.Equal(t, "/api/v1/templates", line["route"])
}

// lockedBuffer is a log sink safe for concurrent writers. Written signals after each
// write: the event a test waiting for a log line wakes on.
type lockedBuffer struct {
	mu    sync.Mutex
	b     bytes.Buffer
	wrote chan struct{}
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	n, err := l.b.Write(p)
	select {
	case l.signal() <- struct{}{}:
	default: // a signal is already pending
	}
	return n, err
}

// Written receives a signal after writes (they coalesce: one pending at most), so a
// waiter reads the whole buffer again after each.
func (l *lockedBuffer) Written() <-chan struct{} {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.signal()
}

// signal is the channel Written returns, made on first use (l.mu held).
func (l *lockedBuffer) signal() chan struct{} {
	if l.wrote == nil {
		l.wrote = make(chan struct{}, 1)
	}
	return l.wrote
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}
