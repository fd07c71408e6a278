package dbtest

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"gorm.io/driver/postgres"
	"gorm.io/gorm"
)

// Notifications LISTENs on channel in gdb's database for the rest of the test and signals
// the returned channel at every notification (signals coalesce: one pending at most, so a
// waiter re-reads what it waits for after each). It is the event a test waits on instead of
// polling: the product notifies at commit (run.ChangesChannel for every run state change,
// with its lease, audit events and next job in the same transaction). A lost connection
// (a test restarting PostgreSQL) is dialled again, and the reconnection signals too, since
// notifications may have been missed meanwhile.
func Notifications(t testing.TB, gdb *gorm.DB, channel string) <-chan struct{} {
	t.Helper()
	d, ok := gdb.Dialector.(*postgres.Dialector)
	if !ok || d.Config == nil || d.Config.DSN == "" {
		t.Fatalf("dbtest: Notifications needs a gorm.DB opened with a DSN (postgres.Open)")
	}
	return NotificationsURL(t, d.Config.DSN, channel)
}

// NotificationsURL is Notifications for a database URL.
func NotificationsURL(t testing.TB, dsn, channel string) <-chan struct{} {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	wake := make(chan struct{}, 1)
	signal := func() {
		select {
		case wake <- struct{}{}:
		default:
		}
	}
	listen := func() (*pgx.Conn, error) {
		conn, err := pgx.Connect(ctx, dsn)
		if err != nil {
			return nil, err
		}
		if _, err := conn.Exec(ctx, "LISTEN "+pgx.Identifier{channel}.Sanitize()); err != nil {
			conn.Close(context.Background())
			return nil, err
		}
		return conn, nil
	}
	conn, err := listen()
	if err != nil {
		cancel()
		t.Fatalf("dbtest: listening on %s: %v", channel, err)
	}
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		backoff := 50 * time.Millisecond
		for {
			if conn != nil {
				_, err := conn.WaitForNotification(ctx)
				if err == nil {
					signal()
					continue
				}
				conn.Close(context.Background())
				conn = nil
			}
			if ctx.Err() != nil {
				return
			}
			select {
			case <-ctx.Done():
				return
			case <-time.After(backoff):
			}
			backoff = min(backoff*2, 2*time.Second)
			if c, err := listen(); err == nil {
				conn, backoff = c, 50*time.Millisecond
				signal()
			}
		}
	}()
	t.Cleanup(func() {
		cancel()
		wg.Wait()
		if conn != nil {
			conn.Close(context.Background())
		}
	})
	return wake
}
