package dbtest

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"gorm.io/gorm"

	"gantry/bench"
)

// BackendPID is the server process of the connection tx runs on (a transaction keeps its
// connection): the holder a WaitBlockedBy waits on.
func BackendPID(t testing.TB, tx *gorm.DB) int {
	t.Helper()
	var pid int
	if err := tx.Raw("SELECT pg_backend_pid()").Scan(&pid).Error; err != nil {
		t.Fatalf("dbtest: reading the backend pid: %v", err)
	}
	return pid
}

// WaitBlockedBy waits until at least n sessions queue behind backend holder: each waits for
// a lock the holder holds, or for a session that does (several sessions waiting for one row
// queue one behind the other, and only the first waits on the holder itself). It is the
// barrier of a test whose subject is a contender waiting inside PostgreSQL (a decision
// waiting for a run's row while its deadline passes, a repeated request waiting for the
// first's key). It counts only the holder's queue, so other tests on the same server cannot
// satisfy it. returned, when not nil, reports whether a contender has already returned (it
// did not wait, which is the failure the barrier exists to catch) and what it returned; the
// wait then fails at once.
func WaitBlockedBy(t testing.TB, gdb *gorm.DB, holder, n int, returned func() (bool, any)) {
	t.Helper()
	bench.Eventually(t, fmt.Sprintf("%d sessions to queue behind backend %d", n, holder), 10*time.Second, func() (bool, any) {
		if returned != nil {
			if done, what := returned(); done {
				t.Fatalf("dbtest: a contender returned before it queued behind backend %d: %v", holder, what)
			}
		}
		var queued int
		if err := gdb.Raw(`WITH RECURSIVE waiting AS MATERIALIZED (
				SELECT pid, pg_blocking_pids(pid) AS blockers FROM pg_stat_activity WHERE wait_event_type = 'Lock'),
			queued(pid) AS (
				SELECT pid FROM waiting WHERE ? = ANY(blockers)
				UNION
				SELECT w.pid FROM waiting w JOIN queued q ON q.pid = ANY(w.blockers))
			SELECT count(*) FROM queued`, holder).Scan(&queued).Error; err != nil {
			t.Fatalf("dbtest: reading lock waits: %v", err)
		}
		return queued >= n, fmt.Sprintf("%d queued", queued)
	}, bench.Poll(5*time.Millisecond))
}

// WaitWaiting waits until backend pid waits for a lock (any holder): the barrier for a
// statement a test sent on a connection of its own (BackendPID) and expects to queue.
// returned is as for WaitBlockedBy.
func WaitWaiting(t testing.TB, gdb *gorm.DB, pid int, returned func() (bool, any)) {
	t.Helper()
	bench.Eventually(t, fmt.Sprintf("backend %d to wait for a lock", pid), 10*time.Second, func() (bool, any) {
		if returned != nil {
			if done, what := returned(); done {
				t.Fatalf("dbtest: backend %d returned before it waited for a lock: %v", pid, what)
			}
		}
		var holders int
		if err := gdb.Raw("SELECT cardinality(pg_blocking_pids(?))", pid).Scan(&holders).Error; err != nil {
			t.Fatalf("dbtest: reading lock waits: %v", err)
		}
		return holders > 0, fmt.Sprintf("blocked by %d sessions", holders)
	}, bench.Poll(5*time.Millisecond))
}

// HoldAdvisoryLock takes the session-level advisory lock key on a connection of its own and
// holds it until release (or the test's end): whatever in the code under test takes that
// lock with pg_try_advisory_lock skips meanwhile (runner.SweepLockKey pauses the lease
// sweeper, so a test decides who acts on an expired lease).
func HoldAdvisoryLock(t testing.TB, gdb *gorm.DB, key int64) (release func()) {
	t.Helper()
	sqlDB, err := gdb.DB()
	if err != nil {
		t.Fatalf("dbtest: %v", err)
	}
	ctx := context.Background()
	conn, err := sqlDB.Conn(ctx)
	if err != nil {
		t.Fatalf("dbtest: a connection for the advisory lock: %v", err)
	}
	if _, err := conn.ExecContext(ctx, "SELECT pg_advisory_lock($1)", key); err != nil {
		conn.Close()
		t.Fatalf("dbtest: taking advisory lock %d: %v", key, err)
	}
	var once sync.Once
	release = func() {
		once.Do(func() {
			_, _ = conn.ExecContext(ctx, "SELECT pg_advisory_unlock($1)", key)
			conn.Close()
		})
	}
	t.Cleanup(release)
	return release
}
