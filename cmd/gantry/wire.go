package main

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"golang.org/x/sync/errgroup"
	"gorm.io/gorm"

	"gantry/catalog"
	"gantry/cmd/gantry/assemble"
	"gantry/models/keyring"
	"gantry/runner"
	"gantry/runner/mock"
	"gantry/runner/oci"
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
	defaultLive bool // dev: prefer a live runner as the default
	// The live runners' toolchain and the cloud their jobs reach.
	tofuPath      string
	providerPath  string
	workDir       string
	cloudEndpoint string
	// Isolated (runc) jobs reach the state backend and the cloud through unix sockets.
	fwdPath            string
	stateSocket        string
	cloudSocket        string
	containerStatePort int
}

func (s *systemFlags) register(f flags) {
	f.str(&s.keys, "keys", "GANTRY_KEYS", "", "key-encryption keys for artifacts and state, id:base64(32 bytes)[,older...]; the first seals (keep it in the environment)")
	f.str(&s.catalogDir, "catalog-dir", "GANTRY_CATALOG_DIR", "", "template catalog directory with templates/<name>/ (default: the catalog built into the binary)")
	f.str(&s.runnerName, "runner", "GANTRY_RUNNER", "", "default executor: mock (SIMULATED), tofu/process (OpenTofu as a plain process: not isolated) or tofu/oci (runc); environments may choose another (default: serve mock; dev tofu/process)")
	f.str(&s.tofuPath, "tofu", "GANTRY_TOFU", "", "the pinned OpenTofu binary (default: built from the source tree into bin/tofu)")
	f.str(&s.providerPath, "sandbox-provider", "GANTRY_SANDBOX_PROVIDER", "", "the terraform-provider-sandbox binary (default: built from the source tree)")
	f.str(&s.workDir, "work-dir", "GANTRY_WORK_DIR", "", "directory for the provider mirror and job working directories (default: a directory under the system temp dir; dev: .data/work)")
	f.str(&s.cloudEndpoint, "cloud-endpoint", "GANTRY_CLOUD_ENDPOINT", "", "the sandbox cloud's API URL as jobs reach it (SANDBOX_ENDPOINT)")
	f.str(&s.fwdPath, "fwd", "GANTRY_FWD", "", "static gantry-fwd binary for runc jobs (default: built from the source tree)")
	f.str(&s.stateSocket, "state-socket", "GANTRY_STATE_SOCKET", "", "unix socket the portal serves the state backend on, for runc jobs (tofu/oci needs it)")
	f.str(&s.cloudSocket, "cloud-socket", "GANTRY_CLOUD_SOCKET", "", "unix socket of the sandbox cloud, for runc jobs (tofu/oci needs it)")
	f.IntVar(&s.containerStatePort, "container-state-port", 8765, "loopback port runc jobs reach the state backend at (forwarded to --state-socket)")
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
	live, liveErr := s.liveRunners(ctx, logger)
	for _, r := range live {
		offered[r.Name()] = r
	}
	if s.runnerName == "" || s.runnerName == "auto" {
		// dev: isolated when it can be, else a plain process; serve: the mock.
		s.runnerName = "mock"
		if s.defaultLive {
			s.runnerName = "tofu/process"
			if _, ok := offered["tofu/oci"]; ok {
				s.runnerName = "tofu/oci"
			}
		}
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

// liveRunners prepares the OpenTofu toolchain (building it from the source tree when no
// binaries are given; the first build of OpenTofu takes minutes) and returns the
// process executor's runner and, when runc works here and the sockets are configured,
// the runc executor's.
func (s systemFlags) liveRunners(ctx context.Context, logger *slog.Logger) ([]runner.Runner, error) {
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
	root, rootErr := tofu.RepoRoot(".")
	if s.tofuPath != "" && s.providerPath != "" {
		tc, err = tofu.ToolchainFrom(s.tofuPath, s.providerPath, toolDir)
	} else if rootErr != nil {
		return nil, fmt.Errorf("set --tofu and --sandbox-provider, or run from the source tree: %w", rootErr)
	} else {
		tc, err = tofu.PrepareToolchain(ctx, root, toolDir, logWriter{logger})
	}
	if err != nil {
		return nil, err
	}
	process := &tofurun.Process{Tofu: tc.Tofu, CLIConfig: tc.CLIConfig, CloudEndpoint: s.cloudEndpoint}
	plugins := &tofu.PluginCache{Mirror: tc.Mirror, Root: filepath.Join(workDir, "plugins")}
	runners := []runner.Runner{tofurun.New(process, filepath.Join(workDir, "jobs"), plugins)}
	if isolated, err := s.ociRunner(ctx, tc, plugins, root, workDir); err != nil {
		logger.Warn("isolated (runc) jobs are not available", "error", err)
	} else {
		runners = append(runners, isolated)
	}
	return runners, nil
}

// ociRunner builds the runc executor: a read-only rootfs with tofu, fwd and the mirror,
// and the state and cloud sockets bind-mounted into every job.
func (s systemFlags) ociRunner(ctx context.Context, tc tofu.Toolchain, plugins *tofu.PluginCache, root, workDir string) (runner.Runner, error) {
	if s.stateSocket == "" || s.cloudSocket == "" {
		return nil, errors.New("--state-socket and --cloud-socket are not set")
	}
	workDir, err := filepath.Abs(workDir)
	if err != nil {
		return nil, err
	}
	if os.Geteuid() != 0 {
		return nil, errors.New("runc jobs need Gantry to run as root")
	}
	if _, err := exec.LookPath("runc"); err != nil {
		return nil, errors.New("runc is not installed (Debian package runc)")
	}
	fwd := s.fwdPath
	if fwd == "" {
		if root == "" {
			return nil, errors.New("set --fwd or run from the source tree")
		}
		if fwd, err = tofurun.BuildFwd(ctx, root, filepath.Join(workDir, "toolchain")); err != nil {
			return nil, err
		}
	}
	// Containers a crashed portal left behind are ended before new jobs start. The runc
	// roots and cgroup name belong to this work directory, so two portals (or a test
	// run next to `gantry dev`) never sweep each other's jobs.
	sum := sha256.Sum256([]byte(workDir))
	ex := &oci.Executor{StateRoot: filepath.Join(workDir, "runc"), BundleRoot: filepath.Join(workDir, "bundles"),
		CgroupRoot: "gantry-" + hex.EncodeToString(sum[:4])}
	if err := ex.Sweep(ctx); err != nil {
		return nil, fmt.Errorf("cleaning up after an earlier run: %w", err)
	}
	o, err := tofurun.NewOCI(ctx, tofurun.OCIConfig{Toolchain: tc, Fwd: fwd, RootfsDir: filepath.Join(workDir, "rootfs"),
		StateSocket: s.stateSocket, StatePort: s.containerStatePort, CloudSocket: s.cloudSocket,
		// Longer than the state lock timeout, so a command waiting for the lock is not
		// killed at the moment it would have got it.
		Timeout: 30 * time.Minute, Executor: ex})
	if err != nil {
		return nil, err
	}
	return tofurun.New(o, filepath.Join(workDir, "jobs"), plugins), nil
}

// logWriter turns build progress lines into log records.
type logWriter struct{ logger *slog.Logger }

func (w logWriter) Write(p []byte) (int, error) {
	w.logger.Info(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}

// buildSystem assembles the portal on gdb (cmd/gantry/assemble is the composition root).
func buildSystem(ctx context.Context, gdb *gorm.DB, dsn, baseURL string, sf systemFlags, logger *slog.Logger) (*assemble.Portal, error) {
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
	return assemble.Build(ctx, assemble.Config{DB: gdb, DSN: dsn, Keys: keys, CatalogFS: cfs, Runner: def, Extra: extra,
		BaseURL: baseURL, Logger: logger, RescueStuckJobsAfter: sf.rescueAfter, Timeouts: sf.timeouts,
		ContainerStatePort: sf.containerStatePort})
}

// servePortal runs the job queue, the live-change listener and the HTTP server until
// ctx ends, then stops them: HTTP first, then the queue, letting running jobs finish
// for a while before cancelling them.
func servePortal(ctx context.Context, ln net.Listener, srv *web.Server, sys *assemble.Portal, stateSocket string) error {
	if err := sys.Queue.Start(ctx); err != nil {
		return fmt.Errorf("starting job queue: %w", err)
	}
	g, gctx := errgroup.WithContext(ctx)
	if stateSocket != "" {
		sock, err := listenSocket(stateSocket)
		if err != nil {
			return err
		}
		// Jobs in containers reach the state backend here, and nothing else of Gantry.
		g.Go(func() error { return serveUntilDone(gctx, sock, web.StateOnly(srv.Echo)) })
	}
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

// listenSocket listens on a unix socket that a job's unused uid can connect to: a stale
// socket from an earlier start is removed, the socket is world-connectable and its
// directory traversable (the directory must hold nothing but sockets: it is mounted into
// every job).
func listenSocket(path string) (net.Listener, error) {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return nil, err
	}
	if err := os.Chmod(filepath.Dir(path), 0o755); err != nil {
		return nil, err
	}
	_ = os.Remove(path)
	ln, err := net.Listen("unix", path)
	if err != nil {
		return nil, fmt.Errorf("listening on %s: %w", path, err)
	}
	if err := os.Chmod(path, 0o666); err != nil {
		ln.Close()
		return nil, err
	}
	return ln, nil
}
