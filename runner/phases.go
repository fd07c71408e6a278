package runner

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"time"

	"github.com/riverqueue/river"

	"gantry/models/run"
)

// What every phase worker shares: the timeouts, the runners by name, waiting for an
// executor being prepared, the phase's credentials and live log, recording its outcome
// while the database is away, and (phase) the plan and verify workers' opening and
// ending.

// Default phase timeouts: a job running longer is cancelled. A job whose process
// died is handed to another worker once both its timeout and RescueStuckJobsAfter
// have passed (River never rescues a job that may still be within its timeout).
const (
	PlanTimeout   = 30 * time.Minute
	ApplyTimeout  = 2 * time.Hour
	VerifyTimeout = 30 * time.Minute
)

// Timeouts are the phase timeouts in force; zero fields take the defaults.
type Timeouts struct {
	Plan, Apply, Verify time.Duration
}

func (t Timeouts) withDefaults() Timeouts {
	if t.Plan <= 0 {
		t.Plan = PlanTimeout
	}
	if t.Apply <= 0 {
		t.Apply = ApplyTimeout
	}
	if t.Verify <= 0 {
		t.Verify = VerifyTimeout
	}
	return t
}

// RunnerSet holds the runners of this process by name; a run names the one it was
// planned with, and every phase of it uses that one.
type RunnerSet map[string]Runner

// For returns the runner named name.
func (rs RunnerSet) For(name string) (Runner, error) {
	if r, ok := rs[name]; ok {
		return r, nil
	}
	return nil, fmt.Errorf("the %s executor is not available in this Gantry", name)
}

// Waiting returns what a job on executor name waits for, and true while that executor
// is being prepared.
func (rs RunnerSet) Waiting(name string) (Preparation, bool) {
	if p, ok := rs[name].(Preparing); ok {
		return p.Preparing()
	}
	return Preparation{}, false
}

// preparing reports whether any runner is still being prepared (else no job waits and
// nothing needs to be read).
func (rs RunnerSet) preparing() bool {
	for name := range rs {
		if _, waiting := rs.Waiting(name); waiting {
			return true
		}
	}
	return false
}

// preparationRetry is how soon a job waiting for its executor's preparation looks again.
const preparationRetry = 2 * time.Second

// waitForExecutor snoozes (without counting an attempt) the job of a run whose executor
// is still being prepared: the run stays where it is, QUEUED or APPROVED, and its page
// shows the progress. nil means go ahead.
func waitForExecutor(ctx context.Context, runs Jobs, set RunnerSet, runID string) error {
	if !set.preparing() {
		return nil
	}
	name, err := runs.ExecutorOf(ctx, runID)
	if err != nil {
		return err
	}
	if _, waiting := set.Waiting(name); waiting {
		return river.JobSnooze(preparationRetry)
	}
	return nil
}

// credentialsFor mints the phase's credentials for a runner that touches real
// infrastructure, and returns the function that ends them when the phase is over. A
// simulated runner gets none.
func credentialsFor(ctx context.Context, src CredentialSource, r Runner, rn run.Run, l run.Lease, ttl time.Duration) (Credentials, func(), error) {
	if r.Simulated() || src == nil {
		return Credentials{}, func() {}, nil
	}
	creds, err := src.ForPhase(ctx, rn, l, ttl)
	if err != nil {
		return Credentials{}, nil, fmt.Errorf("minting %s credentials: %w", l.Phase, err)
	}
	return creds, func() { _ = src.Revoke(context.WithoutCancel(ctx), creds) }, nil
}

// liveLogFor is the live log of a phase of run r, stored through runs: it masks the run's
// sensitive input values (secrets) and the phase's credentials (the state backend
// password, the workload token).
func liveLogFor(ctx context.Context, runs Jobs, logger *slog.Logger, r run.Run, l run.Lease, secrets []string, creds Credentials) *LiveLog {
	if logger == nil {
		logger = slog.Default()
	}
	store := func(ctx context.Context, text []byte) error { return runs.AppendLog(ctx, r, l, text) }
	return NewLiveLog(ctx, store, logger.With("run", r.ID, "phase", string(l.Phase)),
		slices.Concat(secrets, []string{creds.StatePassword, creds.CloudToken})...)
}

// persistFor bounds how long a phase's outcome is offered to a database that is away.
const persistFor = 2 * time.Minute

// persist records a phase's outcome with record, trying again every half second while
// the database is away (a restart takes seconds, and until it is stored the outcome
// exists only in this process), for up to persistFor or until ctx ends. A lost lease or
// a run already past the phase ends it: someone else moved the run on.
func persist(ctx context.Context, logger *slog.Logger, l run.Lease, record func(context.Context) error) error {
	deadline := time.Now().Add(persistFor)
	for attempt := 1; ; attempt++ {
		err := record(ctx)
		if err == nil || skipped(err) {
			return nil
		}
		if ctx.Err() != nil || time.Now().After(deadline) {
			return err
		}
		if attempt == 1 {
			logger.WarnContext(ctx, "recording the phase's outcome failed; trying again", "run", l.RunID, "phase", string(l.Phase), "error", err)
		}
		select {
		case <-ctx.Done():
			return err
		case <-time.After(500 * time.Millisecond):
		}
	}
}

// phase is what every phase worker (plan, apply, verify) works with: the run's jobs,
// the executors, the job credentials, the log, how long a phase may take and its lease.
type phase struct {
	Jobs         Jobs
	Runners      RunnerSet
	Creds        CredentialSource
	Logger       *slog.Logger
	PhaseTimeout time.Duration
	Leases       LeaseConfig
}

// opened is a phase job past its opening: its lease held (and renewed) under ctx, the
// run's executor, the job's credentials and its live log. close revokes the credentials,
// then lets the lease go.
type opened struct {
	ctx   context.Context
	rn    Runner
	creds Credentials
	live  *LiveLog
	close func()
}

// open is the opening of a plan or a verification begun under work's lease: it holds
// the lease, finds the run's executor and issues the job's credentials. When it reports
// done, the job ends there with err: an executor that is no longer offered fails the run
// (nil once recorded), credentials that cannot be issued go back to River (err).
func (p *phase) open(ctx context.Context, r run.Run, l run.Lease, secrets []string) (o opened, done bool, err error) {
	ctx, release := hold(ctx, p.Jobs, l, p.Leases, p.Logger)
	rn, err := p.Runners.For(r.Runner)
	if err != nil {
		_, ferr := p.Jobs.FailPhase(ctx, l, nil, err.Error())
		release()
		return opened{}, true, ignoreSkip(ferr)
	}
	creds, revoke, err := credentialsFor(ctx, p.Creds, rn, r, l, p.PhaseTimeout)
	if err != nil {
		release()
		return opened{}, true, err
	}
	live := liveLogFor(ctx, p.Jobs, p.Logger, r, l, secrets, creds)
	return opened{ctx: ctx, rn: rn, creds: creds, live: live, close: func() { revoke(); release() }}, false, nil
}

// failed ends a plan or a verification whose executor returned err. A lost lease ends
// the job quietly (the sweeper took the run over and queued the phase again); a worker
// shutting down or timed out, or a process killed from outside, goes back to River,
// whose next attempt runs the phase again (safe: neither changes anything); otherwise
// the run fails saying what failed, with the executor's log.
func (p *phase) failed(ctx context.Context, l run.Lease, log []byte, what string, err error) error {
	if lost(ctx) {
		return nil
	}
	if ctx.Err() != nil {
		return ctx.Err()
	}
	if errors.Is(err, ErrInterrupted) {
		return err
	}
	_, ferr := p.Jobs.FailPhase(ctx, l, log, what+" failed: "+err.Error())
	return ignoreSkip(ferr)
}
