package runner

import (
	"context"
	"database/sql"
	"fmt"
	"log/slog"
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
}

// Queue is the River client and its workers. Build it, hand Enqueuer() to the run
// service, then Bind the service and Start.
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
	// stopSweep ends the sweeper started by Start.
	stopSweep func()
}

// NewQueue builds the River client with the run workers registered.
func NewQueue(cfg QueueConfig) (*Queue, error) {
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
	q := &Queue{
		plan:     &PlanWorker{phase: cfg.phase(t.Plan), Changes: cfg.Changes},
		apply:    &ApplyWorker{phase: cfg.phase(t.Apply), OnStart: cfg.OnApplyStart, Hooks: cfg.ApplyHooks, Locks: cfg.StateLocks},
		verify:   &VerifyWorker{phase: cfg.phase(t.Verify)},
		expire:   &ExpireWorker{},
		escalate: &EscalateWorker{},
		export:   &AuditExportWorker{},
		chain:    &AuditCheckpointWorker{Logger: cfg.Logger},
		fanout:   &NotifyFanoutWorker{},
		deliver:  &WebhookDeliveryWorker{},
		mail:     &MailWorker{},
		dispatch: &DriftDispatchWorker{Logger: cfg.Logger},
		drift:    &DriftCheckWorker{},
		windows:  &WindowDueWorker{},
		sweep:    &LeaseSweeper{Logger: cfg.Logger, DB: cfg.SQLDB, Leases: cfg.Leases},
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
		JobTimeout: min(time.Minute, cfg.RescueStuckJobsAfter),
		// Workers wake on LISTEN/NOTIFY at insert. River also suppresses insert
		// notifications sent within FetchCooldown of the previous one, so a long
		// cooldown lets an approval that follows another job's insert wait for the poll:
		// at 5 ms the approval-to-apply p99 was 735 ms, at 1 ms it is about 23 ms
		// (BenchmarkApprovalToApplyStart).
		FetchCooldown:     time.Millisecond,
		FetchPollInterval: 2 * time.Second,
	})
	if err != nil {
		return nil, fmt.Errorf("creating job queue: %w", err)
	}
	q.Client = client
	return q, nil
}

// Enqueuer is what the run service uses to insert jobs transactionally.
func (q *Queue) Enqueuer() run.Enqueuer { return Enqueuer{Client: q.Client} }

// ExportEnqueuer is what the audit export service uses to insert build jobs.
func (q *Queue) ExportEnqueuer() ExportEnqueuer { return ExportEnqueuer{Client: q.Client} }

// NotifyEnqueuer is what the notification service uses to insert its jobs.
func (q *Queue) NotifyEnqueuer() NotifyEnqueuer { return NotifyEnqueuer{Client: q.Client} }

// BindNotify gives the notification workers the service they drive.
func (q *Queue) BindNotify(n Notifications) {
	q.fanout.Notify, q.deliver.Notify, q.mail.Notify = n, n, n
}

// BindAudit gives the audit workers the export service and the log they drive.
func (q *Queue) BindAudit(exports AuditWork, chain AuditChain) {
	q.export.Exports, q.chain.Chain = exports, chain
}

// Bind gives the workers the run roles they drive.
func (q *Queue) Bind(runs *run.Runs) {
	q.plan.Jobs, q.apply.Jobs, q.verify.Jobs = runs.Jobs, runs.Jobs, runs.Jobs
	q.plan.Plans, q.apply.Applies, q.verify.Verifies = runs.Plans, runs.Applies, runs.Verifies
	q.expire.Runs, q.escalate.Runs = runs.Decisions, runs.Decisions
	q.dispatch.Drift, q.drift.Drift = runs.DriftChecks, runs.DriftChecks
	q.sweep.Runs = runs.Jobs
}

// BindWindows gives the window deadline worker the break-glass service it drives.
func (q *Queue) BindWindows(w Windows) { q.windows.Windows = w }

// Start starts working jobs until ctx ends or Stop is called.
func (q *Queue) Start(ctx context.Context) error {
	if q.plan.Plans == nil || q.export.Exports == nil || q.fanout.Notify == nil || q.windows.Windows == nil {
		return fmt.Errorf("job queue started before Bind, BindAudit, BindNotify and BindWindows")
	}
	if err := q.Client.Start(ctx); err != nil {
		return err
	}
	sweepCtx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	done := make(chan struct{})
	go func() {
		defer close(done)
		q.sweep.Run(sweepCtx)
	}()
	stopped := ctx.Done()
	go func() {
		select {
		case <-stopped:
			cancel()
		case <-done:
		}
	}()
	q.stopSweep = func() { cancel(); <-done }
	return nil
}

// Stop waits for running jobs to finish, up to ctx's deadline, then cancels them.
func (q *Queue) Stop(ctx context.Context) error {
	if q.stopSweep != nil {
		q.stopSweep()
		q.stopSweep = nil
	}
	if err := q.Client.Stop(ctx); err != nil {
		return q.Client.StopAndCancel(context.Background())
	}
	return nil
}

// phase is what the phase workers share, with timeout as the phase's own (the run
// lifecycle is bound later, Bind).
func (cfg QueueConfig) phase(timeout time.Duration) phase {
	return phase{Runners: cfg.Runners, Creds: cfg.Credentials, Logger: cfg.Logger, PhaseTimeout: timeout, Leases: cfg.Leases}
}
