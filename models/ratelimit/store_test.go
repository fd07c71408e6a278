package ratelimit_test

import (
	"context"
	"fmt"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"gorm.io/gorm"

	"gantry/models/db"
	"gantry/models/db/dbtest"
	"gantry/models/ratelimit"
)

func TestMain(m *testing.M) { os.Exit(dbtest.Main(m)) }

// clock is a time the test moves by hand; stores read it concurrently.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func newClock() *clock { return &clock{t: time.Date(2030, 1, 1, 9, 0, 0, 0, time.UTC)} }

func (c *clock) now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *clock) advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}

func key(name string, perMinute, burst int) ratelimit.Key {
	return ratelimit.Key{Rate: ratelimit.Rate{PerMinute: perMinute, Burst: burst}, Name: name}
}

// replicas opens n stores on one fresh database, each with its own connection pool, as
// n portal replicas have.
func replicas(t testing.TB, n int) ([]*ratelimit.Store, *gorm.DB) {
	t.Helper()
	dsn := dbtest.NewURL(t)
	var stores []*ratelimit.Store
	var first *gorm.DB
	for range n {
		gdb, err := db.Open(context.Background(), dsn)
		require.NoError(t, err)
		sqlDB, err := gdb.DB()
		require.NoError(t, err)
		t.Cleanup(func() { sqlDB.Close() })
		stores = append(stores, ratelimit.NewStore(gdb))
		if first == nil {
			first = gdb
		}
	}
	return stores, first
}

// allow is one check that must not fail.
func allow(t *testing.T, s *ratelimit.Store, keys ...ratelimit.Key) time.Duration {
	t.Helper()
	wait, err := s.Allow(context.Background(), keys...)
	require.NoError(t, err)
	return wait
}

func rows(t *testing.T, gdb *gorm.DB) int64 {
	t.Helper()
	var n int64
	require.NoError(t, gdb.Raw("SELECT count(*) FROM rate_limit_buckets").Scan(&n).Error)
	return n
}

// TestBurstThenRate: a bucket lets its burst through at once, then one request per
// 1/PerMinute; a refusal says exactly how long until the next one, and takes nothing.
func TestBurstThenRate(t *testing.T) {
	t.Parallel()
	c := newClock()
	stores, _ := replicas(t, 1)
	l := stores[0].WithClock(c.now)
	k := key("a", 6, 3) // one every 10 s after 3 at once
	for i := range 3 {
		require.Zero(t, allow(t, l, k), "request %d of the burst", i+1)
	}
	require.Equal(t, 10*time.Second, allow(t, l, k))
	c.advance(4 * time.Second)
	require.Equal(t, 6*time.Second, allow(t, l, k), "refused requests took nothing: the wait only shrinks")
	c.advance(6 * time.Second)
	require.Zero(t, allow(t, l, k))
	require.Equal(t, 10*time.Second, allow(t, l, k))
	// Idle for an hour: full again, never more than the burst.
	c.advance(time.Hour)
	for range 3 {
		require.Zero(t, allow(t, l, k))
	}
	require.Positive(t, allow(t, l, k))
}

// TestKeysCountApart: one key's requests do not spend another's.
func TestKeysCountApart(t *testing.T) {
	t.Parallel()
	stores, _ := replicas(t, 1)
	l := stores[0].WithClock(newClock().now)
	require.Zero(t, allow(t, l, key("ip 203.0.113.7", 1, 1)))
	require.Positive(t, allow(t, l, key("ip 203.0.113.7", 1, 1)))
	require.Zero(t, allow(t, l, key("ip 203.0.113.8", 1, 1)))
}

// TestAllOrNothing: a request under two limits is refused by the empty one without
// spending the other, whichever of them is empty.
func TestAllOrNothing(t *testing.T) {
	t.Parallel()
	stores, _ := replicas(t, 1)
	l := stores[0].WithClock(newClock().now)
	session, ip := key("session s1", 1, 1), key("ip 203.0.113.7", 60, 3)
	require.Zero(t, allow(t, l, session, ip))
	require.Equal(t, time.Minute, allow(t, l, session, ip), "the session's bucket is empty")
	for range 2 {
		require.Zero(t, allow(t, l, ip), "the refusal above took nothing from the IP's bucket")
	}
	require.Equal(t, time.Second, allow(t, l, ip))
	other := key("session s2", 1, 1)
	require.Equal(t, time.Second, allow(t, l, other, ip), "the IP's bucket is empty")
	require.Zero(t, allow(t, l, other), "the refusal above took nothing from the session's bucket")
}

// TestRateOff: a rate of zero (or less) limits nothing and keeps no bucket.
func TestRateOff(t *testing.T) {
	t.Parallel()
	stores, gdb := replicas(t, 1)
	l := stores[0].WithClock(newClock().now)
	for range 100 {
		require.Zero(t, allow(t, l, key("x", 0, 0), key("y", -1, 5)))
	}
	require.Zero(t, rows(t, gdb))
}

// TestReplicasShareBuckets: two replicas, each with its own pool, count against the same
// bucket: a burst spread over both is refused at one replica's budget, and the refusal
// on either says the same wait.
func TestReplicasShareBuckets(t *testing.T) {
	t.Parallel()
	c := newClock()
	stores, _ := replicas(t, 2)
	a, b := stores[0].WithClock(c.now), stores[1].WithClock(c.now)
	k := key("decide session s1", 30, 10)
	for i := range 10 {
		require.Zero(t, allow(t, []*ratelimit.Store{a, b}[i%2], k), "decision %d", i+1)
	}
	require.Equal(t, 2*time.Second, allow(t, a, k))
	require.Equal(t, 2*time.Second, allow(t, b, k))
	c.advance(2 * time.Second)
	require.Zero(t, allow(t, b, k))
	require.Positive(t, allow(t, a, k))
}

// TestRacingChecks: checks that start while another transaction moves their bucket
// decide on the bucket as that transaction leaves it, on any replica. The other
// transaction holds its change until every check has taken its snapshot and waits (the
// barrier), then commits: the checks' snapshots are out of date, the rows are not.
//   - A fresh bucket created meanwhile, already empty: every check is refused (one
//     interval's wait), none exceeds the burst.
//   - A shared per-address bucket spent meanwhile: every check is refused, and none of
//     them spent its session's bucket (no session row was written).
func TestRacingChecks(t *testing.T) {
	t.Parallel()
	c := newClock()
	stores, gdb := replicas(t, 2)
	const n = 6
	race := func(change string, keys func(i int) []ratelimit.Key) []time.Duration {
		t.Helper()
		tx := gdb.Begin()
		require.NoError(t, tx.Error)
		holder := dbtest.BackendPID(t, tx)
		require.NoError(t, tx.Exec(change, c.now().Add(20*time.Second)).Error)
		waits, errs := make([]time.Duration, n), make([]error, n)
		var done sync.WaitGroup
		var finished atomic.Int32
		for i := range n {
			done.Go(func() {
				waits[i], errs[i] = stores[i%2].WithClock(c.now).Allow(context.Background(), keys(i)...)
				finished.Add(1)
			})
		}
		dbtest.WaitBlockedBy(t, gdb, holder, n, func() (bool, any) { return finished.Load() > 0, "a check returned" })
		require.NoError(t, tx.Commit().Error)
		done.Wait()
		for _, err := range errs {
			require.NoError(t, err)
		}
		return waits
	}

	// 30 a minute after 10: the bucket the other transaction creates, full at now + 20 s,
	// is empty for 2 s.
	waits := race("INSERT INTO rate_limit_buckets (key, full_at) VALUES ('decide session hot', ?)",
		func(int) []ratelimit.Key { return []ratelimit.Key{key("decide session hot", 30, 10)} })
	for i, w := range waits {
		require.Equal(t, 2*time.Second, w, "check %d on a bucket emptied meanwhile", i)
	}

	// 60 a minute after 20: the address's bucket, full when the checks began, is empty
	// for 1 s once the other transaction commits.
	ip := key("decide-ip 198.51.100.1", 60, 20)
	require.Zero(t, allow(t, stores[0].WithClock(c.now), key("decide session first", 30, 10), ip))
	waits = race("UPDATE rate_limit_buckets SET full_at = ? WHERE key = 'decide-ip 198.51.100.1'",
		func(i int) []ratelimit.Key {
			return []ratelimit.Key{key(fmt.Sprint("decide session s", i), 30, 10), ip}
		})
	for i, w := range waits {
		require.Equal(t, time.Second, w, "check %d on an address spent meanwhile", i)
	}
	var spent int64
	require.NoError(t, gdb.Raw("SELECT count(*) FROM rate_limit_buckets WHERE key LIKE 'decide session s%'").Scan(&spent).Error)
	require.Zero(t, spent, "a refused check spent its session's bucket")
}

// TestDatabaseClock: without a test's clock the database's decides, the one clock every
// replica shares: a bucket spent just now makes the next request wait at most one
// interval, and some of it.
func TestDatabaseClock(t *testing.T) {
	t.Parallel()
	stores, gdb := replicas(t, 2)
	k := key("sign-in /login 203.0.113.7", 1, 1)
	require.Zero(t, allow(t, stores[0], k))
	wait := allow(t, stores[1], k)
	require.Positive(t, wait)
	require.LessOrEqual(t, wait, time.Minute)
	var ahead bool
	require.NoError(t, gdb.Raw("SELECT full_at > now() FROM rate_limit_buckets WHERE key = ?", k.Name).Scan(&ahead).Error)
	require.True(t, ahead, "the bucket is full again a minute after the database's now")
}

// TestOddNames: a name too long for the table, or no text PostgreSQL keeps, is still
// one bucket of its own; a key named twice in one check is the caller's mistake.
func TestOddNames(t *testing.T) {
	t.Parallel()
	stores, _ := replicas(t, 1)
	l := stores[0].WithClock(newClock().now)
	long := "sign-in /login " + strings.Repeat("x", 2000)
	for _, name := range []string{long, "sign-in /login \xff\x00"} {
		require.Zero(t, allow(t, l, key(name, 1, 1)), "%.40q", name)
		require.Positive(t, allow(t, l, key(name, 1, 1)), "%.40q", name)
	}
	require.Zero(t, allow(t, l, key(long+"y", 1, 1)), "another long name, another bucket")
	_, err := l.Allow(context.Background(), key("a", 1, 1), key("a", 2, 2))
	require.ErrorContains(t, err, `"a" is named twice`)
}

// TestDatabaseDown: a check that cannot reach the database says so; it never answers
// "go ahead" (web/ratelimit.go refuses the request then).
func TestDatabaseDown(t *testing.T) {
	t.Parallel()
	stores, gdb := replicas(t, 1)
	sqlDB, err := gdb.DB()
	require.NoError(t, err)
	require.NoError(t, sqlDB.Close())
	_, err = stores[0].Allow(context.Background(), key("a", 1, 1))
	require.ErrorContains(t, err, "checking rate limits")
}
