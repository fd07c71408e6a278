package ratelimit

import (
	"context"
	"fmt"
	"log/slog"
	"time"
)

// SweepEvery is how often each portal sweeps the buckets full again. The default limits'
// buckets are full again within a minute of their client's last request, so the table
// holds about the clients of the last minute and a half, whatever a flood brings.
const SweepEvery = 30 * time.Second

// sweepBatch bounds the rows one statement deletes, so a sweep after a flood holds no
// lock on a large part of the table at once.
const sweepBatch = 10_000

// Sweep deletes the buckets that are full again, a batch a statement until none is
// left, and returns how many went. A missing row answers exactly as a full bucket does,
// so no answer changes; a bucket a check holds at that moment is skipped (the check is
// moving it anyway) and a bucket a check moved since the statement began is judged as
// the check left it.
func (s *Store) Sweep(ctx context.Context) (int64, error) {
	var total int64
	for {
		res := s.db.WithContext(ctx).Exec(`DELETE FROM rate_limit_buckets WHERE key IN (
			SELECT key FROM rate_limit_buckets WHERE full_at <= coalesce(?::timestamptz, statement_timestamp())
			LIMIT ? FOR UPDATE SKIP LOCKED)`, s.at(), sweepBatch)
		if res.Error != nil {
			return total, fmt.Errorf("sweeping rate limit buckets: %w", res.Error)
		}
		total += res.RowsAffected
		if res.RowsAffected < sweepBatch {
			return total, nil
		}
	}
}

// RunSweeper sweeps every interval until ctx ends. Every replica runs one: sweeps are
// idempotent, and two at once skip each other's rows. A failed sweep is logged and the
// next one tries again.
func (s *Store) RunSweeper(ctx context.Context, every time.Duration, logger *slog.Logger) {
	tick := time.NewTicker(every)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		if n, err := s.Sweep(ctx); err != nil && ctx.Err() == nil {
			logger.WarnContext(ctx, "rate limit sweep failed", slog.Any("error", err))
		} else if n > 0 {
			logger.DebugContext(ctx, "rate limit buckets swept", slog.Int64("rows", n))
		}
	}
}
