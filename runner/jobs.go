package runner

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/riverqueue/river"

	"gantry/models/breakglass"
	"gantry/models/db"
	"gantry/models/run"
)

// QueueRuns is the River queue every run job goes through.
const QueueRuns = "runs"

// Job arguments. Each is unique per (run, phase) while it is not finished, so a
// duplicated request for the same phase inserts nothing.

// PlanArgs asks for the plan of a run.
type PlanArgs struct {
	RunID string `json:"run_id" river:"unique"`
	// Takeover is the token of the expired lease this job replaces (run.Job.Takeover).
	Takeover int64 `json:"takeover,omitempty" river:"unique"`
}

func (PlanArgs) Kind() string { return "run.plan" }

// ApplyArgs asks for the apply of an approved run, once per approval (Since is when the
// run was approved: an approval voided and given again gets an apply job of its own).
type ApplyArgs struct {
	RunID string    `json:"run_id" river:"unique"`
	Since time.Time `json:"since" river:"unique"`
}

func (ApplyArgs) Kind() string { return "run.apply" }

// VerifyArgs asks for the verification of an applied run.
type VerifyArgs struct {
	RunID    string `json:"run_id" river:"unique"`
	Takeover int64  `json:"takeover,omitempty" river:"unique"`
}

func (VerifyArgs) Kind() string { return "run.verify" }

// ExpireArgs expires a run still in State at its deadline, once per entry into it.
type ExpireArgs struct {
	RunID string    `json:"run_id" river:"unique"`
	State run.State `json:"state" river:"unique"`
	Since time.Time `json:"since" river:"unique"`
}

func (ExpireArgs) Kind() string { return "run.expire" }

// EscalateArgs records, once, that a waiting run's escalation took effect (one job per
// entry into PENDING_APPROVAL; the record itself is once per run and decision row).
type EscalateArgs struct {
	RunID string    `json:"run_id" river:"unique"`
	Since time.Time `json:"since" river:"unique"`
}

func (EscalateArgs) Kind() string { return "run.escalate" }

// WindowDueArgs ends what a break-glass window's deadline ends (a request's decision
// deadline, an approval's validity, an open window's clock), once per deadline.
type WindowDueArgs struct {
	WindowID string           `json:"window_id" river:"unique"`
	State    breakglass.State `json:"state" river:"unique"`
	At       time.Time        `json:"at" river:"unique"`
}

func (WindowDueArgs) Kind() string { return "breakglass.due" }

// EnqueueWindow inserts break-glass window jobs inside the transaction in ctx
// (breakglass.Enqueuer).
func (e Enqueuer) EnqueueWindow(ctx context.Context, jobs ...breakglass.Job) error {
	tx, ok := db.SQLTx(ctx)
	if !ok {
		return errors.New("enqueuing window jobs outside a transaction")
	}
	params := make([]river.InsertManyParams, 0, len(jobs))
	for _, j := range jobs {
		params = append(params, river.InsertManyParams{Args: WindowDueArgs{WindowID: j.WindowID, State: j.State, At: j.RunAt},
			InsertOpts: insertOpts(j.RunAt)})
	}
	if _, err := e.Client.InsertManyTx(ctx, tx, params); err != nil {
		return fmt.Errorf("inserting window jobs: %w", err)
	}
	return nil
}

func insertOpts(at time.Time) *river.InsertOpts {
	return &river.InsertOpts{Queue: QueueRuns, ScheduledAt: at, MaxAttempts: 5, UniqueOpts: river.UniqueOpts{ByArgs: true}}
}

// Enqueuer puts run jobs on River inside the caller's transaction (run.Enqueuer).
type Enqueuer struct {
	Client *river.Client[*sql.Tx]
}

// Enqueue inserts jobs with River's InsertManyTx on the database/sql transaction
// under the gorm transaction in ctx. Without a transaction it refuses: a job must
// never exist without the state change that asked for it.
func (e Enqueuer) Enqueue(ctx context.Context, jobs ...run.Job) error {
	tx, ok := db.SQLTx(ctx)
	if !ok {
		return errors.New("enqueuing run jobs outside a transaction")
	}
	params := make([]river.InsertManyParams, 0, len(jobs))
	for _, j := range jobs {
		var args river.JobArgs
		switch j.Kind {
		case run.JobPlan:
			args = PlanArgs{RunID: j.RunID, Takeover: j.Takeover}
		case run.JobApply:
			args = ApplyArgs{RunID: j.RunID, Since: j.Since}
		case run.JobVerify:
			args = VerifyArgs{RunID: j.RunID, Takeover: j.Takeover}
		case run.JobExpire:
			args = ExpireArgs{RunID: j.RunID, State: j.State, Since: j.Since}
		case run.JobEscalate:
			args = EscalateArgs{RunID: j.RunID, Since: j.Since}
		default:
			return fmt.Errorf("unknown job kind %q", j.Kind)
		}
		params = append(params, river.InsertManyParams{Args: args, InsertOpts: insertOpts(j.RunAt)})
	}
	if _, err := e.Client.InsertManyTx(ctx, tx, params); err != nil {
		return fmt.Errorf("inserting jobs: %w", err)
	}
	return nil
}
