package runner

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"log/slog"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver/riverdatabasesql"
	"github.com/riverqueue/river/rivertype"

	"gantry/models/run"
	"gantry/telemetry"
)

// QueueConfig configures the River client that runs inside the portal process.
type QueueConfig struct {
	// SQLDB is gorm's database/sql pool: jobs are inserted in gorm's transactions.
	SQLDB *sql.DB
	// ListenPool carries LISTEN/NOTIFY, so workers wake on insert instead of polling.
	ListenPool *pgxpool.Pool
	Runners    RunnerSet
	Logger     *slog.Logger
	// RescueStuckJobsAfter: a job still "running" this long after its process died is
	// handed to another worker. Longer than the longest phase timeout by default.
	RescueStuckJobsAfter time.Duration
	// Timeouts of the phases; zero fields take the defaults.
	Timeouts Timeouts
	// MaxWorkers bounds concurrent run jobs in this process.
	MaxWorkers int
	// Credentials mints per-phase credentials for runners that are not simulated.
	Credentials CredentialSource
	// Changes reads the cloud's record of who changed a drifted resource (nil: none).
	Changes ChangeLog
	// DriftDispatchEvery is how often the leader looks for due drift checks (zero:
	// DriftDispatchEvery).
	DriftDispatchEvery time.Duration
	// OnApplyStart is the benchmark's hook (see ApplyWorker.OnStart).
	OnApplyStart func(runID string, pickedUp time.Time)
	// ApplyHooks are the tests' hooks into each attempt of an apply job (see ApplyHooks).
	ApplyHooks ApplyHooks
	// Metrics receives the phases' durations and the jobs' queue latency (nil: none).
	Metrics *telemetry.Metrics
	// Leases: the replica id the phase workers hold leases as, the heartbeat (also how
	// often the leader sweeps expired leases) and the lease duration.
	Leases LeaseConfig
	// StateLocks reserves a workspace's state lock for an apply before tofu runs.
	StateLocks StateReserver

	// What the workers drive, all required: the run roles, the notification service,
	// the audit exports and chain, the break-glass windows. They enqueue their own
	// jobs through an Inserter built before them, so nothing here is bound later.
	Runs    *run.Runs
	Notify  Notifications
	Exports AuditWork
	Chain   AuditChain
	Windows Windows
}

// NewInserter is an insert-only River client on the portal's database: the services
// put their jobs on the queue through it, in their own transactions (Enqueuer,
// NotifyEnqueuer, ExportEnqueuer), before the workers that run those jobs exist. An
// insert tells the workers at once (LISTEN/NOTIFY), with the same 1 ms cooldown as the
// working client (NewQueue).
func NewInserter(sqlDB *sql.DB, logger *slog.Logger) (*river.Client[*sql.Tx], error) {
	if logger == nil {
		logger = slog.Default()
	}
	client, err := river.NewClient(riverdatabasesql.New(sqlDB), &river.Config{
		Logger:        logger.With("component", "river"),
		FetchCooldown: fetchCooldown,
	})
	if err != nil {
		return nil, fmt.Errorf("creating job inserter: %w", err)
	}
	return client, nil
}

// Queue is the River client and its workers, built whole: Start it, then Stop it.
type Queue struct {
	Client   *river.Client[*sql.Tx]
	plan     *PlanWorker
	apply    *ApplyWorker
	verify   *VerifyWorker
	expire   *ExpireWorker
	escalate *EscalateWorker
	export   *AuditExportWorker
	chain    *AuditCheckpointWorker
	fanout   *NotifyFanoutWorker
	deliver  *WebhookDeliveryWorker
	mail     *MailWorker
	dispatch *DriftDispatchWorker
	drift    *DriftCheckWorker
	windows  *WindowDueWorker
	sweep    *LeaseSweeper
	// The lease sweeper runs while the queue does, and the queue starts again after a
	// Stop: running says a Start holds it; Stop asks the sweeper of that Start to end
	// on stopReq, and every such sweeper says on swept that it has, once. Both are
	// buffered and made once, by NewQueue.
	running atomic.Bool
	stopReq chan struct{}
	swept   chan struct{}
}

// NewQueue builds the River client with the run workers registered.
func NewQueue(cfg QueueConfig) (*Queue, error) {
	if cfg.Runs == nil || cfg.Notify == nil || cfg.Exports == nil || cfg.Chain == nil || cfg.Windows == nil {
		return nil, errors.New("job queue: Runs, Notify, Exports, Chain and Windows are required")
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	t := cfg.Timeouts.withDefaults()
	if cfg.RescueStuckJobsAfter <= 0 {
		cfg.RescueStuckJobsAfter = max(t.Plan, t.Apply, t.Verify) + 15*time.Minute
	}
	if cfg.RescueStuckJobsAfter < t.Apply {
		// Only for tests and experiments: a job could be handed to a second worker
		// while its first worker is still alive and working.
		cfg.Logger.Warn("job rescue window is shorter than the longest phase timeout", "rescue_after", cfg.RescueStuckJobsAfter, "apply_timeout", t.Apply)
	}
	if cfg.MaxWorkers <= 0 {
		cfg.MaxWorkers = 10
	}
	if cfg.DriftDispatchEvery <= 0 {
		cfg.DriftDispatchEvery = DriftDispatchEvery
	}
	cfg.Leases = cfg.Leases.withDefaults()
	// The workers' executors are timed for the metrics; cfg.Runners stays as given.
	cfg.Runners = timed(cfg.Runners, cfg.Metrics)
	runs := cfg.Runs
	q := &Queue{
		plan:     &PlanWorker{phase: cfg.phase(t.Plan), Plans: runs.Plans, Changes: cfg.Changes},
		apply:    &ApplyWorker{phase: cfg.phase(t.Apply), Applies: runs.Applies, OnStart: cfg.OnApplyStart, Hooks: cfg.ApplyHooks, Locks: cfg.StateLocks},
		verify:   &VerifyWorker{phase: cfg.phase(t.Verify), Verifies: runs.Verifies},
		expire:   &ExpireWorker{Runs: runs.Decisions},
		escalate: &EscalateWorker{Runs: runs.Decisions},
		export:   &AuditExportWorker{Exports: cfg.Exports},
		chain:    &AuditCheckpointWorker{Chain: cfg.Chain, Logger: cfg.Logger},
		fanout:   &NotifyFanoutWorker{Notify: cfg.Notify},
		deliver:  &WebhookDeliveryWorker{Notify: cfg.Notify},
		mail:     &MailWorker{Notify: cfg.Notify},
		dispatch: &DriftDispatchWorker{Drift: runs.DriftChecks, Logger: cfg.Logger},
		drift:    &DriftCheckWorker{Drift: runs.DriftChecks},
		windows:  &WindowDueWorker{Windows: cfg.Windows},
		sweep:    &LeaseSweeper{Runs: runs.Jobs, Logger: cfg.Logger, DB: cfg.SQLDB, Leases: cfg.Leases},
		stopReq:  make(chan struct{}, 1),
		swept:    make(chan struct{}, 1),
	}
	workers := river.NewWorkers()
	if err := river.AddWorkerSafely(workers, q.plan); err != nil {
		return nil, err
	}
	if err := river.AddWorkerSafely(workers, q.apply); err != nil {
		return nil, err
	}
	if err := river.AddWorkerSafely(workers, q.verify); err != nil {
		return nil, err
	}
	if err := river.AddWorkerSafely(workers, q.expire); err != nil {
		return nil, err
	}
	if err := river.AddWorkerSafely(workers, q.escalate); err != nil {
		return nil, err
	}
	if err := river.AddWorkerSafely(workers, q.export); err != nil {
		return nil, err
	}
	if err := river.AddWorkerSafely(workers, q.chain); err != nil {
		return nil, err
	}
	if err := river.AddWorkerSafely(workers, q.fanout); err != nil {
		return nil, err
	}
	if err := river.AddWorkerSafely(workers, q.deliver); err != nil {
		return nil, err
	}
	if err := river.AddWorkerSafely(workers, q.mail); err != nil {
		return nil, err
	}
	if err := river.AddWorkerSafely(workers, q.dispatch); err != nil {
		return nil, err
	}
	if err := river.AddWorkerSafely(workers, q.drift); err != nil {
		return nil, err
	}
	if err := river.AddWorkerSafely(workers, q.windows); err != nil {
		return nil, err
	}
	var driver *riverdatabasesql.Driver
	if cfg.ListenPool != nil {
		driver = riverdatabasesql.NewWithPgxListener(cfg.SQLDB, cfg.ListenPool)
	} else {
		driver = riverdatabasesql.New(cfg.SQLDB)
	}
	middleware := []rivertype.Middleware{&logContext{}}
	if cfg.Metrics != nil {
		middleware = append(middleware, &queueLatency{metrics: cfg.Metrics})
	}
	client, err := river.NewClient(driver, &river.Config{
		Middleware: middleware,
		Logger:     cfg.Logger.With("component", "river"),
		Queues:     map[string]river.QueueConfig{QueueRuns: {MaxWorkers: cfg.MaxWorkers}, QueueAudit: {MaxWorkers: 2}, QueueNotify: {MaxWorkers: 5}},
		Workers:    workers,
		// Periodic jobs run on the leader only, so replicas do not repeat them: the
		// chain checkpoint and the drift schedule's dispatch.
		PeriodicJobs: []*river.PeriodicJob{river.NewPeriodicJob(river.PeriodicInterval(CheckpointEvery),
			func() (river.JobArgs, *river.InsertOpts) {
				return AuditCheckpointArgs{}, &river.InsertOpts{Queue: QueueAudit, MaxAttempts: 1}
			}, &river.PeriodicJobOpts{RunOnStart: true}),
			river.NewPeriodicJob(river.PeriodicInterval(cfg.DriftDispatchEvery),
				func() (river.JobArgs, *river.InsertOpts) {
					return DriftDispatchArgs{}, &river.InsertOpts{Queue: QueueRuns, MaxAttempts: 1}
				}, &river.PeriodicJobOpts{RunOnStart: true})},
		RescueStuckJobsAfter: cfg.RescueStuckJobsAfter,
		// The default for workers without their own Timeout; River requires it to be
		// at most the rescue window.
		JobTimeout:        min(time.Minute, cfg.RescueStuckJobsAfter),
		FetchCooldown:     fetchCooldown, // workers wake at insert (fetchCooldown)
		FetchPollInterval: 2 * time.Second,
	})
	if err != nil {
		return nil, fmt.Errorf("creating job queue: %w", err)
	}
	q.Client = client
	return q, nil
}

// Start starts working jobs until ctx ends or Stop is called; after a Stop it may
// start again.
func (q *Queue) Start(ctx context.Context) error {
	if !q.running.CompareAndSwap(false, true) {
		return errors.New("job queue already started: Stop it first")
	}
	if err := q.Client.Start(ctx); err != nil {
		q.running.Store(false)
		return err
	}
	// A request a Stop left after the last sweeper had already ended with its context.
	select {
	case <-q.stopReq:
	default:
	}
	sweepCtx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	done := make(chan struct{})
	go func() {
		defer close(done)
		q.sweep.Run(sweepCtx)
	}()
	go func() {
		select {
		case <-ctx.Done():
		case <-q.stopReq:
		case <-done:
		}
		cancel()
		<-done
		q.swept <- struct{}{}
	}()
	return nil
}

// Stop ends the lease sweeper, then waits for running jobs to finish, up to ctx's
// deadline, then cancels them.
func (q *Queue) Stop(ctx context.Context) error {
	if q.running.CompareAndSwap(true, false) {
		select {
		case q.stopReq <- struct{}{}:
		default: // one is already waiting
		}
		<-q.swept
	}
	if err := q.Client.Stop(ctx); err != nil {
		return q.Client.StopAndCancel(context.Background())
	}
	return nil
}

// phase is what the phase workers share, with timeout as the phase's own.
func (cfg QueueConfig) phase(timeout time.Duration) phase {
	return phase{Jobs: cfg.Runs.Jobs, Runners: cfg.Runners, Creds: cfg.Credentials, Logger: cfg.Logger, PhaseTimeout: timeout, Leases: cfg.Leases}
}

// fetchCooldown is how soon after one insert notification a client sends the next
// for the same queue. Workers wake on LISTEN/NOTIFY at insert, and River suppresses
// the notifications sent within the cooldown of the previous one, so a long cooldown
// lets an approval that follows another job's insert wait for the poll: at 5 ms the
// approval-to-apply p99 was 735 ms, at 1 ms it is about 23 ms
// (BenchmarkApprovalToApplyStart). The inserter and the working client both use it.
const fetchCooldown = time.Millisecond
