package audit

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/stdlib"

	"gantry/models/db"
)

// Reading an export's events: the time range turned into a sequence range once, then
// batches by keyset on a pgx connection of the export's own, the next batch read while
// the last one is written.

// stream calls each for every pinned event of the export in seq order, and progress
// after every batch. Time follows the sequence, so the time range is first turned into
// a range of sequence numbers (two index lookups); the batches then walk the sequence
// by keyset, each query reading one batch through an index on seq (a time condition in
// every batch would let the planner scan the whole range per batch). An event outside
// the time range (possible only before times followed the sequence) is skipped.
func (x *Exports) stream(ctx context.Context, e Export, q Query, each func(Event) error, progress func(done int64) error) error {
	lo, hi, err := x.seqRange(ctx, e)
	if err != nil || lo == 0 {
		return err
	}
	byScope := q
	byScope.From, byScope.To = time.Time{}, time.Time{}
	// The next batch is read while this one is written: the database works on its own
	// core meanwhile. Two batches are in memory at most.
	type read struct {
		events []Event
		err    error
	}
	batches := make(chan read, 1)
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	go func() {
		defer close(batches)
		err := x.onPgxConn(ctx, func(conn *pgx.Conn) error {
			for after := lo - 1; ; {
				events, err := readBatch(ctx, conn, e.OrganizationID, byScope, after, hi)
				select {
				case batches <- read{events, err}:
				case <-ctx.Done():
					return ctx.Err()
				}
				if err != nil || len(events) < exportBatch {
					return err
				}
				after = events[len(events)-1].Seq
			}
		})
		if err != nil {
			select {
			case batches <- read{err: err}:
			case <-ctx.Done():
			}
		}
	}()
	var done int64
	for b := range batches {
		if b.err != nil {
			return b.err
		}
		for _, ev := range b.events {
			if ev.OccurredAt.Before(e.FromTime) || !ev.OccurredAt.Before(e.ToTime) {
				continue
			}
			if err := each(ev); err != nil {
				return err
			}
			done++
		}
		if err := progress(done); err != nil {
			return err
		}
	}
	return ctx.Err()
}

// seqRange is the first and last sequence numbers of export e's time range among the
// events it is pinned to (0, 0 when there are none).
func (x *Exports) seqRange(ctx context.Context, e Export) (lo, hi int64, err error) {
	var r struct{ Lo, Hi *int64 }
	err = db.Conn(ctx, x.db).Raw(`SELECT
	    (SELECT seq FROM audit_events WHERE organization_id = ? AND occurred_at >= ? AND seq <= ? ORDER BY occurred_at, seq LIMIT 1) AS lo,
	    (SELECT seq FROM audit_events WHERE organization_id = ? AND occurred_at < ? AND seq <= ? ORDER BY occurred_at DESC, seq DESC LIMIT 1) AS hi`,
		e.OrganizationID, e.FromTime, e.LastSeq, e.OrganizationID, e.ToTime, e.LastSeq).Scan(&r).Error
	if err != nil {
		return 0, 0, fmt.Errorf("finding the export's events: %w", err)
	}
	if r.Lo == nil || r.Hi == nil || *r.Lo > *r.Hi {
		return 0, 0, nil
	}
	return *r.Lo, *r.Hi, nil
}

// onPgxConn runs f on a connection of the pool of its own, as pgx's native connection:
// its rows scan without database/sql's conversions (a fifth of an export's time went to
// them).
func (x *Exports) onPgxConn(ctx context.Context, f func(*pgx.Conn) error) error {
	sqlDB, err := x.db.DB()
	if err != nil {
		return err
	}
	conn, err := sqlDB.Conn(ctx)
	if err != nil {
		return fmt.Errorf("taking a connection: %w", err)
	}
	defer conn.Close()
	return conn.Raw(func(driverConn any) error {
		c, ok := driverConn.(*stdlib.Conn)
		if !ok {
			return fmt.Errorf("the database driver is %T, not pgx", driverConn)
		}
		return f(c.Conn())
	})
}

// readBatch reads up to exportBatch events of the scope in (after, hi] in seq order.
func readBatch(ctx context.Context, conn *pgx.Conn, orgID string, scope Query, after, hi int64) ([]Event, error) {
	// The data as text only where no stored body holds it already.
	query := `SELECT seq, occurred_at, actor_id, actor_name, action, target_type, target_id,
	        CASE WHEN body IS NULL THEN data::text END,
	        COALESCE(environment_id, ''), COALESCE(workspace_id, ''), COALESCE(run_id, ''), prev_hash, hash, body
	    FROM audit_events WHERE organization_id = $1 AND seq > $2 AND seq <= $3`
	args := []any{orgID, after, hi}
	for _, f := range []struct{ column, value string }{{"actor_id", scope.ActorID}, {"action", scope.Action}, {"run_id", scope.RunID},
		{"environment_id", scope.EnvironmentID}, {"workspace_id", scope.WorkspaceID}} {
		if f.value != "" {
			args = append(args, f.value)
			query += fmt.Sprintf(" AND %s = $%d", f.column, len(args))
		}
	}
	query += fmt.Sprintf(" ORDER BY seq LIMIT %d", exportBatch)
	rows, err := conn.Query(ctx, query, args...)
	if err != nil {
		return nil, fmt.Errorf("reading events: %w", err)
	}
	defer rows.Close()
	events := make([]Event, 0, exportBatch)
	for rows.Next() {
		ev := Event{OrganizationID: orgID}
		var data []byte
		if err := rows.Scan(&ev.Seq, &ev.OccurredAt, &ev.ActorID, &ev.ActorName, &ev.Action, &ev.TargetType, &ev.TargetID, &data,
			&ev.EnvironmentID, &ev.WorkspaceID, &ev.RunID, &ev.PrevHash, &ev.Hash, &ev.HashedBody); err != nil {
			return nil, fmt.Errorf("reading an event: %w", err)
		}
		ev.Data = data
		events = append(events, ev)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("reading events: %w", err)
	}
	return events, nil
}
