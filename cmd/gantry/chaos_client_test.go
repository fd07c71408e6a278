package main

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"gantry/bench"
	"gantry/models/apitoken"
	"gantry/models/authz"
	"gantry/models/idempotency"
)

// The chaos suite's client side: portals that come and go, and an API client that
// keeps one Idempotency-Key per change across its retries, as a pipeline would.

// fleet is the portals of a chaos run by replica id; a killed one is restarted under
// the same id (its leases and its orphans carry it).
type fleet struct {
	r    *replicas
	args []string
	// own are the arguments of one replica alone (nil: none).
	own  func(id string) []string
	mu   sync.Mutex
	live map[string]*replica
}

func (f *fleet) start(id string) {
	args := append([]string{"--replica-id=" + id}, f.args...)
	if f.own != nil {
		args = append(args, f.own(id)...)
	}
	p := f.r.start(args...)
	f.mu.Lock()
	defer f.mu.Unlock()
	f.live[id] = p
}

// kill SIGKILLs replica id and forgets it until it is started again.
func (f *fleet) kill(t *testing.T, id string) {
	f.mu.Lock()
	p := f.live[id]
	delete(f.live, id)
	f.mu.Unlock()
	p.kill(t)
}

// urls are the portals serving now, in random order.
func (f *fleet) urls() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []string
	for _, p := range f.live {
		out = append(out, p.URL)
	}
	rand.Shuffle(len(out), func(i, j int) { out[i], out[j] = out[j], out[i] })
	return out
}

// ids are the replica ids of the portals serving now.
func (f *fleet) ids() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []string
	for id := range f.live {
		out = append(out, id)
	}
	return out
}

// chaosAPI calls the portals' JSON API with a token.
type chaosAPI struct {
	fleet *fleet
	http  *http.Client
	// patience is how long a call keeps trying (zero: 90 s).
	patience time.Duration
	// Retries counts calls sent again (a portal died under them, or said 503 or 429).
	mu      sync.Mutex
	Retries int
	// Latencies are the answered calls' durations.
	Latencies []time.Duration
}

// call sends one API call, with idempotency key key for a change, to any live portal,
// and sends it again (same key) to another when the connection fails or the portal
// answers 502, 503 or 429, until its patience runs out. It returns the final status
// and body.
func (c *chaosAPI) call(ctx context.Context, token, method, path string, body any, key string) (int, []byte, error) {
	return c.callAt(ctx, "", token, method, path, body, key)
}

// callAt is call whose first attempt goes to the portal at base URL at ("": any live
// one), as a client spreading its calls over the replicas' own addresses does; a retry
// (that portal died, or was busy) goes to any live portal.
func (c *chaosAPI) callAt(ctx context.Context, at, token, method, path string, body any, key string) (int, []byte, error) {
	var raw []byte
	if body != nil {
		var err error
		if raw, err = json.Marshal(body); err != nil {
			return 0, nil, err
		}
	}
	// Patience is a budget of idle-machine time: a portal restarting on a busy machine takes
	// longer, and a call that gives up is a problem the chaos reports.
	budget := bench.NewBudget(cmp.Or(c.patience, 90*time.Second))
	var last error
	for attempt := 0; !budget.Spent(); attempt++ {
		if attempt > 0 {
			c.mu.Lock()
			c.Retries++
			c.mu.Unlock()
		}
		urls := c.fleet.urls()
		if attempt == 0 && at != "" {
			urls = []string{at}
		}
		if len(urls) == 0 {
			time.Sleep(200 * time.Millisecond)
			continue
		}
		req, err := http.NewRequestWithContext(ctx, method, urls[0]+path, bytes.NewReader(raw))
		if err != nil {
			return 0, nil, err
		}
		req.Header.Set("Authorization", "Bearer "+token)
		if raw != nil {
			req.Header.Set("Content-Type", "application/json")
		}
		if key != "" {
			req.Header.Set("Idempotency-Key", key)
		}
		started := time.Now()
		resp, err := c.http.Do(req)
		if err != nil {
			last = err
			time.Sleep(200 * time.Millisecond)
			continue
		}
		out, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		if err != nil {
			last = err
			continue
		}
		switch resp.StatusCode {
		case http.StatusBadGateway, http.StatusServiceUnavailable, http.StatusTooManyRequests:
			last = fmt.Errorf("%s %s: %d %s", method, path, resp.StatusCode, out)
			wait := 200 * time.Millisecond
			if s, err := strconv.Atoi(resp.Header.Get("Retry-After")); err == nil && s > 0 {
				wait = time.Duration(s) * time.Second
			}
			time.Sleep(wait)
			continue
		}
		c.mu.Lock()
		c.Latencies = append(c.Latencies, time.Since(started))
		c.mu.Unlock()
		return resp.StatusCode, out, nil
	}
	return 0, nil, fmt.Errorf("%s %s: no answer before the deadline: %v", method, path, last)
}

// change is call with a fresh idempotency key kept across its retries.
func (c *chaosAPI) change(ctx context.Context, token, method, path string, body any) (int, []byte, error) {
	return c.call(ctx, token, method, path, body, idempotency.NewKey())
}

// demoToken issues an API token for the demo user with subject subject (e.g.
// "acme-operator") in organization orgID.
func demoToken(t *testing.T, r *replicas, subject, orgID string, role authz.Role, scopes ...string) string {
	t.Helper()
	var user struct{ ID, Name string }
	require.NoError(t, r.DB.Raw("SELECT id, name FROM users WHERE subject = ?", subject).Scan(&user).Error)
	require.NotEmpty(t, user.ID, subject)
	ctx := authz.WithSubject(context.Background(), authz.Subject{UserID: user.ID, Name: user.Name, OrganizationID: orgID, Role: role})
	tok, err := r.System.Tokens.Issue(ctx, apitoken.Issue{Name: "chaos " + subject, Scopes: scopes, Lifetime: 24 * time.Hour})
	require.NoError(t, err)
	return tok.Secret
}
