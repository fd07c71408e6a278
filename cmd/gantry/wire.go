package main

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strings"
	"time"

	"golang.org/x/sync/errgroup"
	"gorm.io/gorm"

	"gantry/catalog"
	"gantry/models/keyring"
	"gantry/runner"
	"gantry/runner/mock"
	"gantry/runner/tofu"
	"gantry/runner/tofurun"
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
	// The live runners' toolchain and the cloud their jobs reach.
	tofuPath      string
	providerPath  string
	workDir       string
	cloudEndpoint string
}

func (s *systemFlags) register(f flags) {
	f.str(&s.keys, "keys", "GANTRY_KEYS", "", "key-encryption keys for artifacts and state, id:base64(32 bytes)[,older...]; the first seals (keep it in the environment)")
	f.str(&s.catalogDir, "catalog-dir", "GANTRY_CATALOG_DIR", "", "template catalog directory with templates/<name>/ (default: the catalog built into the binary)")
	f.str(&s.runnerName, "runner", "GANTRY_RUNNER", "", "default executor: mock (SIMULATED), tofu/process (OpenTofu as a plain process: not isolated) or tofu/oci (runc); environments may choose another (default: serve mock; dev tofu/process)")
	f.str(&s.tofuPath, "tofu", "GANTRY_TOFU", "", "the pinned OpenTofu binary (default: built from the source tree into bin/tofu)")
	f.str(&s.providerPath, "sandbox-provider", "GANTRY_SANDBOX_PROVIDER", "", "the terraform-provider-sandbox binary (default: built from the source tree)")
	f.str(&s.workDir, "work-dir", "GANTRY_WORK_DIR", "", "directory for the provider mirror and job working directories (default: a directory under the system temp dir; dev: .data/work)")
	f.str(&s.cloudEndpoint, "cloud-endpoint", "GANTRY_CLOUD_ENDPOINT", "", "the sandbox cloud's API URL as jobs reach it (SANDBOX_ENDPOINT)")
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

// runners builds the default runner and every other one this process can offer: the
// mock always; the live OpenTofu runner when the toolchain is at hand.
func (s systemFlags) runners(ctx context.Context, logger *slog.Logger) (runner.Runner, []runner.Runner, error) {
	offered := map[string]runner.Runner{"mock": mock.New()}
	live, liveErr := s.liveRunner(ctx, logger)
	if liveErr == nil {
		offered[live.Name()] = live
	}
	if s.runnerName == "" {
		s.runnerName = "mock"
	}
	def, ok := offered[s.runnerName]
	if !ok {
		if liveErr != nil && s.runnerName != "mock" {
			return nil, nil, fmt.Errorf("runner %s: %w", s.runnerName, liveErr)
		}
		return nil, nil, fmt.Errorf("unknown runner %q (available: mock, tofu/process)", s.runnerName)
	}
	if liveErr != nil {
		logger.Warn("live OpenTofu runner not available; environments can only use the mock", "error", liveErr)
	}
	wrap := func(r runner.Runner) runner.Runner {
		if s.runnerDelay > 0 {
			return runner.Delayed(r, s.runnerDelay)
		}
		return r
	}
	var extra []runner.Runner
	for name, r := range offered {
		if name != def.Name() {
			extra = append(extra, wrap(r))
		}
	}
	return wrap(def), extra, nil
}

// liveRunner prepares the OpenTofu toolchain (building it from the source tree when no
// binaries are given; the first build of OpenTofu takes minutes) and the process
// executor.
func (s systemFlags) liveRunner(ctx context.Context, logger *slog.Logger) (runner.Runner, error) {
	if s.cloudEndpoint == "" {
		return nil, errors.New("no --cloud-endpoint: jobs would have no cloud to reach")
	}
	workDir := s.workDir
	if workDir == "" {
		workDir = filepath.Join(os.TempDir(), "gantry-work")
	}
	toolDir := filepath.Join(workDir, "toolchain")
	if err := os.MkdirAll(toolDir, 0o755); err != nil {
		return nil, err
	}
	var tc tofu.Toolchain
	var err error
	if s.tofuPath != "" && s.providerPath != "" {
		tc, err = tofu.ToolchainFrom(s.tofuPath, s.providerPath, toolDir)
	} else {
		root, rerr := tofu.RepoRoot(".")
		if rerr != nil {
			return nil, fmt.Errorf("set --tofu and --sandbox-provider, or run from the source tree: %w", rerr)
		}
		tc, err = tofu.PrepareToolchain(ctx, root, toolDir, logWriter{logger})
	}
	if err != nil {
		return nil, err
	}
	exec := &tofurun.Process{Tofu: tc.Tofu, CLIConfig: tc.CLIConfig, CloudEndpoint: s.cloudEndpoint}
	return tofurun.New(exec, filepath.Join(workDir, "jobs")), nil
}

// logWriter turns build progress lines into log records.
type logWriter struct{ logger *slog.Logger }

func (w logWriter) Write(p []byte) (int, error) {
	w.logger.Info(strings.TrimRight(string(p), "\n"))
	return len(p), nil
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
	def, extra, err := sf.runners(ctx, logger)
	if err != nil {
		return nil, err
	}
	return runner.NewSystem(ctx, runner.SystemConfig{DB: gdb, DSN: dsn, Keys: keys, CatalogFS: cfs, Runner: def, Extra: extra,
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
