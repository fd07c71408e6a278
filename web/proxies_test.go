package web_test

import (
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/stretchr/testify/require"

	"gantry/cmd/gantry/webtest"
	"gantry/models/ratelimit"
	"gantry/web"
)

// fromPeer sends a callback that signs no one in to srv as a connection from peer
// carrying X-Forwarded-For xff, and returns the answer (the access log line is written
// by the time ServeHTTP returns).
func fromPeer(srv *web.Server, peer, xff string) *httptest.ResponseRecorder {
	req := httptest.NewRequest(http.MethodGet, "/auth/callback?state=x&code=y", nil)
	req.RemoteAddr = net.JoinHostPort(peer, "40000")
	req.Header.Set("X-Forwarded-For", xff)
	rec := httptest.NewRecorder()
	srv.Echo.ServeHTTP(rec, req)
	return rec
}

// TestServeTrustsNoProxyUnlessConfigured: configured as gantry serve is without
// --trusted-proxies (web.Config.TrustedProxies empty), a peer on a private network
// (10.0.0.0/8) that names a new client address in X-Forwarded-For with each request is
// still counted, and logged, as itself: its failed sign-ins meet the per-address limit
// whatever it claims. Configured with its network as a proxy's, the same requests count
// per forwarded address.
func TestServeTrustsNoProxyUnlessConfigured(t *testing.T) {
	t.Parallel()
	var log lockedBuffer
	limits := func() *web.RateLimits {
		return &web.RateLimits{Now: newTestClock().now, FailedSignIn: ratelimit.Rate{PerMinute: 1, Burst: 3}}
	}
	app := webtest.StartWith(t, webtest.Options{Log: &log, RateLimits: limits()})

	const peer = "10.1.2.3"
	for i := range 3 {
		rec := fromPeer(app.Server, peer, fmt.Sprintf("198.51.100.%d", i+1))
		require.Equal(t, http.StatusBadRequest, rec.Code, "failure %d: %s", i+1, rec.Body)
		line := logLines(t, log.String(), `"msg":"request"`, rec.Header().Get("X-Request-Id"))
		require.Len(t, line, 1)
		require.Equal(t, peer, line[0]["remote_ip"], "the access log names the peer, not the header")
	}
	rec := fromPeer(app.Server, peer, "198.51.100.200")
	require.Equal(t, http.StatusTooManyRequests, rec.Code, "a new address in the header is no escape: %s", rec.Body)
	require.Equal(t, "60", rec.Header().Get("Retry-After"))
	rec = fromPeer(app.Server, "10.9.9.9", "198.51.100.1")
	require.Equal(t, http.StatusBadRequest, rec.Code, "another peer counts apart, even naming a refused address")

	// Trusted when configured: the private network is the proxies', and each forwarded
	// client counts apart (and is logged) as the header names it.
	proxied := webtest.StartWith(t, webtest.Options{Log: &log, RateLimits: limits(), TrustedProxies: []string{"10.0.0.0/8"}})
	for i := range 5 {
		xff := fmt.Sprintf("198.51.100.%d", i+1)
		rec := fromPeer(proxied.Server, peer, xff)
		require.Equal(t, http.StatusBadRequest, rec.Code, "client %s behind the proxy: %s", xff, rec.Body)
		line := logLines(t, log.String(), `"msg":"request"`, rec.Header().Get("X-Request-Id"))
		require.Len(t, line, 1)
		require.Equal(t, xff, line[0]["remote_ip"])
	}
}
