package ratelimit_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"gantry/bench"
)

// TestSweepForgetsFullBuckets: a sweep deletes the buckets full again and keeps those
// still refilling, and changes no answer: the kept bucket still refuses, a swept one
// lets its whole burst through (as it would have), never more.
func TestSweepForgetsFullBuckets(t *testing.T) {
	t.Parallel()
	c := newClock()
	stores, gdb := replicas(t, 1)
	l := stores[0].WithClock(c.now)
	// A flood from 300 addresses, each spending its burst (2 at 12 a minute: full again
	// after 10 s), and one client on a slow limit (full again after a minute).
	for i := range 300 {
		for range 2 {
			require.Zero(t, allow(t, l, key(fmt.Sprint("sign-in /login 203.0.", i/256, ".", i%256), 12, 2)))
		}
	}
	slow := key("decide session s1", 1, 1)
	require.Zero(t, allow(t, l, slow))
	require.EqualValues(t, 301, rows(t, gdb))

	c.advance(9 * time.Second)
	n, err := l.Sweep(context.Background())
	require.NoError(t, err)
	require.Zero(t, n, "still refilling: kept")
	c.advance(time.Second)
	n, err = l.Sweep(context.Background())
	require.NoError(t, err)
	require.EqualValues(t, 300, n, "full again: forgotten")
	require.EqualValues(t, 1, rows(t, gdb))

	require.Equal(t, 50*time.Second, allow(t, l, slow), "the kept bucket answers as before")
	for range 2 {
		require.Zero(t, allow(t, l, key("sign-in /login 203.0.0.7", 12, 2)))
	}
	require.Positive(t, allow(t, l, key("sign-in /login 203.0.0.7", 12, 2)), "a swept bucket holds its burst, no more")
}

// TestSweeperRuns: the sweeper every replica runs deletes, by the database's clock, the
// rows whose instant has passed and keeps the others.
func TestSweeperRuns(t *testing.T) {
	t.Parallel()
	stores, gdb := replicas(t, 1)
	require.NoError(t, gdb.Exec(`INSERT INTO rate_limit_buckets (key, full_at) SELECT 'sign-in /login 192.0.2.' || i, now() - interval '1 second'
		FROM generate_series(1, 50) i`).Error)
	require.NoError(t, gdb.Exec("INSERT INTO rate_limit_buckets (key, full_at) VALUES ('decide session s1', now() + interval '1 hour')").Error)
	ctx, stop := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		stores[0].RunSweeper(ctx, 10*time.Millisecond, slog.New(slog.NewTextHandler(io.Discard, nil)))
		close(done)
	}()
	bench.Eventually(t, "the sweep", 10*time.Second, func() (bool, any) { n := rows(t, gdb); return n == 1, n })
	stop()
	<-done
	var left string
	require.NoError(t, gdb.Raw("SELECT key FROM rate_limit_buckets").Scan(&left).Error)
	require.Equal(t, "decide session s1", left)
}
