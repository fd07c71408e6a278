package ratelimit_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"gantry/web/ratelimit"
)

// clock is a time the test moves by hand.
type clock struct{ t time.Time }

func (c *clock) now() time.Time          { return c.t }
func (c *clock) advance(d time.Duration) { c.t = c.t.Add(d) }
func newClock() *clock                   { return &clock{t: time.Date(2030, 1, 1, 9, 0, 0, 0, time.UTC)} }
func key(name string, perMinute, burst int) ratelimit.Key {
	return ratelimit.Key{Rate: ratelimit.Rate{PerMinute: perMinute, Burst: burst}, Name: name}
}

// TestBurstThenRate: a bucket lets its burst through at once, then one request per
// 1/PerMinute; a refusal says exactly how long until the next one, and takes nothing.
func TestBurstThenRate(t *testing.T) {
	c := newClock()
	l := ratelimit.New(c.now, 100)
	k := key("a", 6, 3) // one every 10 s after 3 at once
	for i := range 3 {
		require.Zero(t, l.Allow(k), "request %d of the burst", i+1)
	}
	require.Equal(t, 10*time.Second, l.Allow(k))
	c.advance(4 * time.Second)
	require.Equal(t, 6*time.Second, l.Allow(k), "refused requests took nothing: the wait only shrinks")
	c.advance(6 * time.Second)
	require.Zero(t, l.Allow(k))
	require.Equal(t, 10*time.Second, l.Allow(k))
	// Idle for an hour: full again, never more than the burst.
	c.advance(time.Hour)
	for range 3 {
		require.Zero(t, l.Allow(k))
	}
	require.Positive(t, l.Allow(k))
}

// TestKeysCountApart: one key's requests do not spend another's.
func TestKeysCountApart(t *testing.T) {
	l := ratelimit.New(newClock().now, 100)
	require.Zero(t, l.Allow(key("ip 203.0.113.7", 1, 1)))
	require.Positive(t, l.Allow(key("ip 203.0.113.7", 1, 1)))
	require.Zero(t, l.Allow(key("ip 203.0.113.8", 1, 1)))
}

// TestAllOrNothing: a request under two limits is refused by the empty one without
// spending the other.
func TestAllOrNothing(t *testing.T) {
	l := ratelimit.New(newClock().now, 100)
	session, ip := key("session s1", 1, 1), key("ip 203.0.113.7", 60, 3)
	require.Zero(t, l.Allow(session, ip))
	require.Equal(t, time.Minute, l.Allow(session, ip), "the session's bucket is empty")
	for range 2 {
		require.Zero(t, l.Allow(ip), "the refusal above took nothing from the IP's bucket")
	}
	require.Equal(t, time.Second, l.Allow(ip))
}

// TestRateOff: a rate of zero (or less) limits nothing and keeps no bucket.
func TestRateOff(t *testing.T) {
	l := ratelimit.New(newClock().now, 100)
	for range 1000 {
		require.Zero(t, l.Allow(key("x", 0, 0), key("y", -1, 5)))
	}
	require.Zero(t, l.Len())
}

// TestEvictionKeepsMemoryBounded: buckets full again are forgotten (they would answer
// as new ones), and however many keys a flood brings, no more than the cap are held;
// a client still being limited is the last to be forgotten.
func TestEvictionKeepsMemoryBounded(t *testing.T) {
	c := newClock()
	l := ratelimit.New(c.now, 50)

	// Idle eviction: 40 clients spend their burst (2 at 12 a minute: full again after
	// 10 s), then all is quiet. The next request after that finds one bucket: its own.
	for i := range 40 {
		for range 2 {
			require.Zero(t, l.Allow(key(fmt.Sprint("idle ", i), 12, 2)))
		}
	}
	require.Equal(t, 40, l.Len())
	c.advance(9 * time.Second)
	require.Zero(t, l.Allow(key("fresh", 12, 2)))
	require.Equal(t, 41, l.Len(), "still refilling: kept")
	c.advance(time.Second)
	require.Zero(t, l.Allow(key("fresh", 12, 2)))
	require.Equal(t, 1, l.Len(), "full again: forgotten")

	// The cap: a flood of 10,000 distinct clients within one second, while one client
	// keeps hammering and stays refused throughout.
	hammer := key("hammer", 1, 1)
	require.Zero(t, l.Allow(hammer))
	for i := range 10_000 {
		l.Allow(key(fmt.Sprint("flood ", i), 1, 5))
		require.LessOrEqual(t, l.Len(), 50)
		if i%10 == 0 {
			require.Positive(t, l.Allow(hammer), "flood request %d: the hammering client is still limited", i)
		}
	}
	require.Equal(t, 50, l.Len())
}
