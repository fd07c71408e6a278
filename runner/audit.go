package runner

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/riverqueue/river"

	"gantry/models/audit"
	"gantry/models/db"
)

// QueueAudit is the River queue of the audit log's own jobs (exports and the chain
// checkpoint), apart from runs so a long export never delays a plan.
const QueueAudit = "audit"

// AuditWork is what the audit jobs drive.
type AuditWork interface {
	Build(ctx context.Context, exportID string) error
}

// AuditChain is the chain checkpoint's work.
type AuditChain interface {
	Organizations(ctx context.Context) ([]string, error)
	Advance(ctx context.Context, orgID string, budget int) (audit.ChainState, error)
}

// AuditExportArgs asks for the build of one export.
type AuditExportArgs struct {
	ExportID string `json:"export_id" river:"unique"`
}

func (AuditExportArgs) Kind() string { return "audit.export" }

// AuditCheckpointArgs advances every organization's chain checkpoint.
type AuditCheckpointArgs struct{}

func (AuditCheckpointArgs) Kind() string { return "audit.checkpoint" }

// CheckpointEvery is how often the chain checkpoint advances, and checkpointBudget how
// many events one organization's check may verify per run.
const (
	CheckpointEvery  = time.Minute
	checkpointBudget = 200_000
)

// AuditExportWorker builds an export.
type AuditExportWorker struct {
	river.WorkerDefaults[AuditExportArgs]
	Exports AuditWork
}

// Timeout: a million events take seconds; a slow database gets minutes.
func (w *AuditExportWorker) Timeout(*river.Job[AuditExportArgs]) time.Duration {
	return 30 * time.Minute
}

func (w *AuditExportWorker) Work(ctx context.Context, job *river.Job[AuditExportArgs]) error {
	return w.Exports.Build(ctx, job.Args.ExportID)
}

// AuditCheckpointWorker verifies newly appended events of every organization.
type AuditCheckpointWorker struct {
	river.WorkerDefaults[AuditCheckpointArgs]
	Chain  AuditChain
	Logger *slog.Logger
}

func (w *AuditCheckpointWorker) Timeout(*river.Job[AuditCheckpointArgs]) time.Duration {
	return 10 * time.Minute
}

func (w *AuditCheckpointWorker) Work(ctx context.Context, _ *river.Job[AuditCheckpointArgs]) error {
	orgs, err := w.Chain.Organizations(ctx)
	if err != nil {
		return err
	}
	for _, org := range orgs {
		state, err := w.Chain.Advance(ctx, org, checkpointBudget)
		if err != nil {
			return fmt.Errorf("checking the audit chain of %s: %w", org, err)
		}
		if !state.Intact() {
			w.Logger.ErrorContext(ctx, "audit chain broken", "org", org, "seq", state.BrokenSeq, "reason", state.BrokenReason)
		}
	}
	return nil
}

// ExportEnqueuer inserts export jobs in the caller's transaction (audit.ExportEnqueuer).
type ExportEnqueuer struct {
	Client *river.Client[*sql.Tx]
}

func (e ExportEnqueuer) EnqueueExport(ctx context.Context, exportID string) error {
	tx, ok := db.SQLTx(ctx)
	if !ok {
		return errors.New("enqueuing an export outside a transaction")
	}
	_, err := e.Client.InsertTx(ctx, tx, AuditExportArgs{ExportID: exportID},
		&river.InsertOpts{Queue: QueueAudit, MaxAttempts: 3, UniqueOpts: river.UniqueOpts{ByArgs: true}})
	if err != nil {
		return fmt.Errorf("inserting the export job: %w", err)
	}
	return nil
}
