package runner_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"gantry/runner"
)

// fakeClock is a Refresher's clock that moves only when the test says: every After is
// handed to the test (waits), which advances the time and fires it.
type fakeClock struct {
	mu    sync.Mutex
	now   time.Time
	waits chan fakeWait
}

type fakeWait struct {
	d    time.Duration
	fire chan time.Time
}

func newFakeClock() *fakeClock {
	return &fakeClock{now: time.Date(2030, 1, 1, 12, 0, 0, 0, time.UTC), waits: make(chan fakeWait)}
}

func (c *fakeClock) Now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.now }

func (c *fakeClock) After(d time.Duration) <-chan time.Time {
	w := fakeWait{d: d, fire: make(chan time.Time, 1)}
	c.waits <- w
	return w.fire
}

// next takes the refresher's next wait, moves the clock past it and fires it.
func (c *fakeClock) next(t *testing.T) time.Duration {
	t.Helper()
	w := <-c.waits
	c.mu.Lock()
	c.now = c.now.Add(w.d)
	now := c.now
	c.mu.Unlock()
	w.fire <- now
	return w.d
}

// events is what a refresher did, in order: masks, writes and log lines.
type events struct {
	mu  sync.Mutex
	got []string
}

func (e *events) add(s string) { e.mu.Lock(); defer e.mu.Unlock(); e.got = append(e.got, s) }
func (e *events) list() []string {
	e.mu.Lock()
	defer e.mu.Unlock()
	return append([]string(nil), e.got...)
}
func (e *events) Write(p []byte) (int, error) {
	e.add("log " + strings.TrimSpace(string(p)))
	return len(p), nil
}
func (e *events) AddSecret(s string) { e.add("mask " + s) }

// TestRefresherRefreshesBeforeExpiry: the next token is minted at two thirds of the
// current one's life, masked, then written; each new token sets the next refresh, which
// always comes before the token in use expires.
func TestRefresherRefreshesBeforeExpiry(t *testing.T) {
	t.Parallel()
	clock := newFakeClock()
	const life = 15 * time.Minute
	minted := 0
	var ev events
	creds := runner.Credentials{CloudToken: "tok-0", CloudExpires: clock.Now().Add(life),
		Refresh: func(context.Context) (string, time.Time, error) {
			minted++
			return fmt.Sprintf("tok-%d", minted), clock.Now().Add(life), nil
		}}
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan struct{})
	go func() {
		defer close(done)
		runner.Refresher{Credentials: creds, Log: &ev, Now: clock.Now, After: clock.After,
			Write: func(tok string) error { ev.add("write " + tok); return nil }}.Run(ctx)
	}()
	expires := creds.CloudExpires
	for i := 1; i <= 3; i++ {
		start := clock.Now()
		d := clock.next(t)
		require.Equal(t, 10*time.Minute, d, "refresh %d at two thirds of the token's life", i)
		require.True(t, start.Add(d).Before(expires), "refresh %d comes before the token in use expires", i)
		expires = start.Add(d).Add(life)
	}
	<-clock.waits // the refresher waits for the fourth: the third is written
	cancel()
	<-done
	want := []string{}
	for i := 1; i <= 3; i++ {
		want = append(want, fmt.Sprintf("mask tok-%d", i), fmt.Sprintf("write tok-%d", i),
			"log # the workload token was refreshed; the new one expires at "+time.Date(2030, 1, 1, 12, 10*i+15, 0, 0, time.UTC).Format(time.RFC3339))
	}
	require.Equal(t, want, ev.list())
}

// TestRefresherRetries: a failed mint or write is said in the log and tried again before
// the token expires; the token after it is written.
func TestRefresherRetries(t *testing.T) {
	t.Parallel()
	clock := newFakeClock()
	var ev events
	fails := []error{errors.New("issuer unavailable"), nil, nil}
	writes := []error{errors.New("disk full"), nil}
	n := 0
	creds := runner.Credentials{CloudToken: "tok-0", CloudExpires: clock.Now().Add(3 * time.Minute),
		Refresh: func(context.Context) (string, time.Time, error) {
			err := fails[0]
			fails = fails[1:]
			if err != nil {
				return "", time.Time{}, err
			}
			n++
			return fmt.Sprintf("tok-%d", n), clock.Now().Add(3 * time.Minute), nil
		}}
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan struct{})
	go func() {
		defer close(done)
		runner.Refresher{Credentials: creds, Log: &ev, Now: clock.Now, After: clock.After, Write: func(tok string) error {
			err := writes[0]
			writes = writes[1:]
			ev.add("write " + tok)
			return err
		}}.Run(ctx)
	}()
	require.Equal(t, 2*time.Minute, clock.next(t)) // mint fails
	require.Equal(t, 5*time.Second, clock.next(t)) // retried soon: mint works, the write fails
	require.Equal(t, 5*time.Second, clock.next(t)) // retried: written
	require.Equal(t, 2*time.Minute, (<-clock.waits).d, "a full life ahead again")
	cancel()
	<-done
	got := strings.Join(ev.list(), "\n")
	require.Contains(t, got, "refreshing the workload token failed (the current one expires at 2030-01-01T12:03:00Z); trying again: issuer unavailable")
	require.Contains(t, got, "trying again: disk full")
	require.Contains(t, got, "mask tok-2\nwrite tok-2\nlog # the workload token was refreshed")
}

// TestRefresherLeavesStaticCredentials: a static credential (no Refresh, no expiry) is
// never refreshed: Run returns at once.
func TestRefresherLeavesStaticCredentials(t *testing.T) {
	t.Parallel()
	clock := newFakeClock()
	for _, c := range []runner.Credentials{
		{CloudToken: "sbxk-static"},
		{CloudToken: "tok", CloudExpires: clock.Now().Add(time.Minute)},
		{CloudToken: "tok", Refresh: func(context.Context) (string, time.Time, error) { return "x", time.Time{}, nil }},
	} {
		runner.Refresher{Credentials: c, Now: clock.Now, After: clock.After,
			Write: func(string) error { t.Error("written"); return nil }}.Run(t.Context())
	}
}

// TestRefreshedTokensAreMasked: a token minted while the phase runs is masked in the
// live log's chunks and in the phase's whole log, like the token the phase began with.
func TestRefreshedTokensAreMasked(t *testing.T) {
	t.Parallel()
	var chunks strings.Builder
	var mu sync.Mutex
	store := func(_ context.Context, text []byte) error {
		mu.Lock()
		defer mu.Unlock()
		chunks.Write(text)
		return nil
	}
	const first, second = "eyJ.first-token-0123456789", "eyJ.second-token-9876543210"
	live := runner.NewLiveLog(t.Context(), store, nil, first)
	clock := newFakeClock()
	creds := runner.Credentials{CloudToken: first, CloudExpires: clock.Now().Add(time.Minute),
		Refresh: func(context.Context) (string, time.Time, error) { return second, clock.Now().Add(time.Minute), nil }}
	written := make(chan string, 1)
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan struct{})
	go func() {
		defer close(done)
		runner.Refresher{Credentials: creds, Log: live, Now: clock.Now, After: clock.After,
			Write: func(tok string) error { written <- tok; return nil }}.Run(ctx)
	}()
	clock.next(t)
	tok := <-written
	<-clock.waits
	cancel()
	<-done
	out := fmt.Sprintf("first %s, then %s\n", first, tok)
	live.Write([]byte(out))
	require.NoError(t, live.Close())
	whole := string(live.Mask([]byte(out)))
	mu.Lock()
	stored := chunks.String()
	mu.Unlock()
	for _, s := range []string{stored, whole} {
		require.NotContains(t, s, second)
		require.NotContains(t, s, first)
		require.Contains(t, s, "first "+runner.Masked+", then "+runner.Masked)
	}
}
