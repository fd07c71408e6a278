package ratelimit

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"strings"
	"time"
	"unicode/utf8"

	"gorm.io/gorm"
)

// Store keeps the buckets in the table rate_limit_buckets (migration 00038), shared by
// every replica on the database. The zero value is not usable: call NewStore.
type Store struct {
	db *gorm.DB
	// now is the clock of tests (WithClock); nil is the database's.
	now func() time.Time
}

// NewStore returns the buckets of the database gdb, read by the database's clock.
func NewStore(gdb *gorm.DB) *Store { return &Store{db: gdb} }

// WithClock returns s reading time from now instead of the database: tests move time by
// hand. Only the database's clock is honest across replicas, since it is the one clock
// they share: a replica whose own clock ran 30 s fast would find every bucket 30 s
// emptier than it is (and one running slow, fuller), so production never sets one; a
// test's replicas share its one clock as they would the database's.
func (s *Store) WithClock(now func() time.Time) *Store {
	c := *s
	c.now = now
	return &c
}

// checkSQL is one check: it decides, over every key at once, and moves the buckets
// only when all of them let the request through, in one statement (so in one
// transaction, whatever the caller's). Reading it from the top:
//
//   - clock: the instant of the check, the test's clock or the database's (the
//     statement's start: the same for every part of it).
//   - asked: the keys with their interval (step) and slack, in microseconds.
//   - held: the buckets that exist, locked in key order (two checks over the same keys
//     take their locks in the same order). FOR UPDATE under READ COMMITTED waits for a
//     check holding a bucket to commit and then reads the bucket as that check left it,
//     not as the statement's snapshot saw it: a decision is never made on a spent token.
//   - due and verdict: GCRA per key (tat is the bucket's full instant, now if it is full
//     or missing) and the longest wait; the request goes ahead when no key must wait.
//   - moved: only then every bucket moves one interval on, a missing one inserted. A
//     bucket missing from the snapshot may have been created by a check that committed
//     since (the only rows FOR UPDATE cannot see): the update's own condition then
//     decides for it on the row as it now is. If that bucket was empty the key is not
//     moved, and the check is refused although its other buckets moved: in that one race
//     (more first requests at once than a fresh bucket's burst) a refused request may
//     spend the other keys' tokens, and no limit is ever exceeded.
//
// It answers how long the request must wait, in microseconds: 0 when it went ahead; when
// refused in that race, the refused key's interval (an upper bound: the bucket was
// created at most that long ago by a request that found it full).
const checkSQL = `WITH clock AS (SELECT coalesce(?::timestamptz, statement_timestamp()) AS now),
asked (key, step, slack) AS (VALUES %s),
held AS (
	SELECT b.key, b.full_at FROM rate_limit_buckets b
	WHERE b.key IN (SELECT key FROM asked) ORDER BY b.key FOR UPDATE),
due AS (
	SELECT a.key, a.step, greatest(h.full_at, c.now) AS tat, greatest(h.full_at, c.now) - c.now - a.slack AS wait
	FROM asked a CROSS JOIN clock c LEFT JOIN held h ON h.key = a.key),
verdict AS (SELECT max(wait) AS wait FROM due),
moved AS (
	INSERT INTO rate_limit_buckets AS b (key, full_at)
	SELECT d.key, d.tat + d.step FROM due d, verdict v WHERE v.wait <= interval '0' ORDER BY d.key
	ON CONFLICT (key) DO UPDATE SET full_at = greatest(b.full_at, (SELECT now FROM clock)) + (SELECT step FROM asked a WHERE a.key = b.key)
	WHERE greatest(b.full_at, (SELECT now FROM clock)) - (SELECT now FROM clock) <= (SELECT slack FROM asked a WHERE a.key = b.key)
	RETURNING b.key)
SELECT (extract(epoch FROM CASE WHEN v.wait > interval '0' THEN v.wait
	ELSE coalesce((SELECT max(a.step) FROM asked a WHERE a.key NOT IN (SELECT key FROM moved)), interval '0') END) * 1000000)::bigint
FROM verdict v`

// askedRow is one key's row of checkSQL's VALUES.
const askedRow = "(?::text, ?::bigint * interval '1 microsecond', ?::bigint * interval '1 microsecond')"

// Allow takes one request from the bucket of every key, or from none when any of them is
// empty: a request refused by one limit does not use up another. It answers 0 when the
// request may go ahead, else how long until every bucket holds a request again. Keys
// whose rate is off are left out; with none left it answers 0 without asking the
// database.
//
// An error means nothing is known (the database did not answer, or the statement was
// chosen as a deadlock's victim and changed nothing); the caller decides what a limit
// does then (web/ratelimit.go refuses the request).
func (s *Store) Allow(ctx context.Context, keys ...Key) (time.Duration, error) {
	var (
		rows []string
		args []any
		seen = map[string]bool{}
	)
	args = append(args, s.at())
	for _, k := range keys {
		if k.Rate.Off() {
			continue
		}
		name := bucketName(k.Name)
		if seen[name] {
			return 0, fmt.Errorf("rate limit check: the key %q is named twice", k.Name)
		}
		seen[name] = true
		rows = append(rows, askedRow)
		args = append(args, name, k.Rate.interval().Microseconds(), k.Rate.slack().Microseconds())
	}
	if len(rows) == 0 {
		return 0, nil
	}
	var waitUS int64
	// Not db.Conn: the check commits on its own, at once, whatever transaction the
	// context carries, so other replicas see the token spent and its lock is not held
	// through someone else's work.
	row := s.db.WithContext(ctx).Raw(fmt.Sprintf(checkSQL, strings.Join(rows, ", ")), args...).Row()
	if err := row.Scan(&waitUS); err != nil {
		return 0, fmt.Errorf("checking rate limits: %w", err)
	}
	return time.Duration(waitUS) * time.Microsecond, nil
}

// at is the instant a statement is given: the test's clock, or nil for the database's.
func (s *Store) at() any {
	if s.now == nil {
		return nil
	}
	return s.now()
}

// bucketName is the row key of a key's name: the name itself, readable in the table,
// unless it is longer than MaxKeyLength or no text PostgreSQL keeps (an address a
// trusted proxy forwarded that is no address), then a digest of it: one odd name is
// still one bucket, and no error.
func bucketName(name string) string {
	if len(name) <= MaxKeyLength && utf8.ValidString(name) && !strings.ContainsRune(name, 0) {
		return name
	}
	sum := sha256.Sum256([]byte(name))
	return "sha256:" + hex.EncodeToString(sum[:])
}
