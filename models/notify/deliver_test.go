package notify

import (
	"context"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestGuardRefusesPrivateTargets: the addresses a hook may not reach, checked once more
// when each delivery connects, so a name that resolves to loopback is refused too.
func TestGuardRefusesPrivateTargets(t *testing.T) {
	t.Parallel()
	guarded := HookOptions{}.withDefaults()
	for addr, refused := range map[string]bool{
		"127.0.0.1": true, "::1": true, "10.0.0.8": true, "172.16.4.1": true, "192.168.0.1": true, "169.254.169.254": true,
		"fe80::1": true, "0.0.0.0": true, "::": true, "100.64.0.1": true, "224.0.0.1": true, "::ffff:127.0.0.1": true, "fd00::1": true,
		"93.184.215.14": false, "2606:4700::1111": false, "8.8.8.8": false,
	} {
		require.Equal(t, refused, guarded.refusedAddr(netip.MustParseAddr(addr)) != "", addr)
	}
	require.Empty(t, HookOptions{AllowPrivateTargets: true}.refusedAddr(netip.MustParseAddr("127.0.0.1")))

	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusOK) }))
	defer srv.Close()
	_, port, err := net.SplitHostPort(srv.Listener.Addr().String())
	require.NoError(t, err)
	for _, target := range []string{srv.URL, "http://localhost:" + port} {
		a := newHookClient(guarded).post(context.Background(), target, http.Header{}, []byte("{}"))
		require.False(t, a.ok(), target)
		require.Contains(t, a.err, "refused", target)
		require.Zero(t, a.status, "never connected")
	}
	a := newHookClient(HookOptions{AllowPrivateTargets: true}.withDefaults()).post(context.Background(), srv.URL, http.Header{}, []byte("{}"))
	require.True(t, a.ok(), a.err)
}

// TestRedirectsAreNotFollowed: a receiver's redirect is an answer, not a new target.
func TestRedirectsAreNotFollowed(t *testing.T) {
	t.Parallel()
	hit := false
	inner := httptest.NewServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) { hit = true }))
	defer inner.Close()
	srv := httptest.NewServer(http.RedirectHandler(inner.URL, http.StatusTemporaryRedirect))
	defer srv.Close()
	a := newHookClient(HookOptions{AllowPrivateTargets: true}.withDefaults()).post(context.Background(), srv.URL, http.Header{}, nil)
	require.Equal(t, http.StatusTemporaryRedirect, a.status)
	require.False(t, a.ok())
	require.False(t, hit)
}

func TestRetryWaitsDouble(t *testing.T) {
	t.Parallel()
	o := HookOptions{RetryBase: 30 * time.Second, RetryMax: 5 * time.Minute}.withDefaults()
	var got []time.Duration
	for n := 1; n <= 6; n++ {
		got = append(got, o.RetryAfter(n))
	}
	require.Equal(t, []time.Duration{30 * time.Second, time.Minute, 2 * time.Minute, 4 * time.Minute, 5 * time.Minute, 5 * time.Minute}, got)
}

func TestSignatureVerifies(t *testing.T) {
	t.Parallel()
	body := []byte(`{"event":"decision.waiting"}`)
	now := time.Unix(1_800_000_000, 0)
	h := http.Header{}
	h.Set(HeaderTimestamp, "1800000000")
	h.Set(HeaderSignature, Sign("whsec_a", now.Unix(), body))
	require.NoError(t, Verify("whsec_a", h, body, now, time.Minute))
	require.Error(t, Verify("whsec_a", h, append(body, ' '), now, time.Minute), "another body")
	require.Error(t, Verify("whsec_a", h, body, now.Add(10*time.Minute), 5*time.Minute), "a replay later")
	h.Set(HeaderTimestamp, "1800000001")
	require.Error(t, Verify("whsec_a", h, body, now, time.Minute), "the timestamp is signed")
}
