package main

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"net"
	"os"
	"time"

	"golang.org/x/sync/errgroup"
	"gorm.io/gorm"

	"gantry/catalog"
	"gantry/models/keyring"
	"gantry/runner"
	"gantry/runner/mock"
	"gantry/web"
)

// systemFlags configure the run machinery, shared by serve and dev.
type systemFlags struct {
	keys        string
	catalogDir  string
	runnerName  string
	rescueAfter time.Duration
	runnerDelay time.Duration
	timeouts    runner.Timeouts
}

func (s *systemFlags) register(f flags) {
	f.str(&s.keys, "keys", "GANTRY_KEYS", "", "key-encryption keys for artifacts and state, id:base64(32 bytes)[,older...]; the first seals (keep it in the environment)")
	f.str(&s.catalogDir, "catalog-dir", "GANTRY_CATALOG_DIR", "", "template catalog directory with templates/<name>/ (default: the catalog built into the binary)")
	f.str(&s.runnerName, "runner", "GANTRY_RUNNER", "mock", "executor for runs: mock (SIMULATED, no infrastructure)")
	f.dur(&s.timeouts.Plan, "plan-timeout", "GANTRY_PLAN_TIMEOUT", runner.PlanTimeout, "a plan running longer is cancelled; a plan whose process died is redone after this long")
	f.dur(&s.timeouts.Apply, "apply-timeout", "GANTRY_APPLY_TIMEOUT", runner.ApplyTimeout, "an apply running longer is cancelled")
	f.dur(&s.timeouts.Verify, "verify-timeout", "GANTRY_VERIFY_TIMEOUT", runner.VerifyTimeout, "a verification running longer is cancelled")
	f.dur(&s.rescueAfter, "job-rescue-after", "GANTRY_JOB_RESCUE_AFTER", runner.ApplyTimeout+15*time.Minute, "a job whose process died is handed to another worker after this long (and after its phase timeout)")
	f.dur(&s.runnerDelay, "runner-delay", "GANTRY_RUNNER_DELAY", 0, "demos and tests: wait this long before each plan, apply and verify, to watch runs move")
}

func (s systemFlags) catalogFS() (fs.FS, error) {
	if s.catalogDir == "" {
		return catalog.FS, nil
	}
	if _, err := os.Stat(s.catalogDir); err != nil {
		return nil, fmt.Errorf("catalog directory: %w", err)
	}
	return os.DirFS(s.catalogDir), nil
}

func (s systemFlags) runner() (runner.Runner, error) {
	var r runner.Runner
	switch s.runnerName {
	case "mock":
		r = mock.New()
	default:
		return nil, fmt.Errorf("unknown runner %q (available: mock)", s.runnerName)
	}
	if s.runnerDelay > 0 {
		r = runner.Delayed(r, s.runnerDelay)
	}
	return r, nil
}

// buildSystem assembles the run machinery on gdb.
func buildSystem(ctx context.Context, gdb *gorm.DB, dsn, baseURL string, sf systemFlags, logger *slog.Logger) (*runner.System, error) {
	if sf.keys == "" {
		return nil, errors.New("--keys (or $GANTRY_KEYS) is required: artifacts and state are encrypted at rest")
	}
	keys, err := keyring.Parse(sf.keys)
	if err != nil {
		return nil, fmt.Errorf("--keys: %w", err)
	}
	cfs, err := sf.catalogFS()
	if err != nil {
		return nil, err
	}
	r, err := sf.runner()
	if err != nil {
		return nil, err
	}
	return runner.NewSystem(ctx, runner.SystemConfig{DB: gdb, DSN: dsn, Keys: keys, CatalogFS: cfs, Runner: r,
		BaseURL: baseURL, Logger: logger, RescueStuckJobsAfter: sf.rescueAfter, Timeouts: sf.timeouts})
}

// servePortal runs the job queue, the live-change listener and the HTTP server until
// ctx ends, then stops them: HTTP first, then the queue, letting running jobs finish
// for a while before cancelling them.
func servePortal(ctx context.Context, ln net.Listener, srv *web.Server, sys *runner.System) error {
	if err := sys.Queue.Start(ctx); err != nil {
		return fmt.Errorf("starting job queue: %w", err)
	}
	g, gctx := errgroup.WithContext(ctx)
	g.Go(func() error { srv.Changes.Run(gctx); return nil })
	g.Go(func() error { return serveUntilDone(gctx, ln, srv.Echo) })
	err := g.Wait()
	stopCtx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if qerr := sys.Queue.Stop(stopCtx); qerr != nil && err == nil {
		err = qerr
	}
	sys.Close()
	return err
}
