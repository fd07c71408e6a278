package web_test

import (
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"gantry/cmd/gantry/webtest"
	"gantry/models/apitoken"
	"gantry/models/authz"
	"gantry/models/idempotency"
	"gantry/web"
)

// callAnswer is what a test kept of a response.
type callAnswer struct {
	status                   int
	retryAfter, contentType  string
	body                     string
	err                      error
	idempotentReplayedHeader string
}

// bearerFrom sends an API call with a bearer token from client address ip (as a proxy
// forwards it), with Idempotency-Key key ("": none) and a JSON body ("": none). It
// requires nothing, so goroutines may call it.
func bearerFrom(app *webtest.App, ip, token, key, method, path, body string) callAnswer {
	var r io.Reader
	if body != "" {
		r = strings.NewReader(body)
	}
	req, err := http.NewRequest(method, app.URL+path, r)
	if err != nil {
		return callAnswer{err: err}
	}
	req.Header.Set("Authorization", "Bearer "+token)
	req.Header.Set("X-Forwarded-For", ip)
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	if key != "" {
		req.Header.Set(idempotency.Header, key)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return callAnswer{err: err}
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return callAnswer{status: resp.StatusCode, retryAfter: resp.Header.Get("Retry-After"), contentType: resp.Header.Get("Content-Type"),
		body: string(b), err: err, idempotentReplayedHeader: resp.Header.Get("Idempotent-Replayed")}
}

// TestWrongAPITokensLimitedPerAddress: 140 calls with wrong API tokens from one address,
// 20 at a time (malformed ones, unknown ids, a real token's id with a guessed secret),
// meet the per-address limit: the default lets 20 be answered 401 and refuses the other
// 120 with 429, Retry-After and a problem document. While the address is refused, even a
// right token from it is refused before it is looked up (its first use is not recorded)
// and spends nothing (its Idempotency-Key is not used up); the same token from another
// address works. A minute later the address is served again, and the refused call goes
// through with its very key.
func TestWrongAPITokensLimitedPerAddress(t *testing.T) {
	t.Parallel()
	clock := newTestClock()
	app := webtest.StartWith(t, webtest.Options{TrustedProxies: trustLoopback, RateLimits: &web.RateLimits{Now: clock.now}})
	admin := app.NewMember(t, "acme", "Ada Tokens", authz.RoleAdmin, false)
	right := app.Token(t, admin, "read", "admin")
	id, _, _ := strings.Cut(strings.TrimPrefix(right, apitoken.Prefix), ".")
	const attacker, elsewhere = "203.0.113.66", "198.51.100.5"

	wrong := func(i int) string {
		switch i % 3 {
		case 0:
			return fmt.Sprintf("not-a-token-%d", i)
		case 1:
			return fmt.Sprintf("%sunknown%d.secret", apitoken.Prefix, i)
		}
		return fmt.Sprintf("%s%s.guessed-secret-%d", apitoken.Prefix, id, i)
	}
	answers := make([]callAnswer, 140)
	for wave := range 7 {
		var wg sync.WaitGroup
		for j := range 20 {
			i := wave*20 + j
			wg.Go(func() {
				answers[i] = bearerFrom(app, attacker, wrong(i), "", http.MethodGet, "/api/v1/environments", "")
			})
		}
		wg.Wait()
	}
	statuses := map[int]int{}
	for i, a := range answers {
		require.NoError(t, a.err, "call %d", i)
		statuses[a.status]++
		if a.status != http.StatusTooManyRequests {
			continue
		}
		require.NotEmpty(t, a.retryAfter, "call %d: Retry-After", i)
		require.Equal(t, "application/problem+json", a.contentType)
		p := decodeJSON[struct{ Code, Detail string }](t, a.body)
		require.Equal(t, "RATE_LIMITED", p.Code)
		require.Contains(t, p.Detail, "Too many calls with a wrong API token came from your network")
	}
	require.Equal(t, map[int]int{http.StatusUnauthorized: 20, http.StatusTooManyRequests: 120}, statuses)

	// A right token from the refused address: refused before it is looked up.
	key := idempotency.NewKey()
	create := `{"name":"after-the-flood","tier":"development"}`
	a := bearerFrom(app, attacker, right, key, http.MethodPost, "/api/v1/environments", create)
	require.Equal(t, http.StatusTooManyRequests, a.status, a.body)
	require.Equal(t, "6", a.retryAfter, "10 a minute: the next in 6 s")
	require.Zero(t, countRows(t, app, "SELECT count(*) FROM audit_events WHERE action = 'api_token.used'"), "the token was never looked up")
	require.Zero(t, countRows(t, app, "SELECT count(*) FROM environments WHERE name = 'after-the-flood'"))

	// The right token from another address works.
	a = bearerFrom(app, elsewhere, right, "", http.MethodGet, "/api/v1/environments", "")
	require.Equal(t, http.StatusOK, a.status, a.body)

	// A minute later the refused call goes through with its very key: it kept nothing.
	clock.advance(time.Minute)
	a = bearerFrom(app, attacker, right, key, http.MethodPost, "/api/v1/environments", create)
	require.Equal(t, http.StatusCreated, a.status, a.body)
	require.Empty(t, a.idempotentReplayedHeader, "run for the first time, not replayed")
	require.EqualValues(t, 1, countRows(t, app, "SELECT count(*) FROM environments WHERE name = 'after-the-flood'"))
}
