package runner

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/riverqueue/river"

	"gantry/models/breakglass"
	"gantry/models/run"
)

// The drift schedule (DESIGN §9): a periodic job, run by the leader only (one per
// Gantry deployment however many replicas share the database), finds the workspaces
// whose drift check is due and inserts one check job per workspace and time slot; the
// slot is part of the job's unique key, so a second dispatch in the same slot (a new
// leader, a retry) inserts nothing. Each check job queues the drift check run if it is
// still due, under the workspace's lock.

// DriftDispatchEvery is how often the leader looks for due drift checks.
const DriftDispatchEvery = time.Minute

// DriftDispatchArgs is the periodic search for due drift checks.
type DriftDispatchArgs struct{}

func (DriftDispatchArgs) Kind() string { return "drift.dispatch" }

// DriftCheckArgs queues one workspace's scheduled drift check, once per slot (the
// interval's ordinal since the epoch).
type DriftCheckArgs struct {
	OrganizationID string        `json:"organization_id"`
	WorkspaceID    string        `json:"workspace_id" river:"unique"`
	Slot           int64         `json:"slot" river:"unique"`
	Interval       time.Duration `json:"interval"`
}

func (DriftCheckArgs) Kind() string { return "drift.check" }

// slotOf is the ordinal of now's interval since the epoch.
func slotOf(now time.Time, interval time.Duration) int64 {
	if interval <= 0 {
		return 0
	}
	return now.UnixNano() / int64(interval)
}

// Drift is what the drift workers need of the run lifecycle.
type Drift interface {
	DriftDue(ctx context.Context) ([]run.DueCheck, error)
	ScheduledDriftCheck(ctx context.Context, orgID, workspaceID string, interval time.Duration) (run.Run, error)
}

// DriftDispatchWorker inserts the due checks.
type DriftDispatchWorker struct {
	river.WorkerDefaults[DriftDispatchArgs]
	Drift  Drift
	Logger *slog.Logger
}

func (w *DriftDispatchWorker) Work(ctx context.Context, _ *river.Job[DriftDispatchArgs]) error {
	due, err := w.Drift.DriftDue(ctx)
	if err != nil || len(due) == 0 {
		return err
	}
	client := river.ClientFromContext[*sql.Tx](ctx)
	now := time.Now()
	params := make([]river.InsertManyParams, 0, len(due))
	for _, d := range due {
		params = append(params, river.InsertManyParams{Args: DriftCheckArgs{OrganizationID: d.OrganizationID, WorkspaceID: d.WorkspaceID,
			Slot: slotOf(now, d.Interval), Interval: d.Interval}, InsertOpts: insertOpts(time.Time{})})
	}
	if _, err := client.InsertMany(ctx, params); err != nil {
		return fmt.Errorf("inserting drift checks: %w", err)
	}
	w.Logger.InfoContext(ctx, "drift checks due", "workspaces", len(due))
	return nil
}

// DriftCheckWorker queues one scheduled drift check run.
type DriftCheckWorker struct {
	river.WorkerDefaults[DriftCheckArgs]
	Drift Drift
}

func (w *DriftCheckWorker) Work(ctx context.Context, job *river.Job[DriftCheckArgs]) error {
	_, err := w.Drift.ScheduledDriftCheck(ctx, job.Args.OrganizationID, job.Args.WorkspaceID, job.Args.Interval)
	return ignoreSkip(err)
}

// Windows is what the window deadline worker drives (breakglass.Service).
type Windows interface {
	Due(ctx context.Context, id string, st breakglass.State) (breakglass.Window, error)
}

// WindowDueWorker ends what a break-glass window's deadline ends.
type WindowDueWorker struct {
	river.WorkerDefaults[WindowDueArgs]
	Windows Windows
}

func (w *WindowDueWorker) Work(ctx context.Context, job *river.Job[WindowDueArgs]) error {
	_, err := w.Windows.Due(ctx, job.Args.WindowID, job.Args.State)
	if errors.Is(err, run.ErrSkip) {
		return nil
	}
	return err
}
