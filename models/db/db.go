// Package db sets up gorm on PostgreSQL, carries transactions in the context, and
// translates database errors into the domain errors of package errs, once, here.
package db

import (
	"context"
	"crypto/rand"
	"database/sql"
	"database/sql/driver"
	"encoding/base32"
	"errors"
	"fmt"
	"io"
	"net"
	"strings"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
	_ "github.com/jackc/pgx/v5/stdlib" // database/sql driver "pgx" for migrations
	"gorm.io/driver/postgres"
	"gorm.io/gorm"
	"gorm.io/gorm/logger"

	"gantry/models/errs"
)

// MaxConns bounds the connections a portal's pool opens to the database, busy or idle.
const MaxConns = 20

// Open connects gorm to the PostgreSQL database at dsn and checks that it answers.
func Open(ctx context.Context, dsn string) (*gorm.DB, error) {
	gdb, err := gorm.Open(postgres.Open(dsn), &gorm.Config{
		Logger:                 logger.Discard,
		SkipDefaultTransaction: true, // our services open the transactions they need
		NowFunc:                func() time.Time { return time.Now().UTC() },
	})
	if err != nil {
		return nil, fmt.Errorf("opening database: %w", err)
	}
	sqlDB, err := gdb.DB()
	if err != nil {
		return nil, fmt.Errorf("opening database: %w", err)
	}
	sqlDB.SetMaxOpenConns(MaxConns)
	// database/sql keeps only 2 idle connections unless told otherwise: every
	// connection beyond them was closed as it was put back and a new one opened (a
	// PostgreSQL backend started, pgx's statement cache cold) for the next query. The
	// job queue's fetch, an apply's checks and the approval's transaction overlap, so
	// the portal paid that on nearly every approval (BenchmarkApprovalToApplyStart: 1.5
	// connections reopened per run, the median 12.5 ms; kept idle, 4.6 ms). Idle
	// connections still close after five minutes unused.
	sqlDB.SetMaxIdleConns(MaxConns)
	sqlDB.SetConnMaxIdleTime(5 * time.Minute)
	pingCtx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if err := sqlDB.PingContext(pingCtx); err != nil {
		return nil, fmt.Errorf("connecting to database: %w", err)
	}
	return gdb, nil
}

// OpenSQL opens a plain database/sql handle (pgx driver), for migrations.
func OpenSQL(dsn string) (*sql.DB, error) {
	sqlDB, err := sql.Open("pgx", dsn)
	if err != nil {
		return nil, fmt.Errorf("opening database: %w", err)
	}
	return sqlDB, nil
}

type txKey struct{}

// Conn returns the transaction carried by ctx, or base bound to ctx when there is none.
// Stores call it so one service transaction spans every store it touches.
func Conn(ctx context.Context, base *gorm.DB) *gorm.DB {
	if tx, ok := ctx.Value(txKey{}).(*gorm.DB); ok {
		return tx
	}
	return base.WithContext(ctx)
}

// Tx runs fn in a transaction carried by the context it receives; a nested call joins
// the outer transaction instead of opening a second one. When fn's error is a
// CommitThen, the transaction commits and Tx returns the error inside it; a nested Tx
// passes the CommitThen on, so the outermost one decides.
func Tx(ctx context.Context, base *gorm.DB, fn func(ctx context.Context) error) error {
	if _, ok := ctx.Value(txKey{}).(*gorm.DB); ok {
		return fn(ctx)
	}
	var answer error
	err := base.WithContext(ctx).Transaction(func(tx *gorm.DB) error {
		err := fn(context.WithValue(ctx, txKey{}, tx))
		var ct commitThen
		if errors.As(err, &ct) {
			answer = ct.err
			return nil
		}
		return err
	})
	if err != nil {
		return err
	}
	return answer
}

// commitThen: see CommitThen.
type commitThen struct{ err error }

func (c commitThen) Error() string { return c.err.Error() }
func (c commitThen) Unwrap() error { return c.err }

// CommitThen wraps err, the answer to a caller whose request failed, when what the
// transaction did must still commit: a decision that came too late expires its run (that
// is recorded) and answers APPROVAL_EXPIRED. Whoever owns the transaction commits it and
// returns err. Code between them sees an error that unwraps to err and must not treat
// its own work as done (it may undo its own part, see MustCommit).
func CommitThen(err error) error { return commitThen{err: err} }

// MustCommit reports whether err asks the transaction to commit anyway (CommitThen).
func MustCommit(err error) bool {
	var ct commitThen
	return errors.As(err, &ct)
}

// Unavailable reports whether err says the database could not be reached or went
// away (restarting, shutting down, a connection refused or cut): nothing was done, and
// asking again once it is back is the right answer (the state backend says 503).
func Unavailable(err error) bool {
	if err == nil {
		return false
	}
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) {
		// Class 08: connection exception; 57P01-57P03: admin or crash shutdown, cannot
		// connect now (starting up or recovering).
		return strings.HasPrefix(pgErr.Code, "08") || pgErr.Code == "57P01" || pgErr.Code == "57P02" || pgErr.Code == "57P03"
	}
	var connectErr *pgconn.ConnectError
	if errors.As(err, &connectErr) || errors.Is(err, driver.ErrBadConn) || pgconn.SafeToRetry(err) {
		return true
	}
	var netErr net.Error
	if errors.As(err, &netErr) {
		return true
	}
	// A connection cut mid-query surfaces as an unexpected EOF or a closed connection.
	return errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, net.ErrClosed) || strings.Contains(err.Error(), "conn closed")
}

// Translate maps database errors onto domain errors: a missing row is ErrNotFound, a
// unique or foreign-key violation ErrConflict, text the database refuses to store
// (NUL, invalid UTF-8) ErrBadRequest. Other errors pass through unchanged.
func Translate(err error) error {
	if err == nil {
		return nil
	}
	if errors.Is(err, gorm.ErrRecordNotFound) {
		return fmt.Errorf("%w", errs.ErrNotFound)
	}
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) {
		switch pgErr.Code {
		case "40P01", "40001": // deadlock_detected, serialization_failure: nothing was done; try again
			return errs.Explain(fmt.Errorf("%s: %w", pgErr.Code, errs.ErrConflict), "Another change to the same records was made at the same moment. Nothing was saved: try again.")
		case "23505": // unique_violation
			return fmt.Errorf("%s: %w", pgErr.ConstraintName, errs.ErrConflict)
		case "23503": // foreign_key_violation
			return fmt.Errorf("%s: %w", pgErr.ConstraintName, errs.ErrConflict)
		case "22021", // character_not_in_repertoire: NUL or bytes that are not UTF-8
			"22P05": // untranslatable_character: e.g. \u0000 in a jsonb value
			// The edge refuses such bytes first; this is the backstop for any that slip by.
			return fmt.Errorf("%s: %w", pgErr.Code, errs.Explain(errs.ErrBadRequest,
				"The request contains characters Gantry cannot store (a NUL character or bytes that are not UTF-8). Remove them and try again."))
		}
		// Not 22P02 (invalid_text_representation) or 22P04 (bad_copy_file_format): Gantry
		// parses typed input in Go and uses no COPY, so those would be Gantry's own bugs,
		// which must stay 500s that are logged, not be blamed on the request.
	}
	return err
}

// IsUniqueViolation reports whether err is a unique violation of the named constraint
// or index, so a service can turn a lost race into a field message.
func IsUniqueViolation(err error, constraint string) bool {
	var pgErr *pgconn.PgError
	return errors.As(err, &pgErr) && pgErr.Code == "23505" && pgErr.ConstraintName == constraint
}

// IsLockNotAvailable reports whether err is a statement giving up on a lock after
// lock_timeout, so a caller can answer "busy, try again" instead of failing.
func IsLockNotAvailable(err error) bool {
	var pgErr *pgconn.PgError
	return errors.As(err, &pgErr) && pgErr.Code == "55P03"
}

var idEncoding = base32.StdEncoding.WithPadding(base32.NoPadding)

// NewID returns a typed, random identifier such as "env-k3q...": the prefix tells a
// person (and a log reader) what kind of object an id names.
func NewID(prefix string) string {
	var b [12]byte
	if _, err := rand.Read(b[:]); err != nil {
		panic(fmt.Sprintf("reading random bytes: %v", err)) // crypto/rand never fails on Linux
	}
	return prefix + "-" + strings.ToLower(idEncoding.EncodeToString(b[:]))
}

// SQLTx returns the database/sql transaction under the gorm transaction carried by ctx,
// so a library that speaks database/sql (River's InsertTx) joins the same transaction.
func SQLTx(ctx context.Context) (*sql.Tx, bool) {
	tx, ok := ctx.Value(txKey{}).(*gorm.DB)
	if !ok {
		return nil, false
	}
	sqlTx, ok := tx.Statement.ConnPool.(*sql.Tx)
	return sqlTx, ok
}
