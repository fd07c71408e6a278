package runner

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"gantry/models/db"
	"gantry/models/run"
)

// Leases (run/lease.go): each phase worker renews its run's lease every heartbeat while
// the phase runs, and stops the phase the moment a renewal says the lease is gone (the
// sweeper took it over, or the run was cancelled). The sweeper (LeaseSweeper) runs
// beside the queue, outside it, so busy run workers never delay it.

// LeaseConfig is how this portal holds leases: the flags --heartbeat and --lease, and
// the replica id its leases (and its containers) are tagged with; the sweeper passes
// every heartbeat.
type LeaseConfig struct {
	Holder    string
	Heartbeat time.Duration
	TTL       time.Duration
}

func (c LeaseConfig) withDefaults() LeaseConfig {
	if c.Heartbeat <= 0 {
		c.Heartbeat = run.DefaultHeartbeat
	}
	if c.TTL <= 0 {
		c.TTL = run.DefaultLeaseTTL
	}
	if c.Holder == "" {
		c.Holder = "gantry"
	}
	return c
}

// claim is the lease request of job jobID.
func (c LeaseConfig) claim(jobID int64) run.Claim {
	return run.Claim{JobID: jobID, Holder: c.Holder, TTL: c.TTL}
}

// Renewer is what holding a lease needs of the run lifecycle (run.Jobs).
type Renewer interface {
	RenewLease(ctx context.Context, l run.Lease, ttl time.Duration) error
	ReleaseLease(ctx context.Context, l run.Lease) error
}

// errLeaseLost is the cause of a phase context ended because its lease is gone.
var errLeaseLost = run.ErrLeaseLost

// hold renews lease l every heartbeat until stop is called, and cancels the returned
// context (cause run.ErrLeaseLost) when a renewal finds the lease gone, or (cause
// run.ErrStopRequested, renewing on) when the run was cancelled while it applied. A renewal that
// fails for another reason (the database restarting) is retried at the next beat: if
// the lease expires meanwhile, the sweeper takes it and the next renewal says so.
// stop releases the lease (a finished phase already ended it): a worker returning
// without finishing leaves the run to the job's next attempt or the sweeper at once,
// and a live lease always means a live worker (run.Jobs.leaseFor).
func hold(ctx context.Context, runs Renewer, l run.Lease, cfg LeaseConfig, logger *slog.Logger) (context.Context, func()) {
	phaseCtx, cancel := context.WithCancelCause(ctx)
	quit, done := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(done)
		tick := time.NewTicker(cfg.Heartbeat)
		defer tick.Stop()
		stopping := false
		for {
			select {
			case <-quit:
				return
			case <-ctx.Done():
				return
			case <-tick.C:
			}
			err := runs.RenewLease(context.WithoutCancel(phaseCtx), l, cfg.TTL)
			switch {
			case errors.Is(err, run.ErrLeaseLost):
				logger.WarnContext(ctx, "lease lost: stopping the phase", "run", l.RunID, "phase", string(l.Phase), "token", l.Token)
				cancel(errLeaseLost)
				return
			case errors.Is(err, run.ErrStopRequested):
				// The run was cancelled mid-apply: the phase stops, and the lease, still
				// this worker's, is renewed until the stop is recorded.
				if !stopping {
					logger.WarnContext(ctx, "the run was cancelled while it applied: stopping the apply", "run", l.RunID, "token", l.Token)
					stopping = true
				}
				cancel(errStopRequested)
			case err != nil:
				logger.WarnContext(ctx, "renewing the lease failed; trying again at the next heartbeat", "run", l.RunID, "error", err)
			}
		}
	}()
	return phaseCtx, func() {
		close(quit)
		cancel(context.Canceled)
		<-done
		rctx, stop := context.WithTimeout(context.WithoutCancel(ctx), releaseTimeout)
		defer stop()
		if err := runs.ReleaseLease(rctx, l); err != nil {
			logger.WarnContext(ctx, "releasing the lease failed; it expires by itself", "run", l.RunID, "error", err)
		}
	}
}

// releaseTimeout bounds releasing a lease as a worker returns; not the heartbeat, which a
// test may set to 100 ms and a busy database outlast (the lease then stays live until it
// expires, and the job's next attempt skips).
const releaseTimeout = 10 * time.Second

// errStopRequested is the cause of an apply's context ended because its run was
// cancelled while it applied.
var errStopRequested = run.ErrStopRequested

// lost reports whether phase context ctx ended because its lease is gone.
func lost(ctx context.Context) bool { return errors.Is(context.Cause(ctx), errLeaseLost) }

// stopRequested reports whether phase context ctx ended because its run was cancelled
// while it applied.
func stopRequested(ctx context.Context) bool { return errors.Is(context.Cause(ctx), errStopRequested) }

// Sweeper is what the sweep needs of the run lifecycle (run.Jobs).
type Sweeper interface {
	SweepLeases(ctx context.Context, replica string) ([]run.Takeover, error)
}

// SweepLockKey is the advisory lock a replica holds while it sweeps ("gantry-lease-sweep").
// Any session holding it makes every replica skip its passes: a test pauses the sweeper
// with it, so that only the interleaving it forces can happen.
const SweepLockKey = 0x67616e7472795357

// LeaseSweeper sweeps expired leases every heartbeat on whichever replica holds the
// sweeper's advisory lock at that moment: the leader of that pass. A replica that dies
// holding it releases it with its connection, so nobody waits for an election (River's
// leader is re-elected only after its term runs out, up to 20 s) before the next pass.
// Each pass also hands back to the queue the jobs a dead portal had fetched but not
// yet begun (rescueUnleased).
type LeaseSweeper struct {
	Runs   Sweeper
	DB     *sql.DB
	Leases LeaseConfig
	Logger *slog.Logger
	// OnTakeover, if set, hears of each takeover.
	OnTakeover func(run.Takeover)
}

// Run makes a pass every heartbeat until ctx ends.
func (w *LeaseSweeper) Run(ctx context.Context) {
	cfg := w.Leases.withDefaults()
	tick := time.NewTicker(cfg.Heartbeat)
	defer tick.Stop()
	for {
		if err := w.Pass(ctx); err != nil && ctx.Err() == nil {
			w.Logger.WarnContext(ctx, "lease sweep failed; trying again at the next heartbeat", "error", err)
		}
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
	}
}

// Pass makes one sweep if this replica gets the sweeper's lock (another replica
// sweeping right now makes this one skip).
func (w *LeaseSweeper) Pass(ctx context.Context) error {
	cfg := w.Leases.withDefaults()
	conn, err := w.DB.Conn(ctx)
	if err != nil {
		return err
	}
	defer conn.Close()
	var mine bool
	if err := conn.QueryRowContext(ctx, "SELECT pg_try_advisory_lock($1)", int64(SweepLockKey)).Scan(&mine); err != nil {
		return fmt.Errorf("taking the sweeper's lock: %w", err)
	}
	if !mine {
		return nil
	}
	defer conn.ExecContext(context.WithoutCancel(ctx), "SELECT pg_advisory_unlock($1)", int64(SweepLockKey))
	taken, err := w.Runs.SweepLeases(ctx, cfg.Holder)
	if n, rerr := rescueUnleased(ctx, w.DB, cfg.TTL); rerr != nil {
		err = errors.Join(err, rerr)
	} else if n > 0 {
		w.Logger.WarnContext(ctx, "handed back to the queue jobs a dead portal had fetched before they began", "jobs", n)
	}
	if n, ferr := finishMovedOn(ctx, w.DB, cfg.TTL); ferr != nil {
		err = errors.Join(err, ferr)
	} else if n > 0 {
		w.Logger.InfoContext(ctx, "closed phase jobs whose runs had moved on without their completion recorded (a portal died before River recorded it)", "jobs", n)
	}
	for _, t := range taken {
		w.Logger.WarnContext(ctx, "took over an expired lease", "run", t.RunID, "phase", string(t.Phase), "holder", t.Holder,
			"renewed_at", t.RenewedAt, "expired_at", t.ExpiresAt, "detected_after", t.DetectedAt.Sub(t.ExpiresAt).Round(time.Millisecond).String(),
			"pass", t.Pass, "outcome", t.Outcome)
		if w.OnTakeover != nil {
			w.OnTakeover(t)
		}
	}
	return err
}

// Abandon closes the running job jobID of a worker whose lease was taken over, inside
// the transaction in ctx (run.Enqueuer): cancelled, with the reason as its error, so
// River neither rescues nor retries it. A job no longer running is left as it is.
func (e Enqueuer) Abandon(ctx context.Context, jobID int64, reason string) error {
	tx, ok := db.SQLTx(ctx)
	if !ok {
		return errors.New("abandoning a job outside a transaction")
	}
	_, err := tx.ExecContext(ctx, `UPDATE river_job SET state = 'cancelled', finalized_at = now(),
		errors = array_append(errors, jsonb_build_object('at', now(), 'attempt', attempt, 'error', $2::text, 'trace', ''))
		WHERE id = $1 AND state = 'running'`, jobID, "lease taken over: "+reason)
	if err != nil {
		return fmt.Errorf("closing job %d: %w", jobID, err)
	}
	return nil
}

// Jobs a portal fetched (River marks them running) and died with before their phase
// took a lease have no lease to expire: without this, they would wait for River's
// rescue window (hours) while their run sits QUEUED or APPROVED. A phase job running
// for longer than a lease without one, and a short job (expiry, escalation, a window's
// deadline, a drift check or the leader's dispatch of them, a notice's fan-out or mail:
// River ends them at one minute)
// running for more than 75 s, is handed
// back to the queue. Running one twice is harmless: each begins in a locked
// transaction that skips a run already past its phase or leased by a live worker (a
// notice may go out twice: notifications are at-least-once). Webhook deliveries (their
// timeout is configurable) and the audit jobs (minutes long) are left to River's rescue.
//
// A phase job is handed back only while its run is still in a state that job begins
// from: River records a finished job's completion asynchronously, and under load it
// lags behind the run, which has moved on (a plan job of a PLANNED run is done, not
// stuck).
const (
	rescuePhaseKinds  = "'run.plan', 'run.apply', 'run.verify'"
	rescueBeginStates = "('run.plan', 'QUEUED'), ('run.plan', 'PLANNING'), ('run.apply', 'APPROVED'), ('run.apply', 'RUNNING'), ('run.verify', 'VERIFYING')"
	rescueShortKinds  = "'run.expire', 'run.escalate', 'breakglass.due', 'drift.check', 'drift.dispatch', 'notify.fanout', 'notify.mail'"
	shortJobRescue    = 75 * time.Second
)

func rescueUnleased(ctx context.Context, sqlDB *sql.DB, ttl time.Duration) (int64, error) {
	if sqlDB == nil {
		return 0, nil
	}
	res, err := sqlDB.ExecContext(ctx, `UPDATE river_job j SET state = 'available', scheduled_at = now(),
		errors = array_append(errors, jsonb_build_object('at', now(), 'attempt', attempt, 'error', 'its portal stopped before the job began', 'trace', ''))
		WHERE state = 'running' AND (
			(kind IN (`+rescuePhaseKinds+`) AND attempted_at < now() - make_interval(secs => $1)
				AND NOT EXISTS (SELECT 1 FROM run_leases l WHERE l.job_id = j.id)
				AND EXISTS (SELECT 1 FROM runs r WHERE r.id = j.args->>'run_id' AND (j.kind, r.state) IN (`+rescueBeginStates+`)))
			OR (kind IN (`+rescueShortKinds+`) AND attempted_at < now() - make_interval(secs => $2)))`,
		ttl.Seconds(), shortJobRescue.Seconds())
	if err != nil {
		return 0, fmt.Errorf("handing back unbegun jobs: %w", err)
	}
	return res.RowsAffected()
}

// finishMovedOn closes, as completed, the phase jobs still marked running that have nothing
// left to do: no lease, begun longer than a lease ago, and their run past the state the job
// begins from. River records a completion asynchronously after the worker returns, so a
// portal that dies between its worker's last commit and River's record leaves such a job
// running until River's rescue window (hours): a phantom in the queue's counts, never a
// phase to redo. A live portal's late record of the same completion finds the job already
// final and leaves it (River changes only jobs still running).
func finishMovedOn(ctx context.Context, sqlDB *sql.DB, ttl time.Duration) (int64, error) {
	if sqlDB == nil {
		return 0, nil
	}
	res, err := sqlDB.ExecContext(ctx, `UPDATE river_job j SET state = 'completed', finalized_at = now()
		WHERE state = 'running' AND kind IN (`+rescuePhaseKinds+`) AND attempted_at < now() - make_interval(secs => $1)
			AND NOT EXISTS (SELECT 1 FROM run_leases l WHERE l.job_id = j.id)
			AND EXISTS (SELECT 1 FROM runs r WHERE r.id = j.args->>'run_id' AND (j.kind, r.state) NOT IN (`+rescueBeginStates+`))`,
		ttl.Seconds())
	if err != nil {
		return 0, fmt.Errorf("closing phase jobs whose runs moved on: %w", err)
	}
	return res.RowsAffected()
}
