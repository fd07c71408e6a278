// Package audittest fills an organization's audit log quickly for benchmarks: events
// linked and hashed exactly as Log.Record links them, inserted in large batches.
package audittest

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"gorm.io/gorm"

	"gantry/models/audit"
	"gantry/models/db"
)

// batch is how many events one INSERT carries (14 columns, under PostgreSQL's 65,535
// parameters).
const batch = 4000

// Seed appends n events to organization orgID's chain, after its current head: a mix
// of run transitions, state writes and sign-ins across envs environments and
// workspaces, a microsecond apart (a million take a second), from the head's time on. It takes the chain's lock, so nothing else
// appends meanwhile.
func Seed(ctx context.Context, gdb *gorm.DB, orgID string, n int, envs, workspaces []string) error {
	if err := seed(ctx, gdb, orgID, n, envs, workspaces); err != nil {
		return err
	}
	// Statistics as autovacuum would have them by now: without them the planner takes
	// a million fresh rows for a few, and plans as if so.
	return gdb.WithContext(ctx).Exec("ANALYZE audit_events").Error
}

func seed(ctx context.Context, gdb *gorm.DB, orgID string, n int, envs, workspaces []string) error {
	log := audit.New(gdb)
	return db.Tx(ctx, gdb, func(ctx context.Context) error {
		if err := log.Lock(ctx, orgID); err != nil {
			return err
		}
		conn := db.Conn(ctx, gdb)
		var head []audit.Event
		if err := conn.Where("organization_id = ?", orgID).Order("seq DESC").Limit(1).Find(&head).Error; err != nil {
			return err
		}
		var seq int64
		var prev []byte
		start := time.Now().UTC().Add(-time.Duration(n) * time.Microsecond).Truncate(time.Microsecond)
		if len(head) == 1 {
			seq, prev = head[0].Seq, head[0].Hash
			if head[0].OccurredAt.After(start) {
				start = head[0].OccurredAt
			}
		}
		rows := make([]audit.Event, 0, batch)
		for i := range n {
			seq++
			env, ws := envs[i%len(envs)], workspaces[i%len(workspaces)]
			run := fmt.Sprintf("run-bench%07d", i/8)
			ev := audit.Event{OrganizationID: orgID, Seq: seq, OccurredAt: start.Add(time.Duration(i+1) * time.Microsecond),
				ActorID: "system", ActorName: "Gantry", EnvironmentID: env, WorkspaceID: ws, RunID: run, TargetType: "run", TargetID: run}
			var data any
			switch i % 8 {
			case 0:
				ev.ActorID, ev.ActorName, ev.Action = "usr-bench", "Olivia (operator)", "run.queued"
				data = map[string]any{"kind": "apply", "number": i/8 + 1, "workspace_id": ws, "template": "bucket", "template_version": "1.2.0",
					"config_digest": fmt.Sprintf("%064x", i), "inputs": map[string]any{"name": "bucket-" + run, "retention_days": 30}}
			case 5:
				ev.Action, ev.TargetType, ev.TargetID = "state.version_created", "workspace", ws
				data = map[string]any{"state_version_id": "sv-" + run, "serial": i / 8, "lineage": "l-" + ws, "sha256": fmt.Sprintf("%064x", i), "run_id": run}
			default:
				states := []string{"", "planning", "planned", "pending_approval", "approved", "", "running", "succeeded"}
				ev.Action = "run." + states[i%8]
				data = map[string]any{"from": "X", "to": states[i%8], "reason": "benchmark transition", "workspace_id": ws, "number": i/8 + 1,
					"plan_digest": fmt.Sprintf("%064x", i/8), "simulated": true}
			}
			raw, err := json.Marshal(data)
			if err != nil {
				return err
			}
			ev.Data = raw
			ev.PrevHash = prev
			if ev.HashedBody, err = ev.Body(); err != nil {
				return err
			}
			ev.Hash = audit.HashOf(prev, ev.HashedBody)
			prev = ev.Hash
			rows = append(rows, ev)
			if len(rows) == batch || i == n-1 {
				if err := conn.Create(&rows).Error; err != nil {
					return fmt.Errorf("seeding audit events: %w", err)
				}
				rows = rows[:0]
			}
		}
		return nil
	})
}
