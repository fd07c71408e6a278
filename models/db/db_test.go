package db_test

import (
	"context"
	"database/sql"
	"fmt"
	"net"
	"os"
	"testing"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/stretchr/testify/require"
	"gorm.io/gorm"

	"gantry/models/db"
	"gantry/models/db/dbtest"
	"gantry/models/errs"
)

func TestMain(m *testing.M) { os.Exit(dbtest.Main(m)) }

// TestTranslateEncodingErrors: text PostgreSQL refuses to store (NUL or invalid UTF-8 in
// a text parameter, \u0000 in jsonb) is the request's fault, a 400, not a 500.
func TestTranslateEncodingErrors(t *testing.T) {
	t.Parallel()
	gdb := dbtest.New(t)
	for name, q := range map[string]struct {
		sql  string
		arg  string
		code string
	}{
		"NUL in text":           {"SELECT ?::text", "a\x00b", "22021"},
		"invalid UTF-8 in text": {"SELECT ?::text", "a\xffb", "22021"},
		"NUL escape in jsonb":   {"SELECT ?::jsonb", `{"a":"\u0000"}`, "22P05"},
	} {
		var out string
		err := gdb.Raw(q.sql, q.arg).Scan(&out).Error
		require.Error(t, err, name)
		require.Contains(t, err.Error(), q.code, name)
		translated := db.Translate(err)
		require.ErrorIs(t, translated, errs.ErrBadRequest, name)
		require.Equal(t, errs.CodeBadRequest, errs.CodeOf(translated), name)
	}
	// Other errors keep their meaning: a type error is Gantry's own bug, still internal.
	var n int
	err := gdb.Raw("SELECT ?::int", "x").Scan(&n).Error
	require.Error(t, err)
	require.Equal(t, errs.CodeInternal, errs.CodeOf(db.Translate(err)))
}

// TestPoolKeepsItsConnections: connections that were busy at once are kept for the
// next queries instead of closed as they come back (database/sql keeps two unless
// told), so overlapping work does not start PostgreSQL backends anew each time.
func TestPoolKeepsItsConnections(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	gdb, err := db.Open(ctx, dbtest.NewURL(t))
	require.NoError(t, err)
	sqlDB, err := gdb.DB()
	require.NoError(t, err)
	t.Cleanup(func() { sqlDB.Close() })
	const busy = 8
	for range 2 {
		conns := make([]*sql.Conn, busy)
		for i := range conns {
			conns[i], err = sqlDB.Conn(ctx)
			require.NoError(t, err)
			require.NoError(t, conns[i].PingContext(ctx))
		}
		for _, c := range conns {
			require.NoError(t, c.Close())
		}
	}
	st := sqlDB.Stats()
	require.Zero(t, st.MaxIdleClosed, "connections closed as they came back")
	require.Equal(t, busy, st.OpenConnections, "the second round reused the first round's connections")
	require.Equal(t, busy, st.Idle)
}

// TestUnavailable: a database that cannot be reached, or that is shutting down, is
// "unavailable" (try again later); a refused change or a missing row is not.
func TestUnavailable(t *testing.T) {
	ctx := context.Background()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := ln.Addr().String()
	require.NoError(t, ln.Close()) // nothing listens there now
	_, err = db.Open(ctx, "postgres://gantry@"+addr+"/gantry?sslmode=disable&connect_timeout=2")
	require.Error(t, err)
	require.True(t, db.Unavailable(err), "connection refused: %v", err)
	require.True(t, db.Unavailable(fmt.Errorf("wrapped: %w", &pgconn.PgError{Code: "57P01", Message: "terminating connection due to administrator command"})))
	require.True(t, db.Unavailable(&pgconn.PgError{Code: "57P03", Message: "the database system is starting up"}))
	require.True(t, db.Unavailable(&pgconn.PgError{Code: "08006"}))
	require.False(t, db.Unavailable(&pgconn.PgError{Code: "23505"}), "a unique violation is an answer")
	require.False(t, db.Unavailable(gorm.ErrRecordNotFound))
	require.False(t, db.Unavailable(nil))
}
