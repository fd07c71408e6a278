package db

import (
	"context"
	"fmt"

	"gorm.io/gorm"
)

// QueueCount is how many of River's jobs of one kind are in one unfinished state.
type QueueCount struct {
	Kind  string
	State string
	Count int64
}

// QueueDepth counts River's unfinished jobs (available, scheduled, retryable, running)
// by kind and state: the operators' metric of the queue (River offers no count), read
// from the shared table so every replica reports the same.
func QueueDepth(ctx context.Context, gdb *gorm.DB) ([]QueueCount, error) {
	var out []QueueCount
	err := Conn(ctx, gdb).Raw(`SELECT kind, state::text AS state, count(*) AS count FROM river_job
		WHERE state IN ('available', 'scheduled', 'retryable', 'running') GROUP BY 1, 2 ORDER BY 1, 2`).Scan(&out).Error
	if err != nil {
		return nil, fmt.Errorf("counting queued jobs: %w", err)
	}
	return out, nil
}
