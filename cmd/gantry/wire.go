package main

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"maps"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"golang.org/x/sync/errgroup"
	"gorm.io/gorm"

	"gantry/catalog"
	"gantry/cmd/gantry/assemble"
	"gantry/models/breakglass"
	"gantry/models/keyring"
	"gantry/models/notify"
	runs "gantry/models/run"
	"gantry/runner"
	"gantry/runner/kube"
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
	defaultLive bool // dev: prefer a live runner as the default
	// dev: build the toolchain from the source tree, in the background, into binDir
	// (default <source tree>/bin); serve never builds.
	build  bool
	binDir string
	// The live runners' toolchain and the cloud their jobs reach.
	tofuPath     string
	providerPath string
	// s3ProviderPath is Gantry's S3 provider for serve ("": templates using it are refused at init).
	s3ProviderPath string
	providerMirror string
	workDir        string
	cloudEndpoint  string
	// Isolated (runc) jobs reach the state backend and the cloud through unix sockets.
	fwdPath            string
	stateSocket        string
	cloudSocket        string
	containerStatePort int
	// Notifications: the mail server and the webhook client.
	smtp  notify.SMTPConfig
	hooks notify.HookOptions
	// driftDispatch is how often the leader looks for workspaces due a drift check.
	driftDispatch time.Duration
	// leases: the replica id, the heartbeat and the lease duration (DESIGN §6).
	leases runner.LeaseConfig
	// mockLedger: the file the mock executor records its applies in ("" none).
	mockLedger string
	// tokenLifetime is how long a workload token lives (zero: the issuer's default).
	tokenLifetime time.Duration
	// breakglassDecision is how long a break-glass request waits for a decision.
	breakglassDecision time.Duration
	// kube configures the tofu/kubernetes executor (wire_kube.go).
	kube kubeFlags
	// issuer says where targets find the workload issuer (wire_issuer.go).
	issuer *issuerFlags
}

func (s *systemFlags) register(f flags) {
	f.str(&s.keys, "keys", "GANTRY_KEYS", "", "key-encryption keys for artifacts and state, id:base64(32 bytes)[,older...]; the first seals (keep it in the environment)")
	f.str(&s.catalogDir, "catalog-dir", "GANTRY_CATALOG_DIR", "", "template catalog directory with templates/<name>/ (default: the catalog built into the binary)")
	f.str(&s.runnerName, "runner", "GANTRY_RUNNER", "", "default executor: mock (SIMULATED), tofu/process (OpenTofu as a plain process: not isolated), tofu/oci (runc) or tofu/kubernetes (a Job per phase, see --kube-image); environments may choose another (default: serve mock; dev tofu/process)")
	f.str(&s.tofuPath, "tofu", "GANTRY_TOFU", "", "the pinned OpenTofu binary (serve: required for live runners, never built; dev: built from the source tree into bin/tofu in the background)")
	f.str(&s.providerPath, "sandbox-provider", "GANTRY_SANDBOX_PROVIDER", "", "the terraform-provider-sandbox binary (serve: required for live runners; dev: built from the source tree)")
	f.str(&s.s3ProviderPath, "s3-provider", "GANTRY_S3_PROVIDER", "", "serve: Gantry's terraform-provider-s3 binary, published in the built-in mirror for templates on S3 targets (portal.local/gantry/s3; dev: built from the source tree)")
	f.str(&s.providerMirror, "provider-mirror", "GANTRY_PROVIDER_MIRROR", "", providerMirrorHelp)
	f.str(&s.workDir, "work-dir", "GANTRY_WORK_DIR", "", "directory for the provider mirror and job working directories (default: a directory under the system temp dir; dev: .data/work)")
	f.str(&s.cloudEndpoint, "cloud-endpoint", "GANTRY_CLOUD_ENDPOINT", "", "the cloud's API URL as jobs reach it (SANDBOX_ENDPOINT); drift checks read who changed a resource there (docs/change-history.md)")
	f.str(&s.fwdPath, "fwd", "GANTRY_FWD", "", "static gantry-fwd binary for runc jobs (serve: required for tofu/oci; dev: built from the source tree)")
	f.str(&s.stateSocket, "state-socket", "GANTRY_STATE_SOCKET", "", "unix socket the portal serves the state backend on, for runc jobs (tofu/oci needs it)")
	f.str(&s.cloudSocket, "cloud-socket", "GANTRY_CLOUD_SOCKET", "", "unix socket of the sandbox cloud, for runc jobs (tofu/oci needs it)")
	f.IntVar(&s.containerStatePort, "container-state-port", 8765, "loopback port runc jobs reach the state backend at (forwarded to --state-socket)")
	f.dur(&s.timeouts.Plan, "plan-timeout", "GANTRY_PLAN_TIMEOUT", runner.PlanTimeout, "a plan running longer is cancelled; a plan whose process died is redone after this long")
	f.dur(&s.timeouts.Apply, "apply-timeout", "GANTRY_APPLY_TIMEOUT", runner.ApplyTimeout, "an apply running longer is cancelled")
	f.dur(&s.timeouts.Verify, "verify-timeout", "GANTRY_VERIFY_TIMEOUT", runner.VerifyTimeout, "a verification running longer is cancelled")
	f.dur(&s.rescueAfter, "job-rescue-after", "GANTRY_JOB_RESCUE_AFTER", runner.ApplyTimeout+15*time.Minute, "a job whose process died is handed to another worker after this long (and after its phase timeout)")
	f.str(&s.leases.Holder, "replica-id", "GANTRY_REPLICA_ID", defaultReplicaID(), "this portal's name among the replicas sharing the database: its run leases and its runc containers and scratch directories carry it, and a restarted portal removes the orphans that carry it (give each replica on one host its own; default: the host name)")
	f.dur(&s.leases.Heartbeat, "heartbeat", "GANTRY_HEARTBEAT", runs.DefaultHeartbeat, "how often a worker renews the lease on the run whose phase it runs (and how often the leader sweeps expired leases)")
	f.dur(&s.leases.TTL, "lease", "GANTRY_LEASE", runs.DefaultLeaseTTL, "a run whose worker has not renewed its lease for this long is taken over: a plan or verification runs again, an apply becomes APPLY_INTERRUPTED")
	f.dur(&s.tokenLifetime, "workload-token-lifetime", "GANTRY_WORKLOAD_TOKEN_LIFETIME", 0, "how long a job's workload identity token lives (default 15m, the most allowed); a phase running longer gets a fresh one, written to the token file its provider reads, before the current one runs out")
	f.dur(&s.breakglassDecision, "breakglass-decision-window", "GANTRY_BREAKGLASS_DECISION_WINDOW", breakglass.DefaultDecisionWindow,
		fmt.Sprintf("how long a break-glass request (an emergency) waits for an admin's decision before it expires: whole minutes from %s to %s",
			breakglass.MinDecisionWindow, breakglass.MaxDecisionWindow))
	f.str(&s.mockLedger, "mock-ledger", "GANTRY_MOCK_LEDGER", "", "tests and chaos runs: the file the mock executor appends each simulated apply to (plan digest and run), so applies per plan digest can be counted")
	f.dur(&s.runnerDelay, "runner-delay", "GANTRY_RUNNER_DELAY", 0, "demos and tests: wait this long before each plan, apply and verify, to watch runs move")
	f.dur(&s.driftDispatch, "drift-dispatch-every", "GANTRY_DRIFT_DISPATCH_EVERY", runner.DriftDispatchEvery, "how often one replica (the leader) looks for workspaces due a scheduled drift check (each environment sets its interval)")
	f.str(&s.smtp.Addr, "smtp-addr", "GANTRY_SMTP_ADDR", "", "host:port of the SMTP server notification mail goes through (default: none, no mail is sent; dev: its local catcher)")
	f.str(&s.smtp.From, "smtp-from", "GANTRY_SMTP_FROM", "", "sender address of notification mail, e.g. \"Gantry <gantry@example.com>\"")
	f.str(&s.smtp.Username, "smtp-username", "GANTRY_SMTP_USERNAME", "", "SMTP user name (PLAIN authentication)")
	// The password only from the environment: a flag would show in the process list.
	s.smtp.Password = os.Getenv("GANTRY_SMTP_PASSWORD")
	f.str(&s.smtp.TLS, "smtp-tls", "GANTRY_SMTP_TLS", "starttls", "starttls (required), opportunistic, tls (implicit) or none (a local catcher only); the password comes from $GANTRY_SMTP_PASSWORD")
	f.BoolVar(&s.hooks.AllowPrivateTargets, "webhook-allow-private", envOr("GANTRY_WEBHOOK_ALLOW_PRIVATE", "false") == "true",
		"let webhooks call loopback, private and link-local addresses (development and tests only: it opens the portal's network to anyone who adds a hook) ($GANTRY_WEBHOOK_ALLOW_PRIVATE)")
	f.dur(&s.hooks.Timeout, "webhook-timeout", "GANTRY_WEBHOOK_TIMEOUT", 10*time.Second, "a webhook attempt taking longer fails")
	f.dur(&s.hooks.RetryBase, "webhook-retry-base", "GANTRY_WEBHOOK_RETRY_BASE", 30*time.Second, "wait before a failed webhook delivery is tried again; it doubles after each failure (at most 6h)")
	f.IntVar(&s.hooks.MaxAttempts, "webhook-max-attempts", 8, "attempts at one webhook delivery before it is given up")
	f.IntVar(&s.hooks.DisableAfter, "webhook-disable-after", 20, "failed attempts in a row after which Gantry turns a webhook off")
	s.kube.register(f)
	s.issuer = &issuerFlags{}
	s.issuer.register(f)
}

// check refuses, before anything starts, settings out of their bounds.
func (s systemFlags) check() error {
	if err := breakglass.CheckDecisionWindow(s.breakglassDecision); err != nil {
		return fmt.Errorf("--breakglass-decision-window: %w", err)
	}
	if _, err := s.operatorMirror(); err != nil {
		return err
	}
	return s.issuer.check()
}

// mailer is the notification mailer the flags ask for (nil: no mail).
func (s systemFlags) mailer() (notify.Mailer, error) {
	if s.smtp.Addr == "" {
		return nil, nil
	}
	return notify.NewSMTPMailer(s.smtp)
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
// mock always; the live OpenTofu runners when their toolchain is at hand (serve: the
// binaries given) or can be built (dev: from the source tree, in the background: then
// prepare, when not nil, builds it and makes the deferred runners ready).
func (s systemFlags) runners(ctx context.Context, logger *slog.Logger) (def runner.Runner, extra []runner.Runner, prepare func(context.Context), err error) {
	sim := mock.New()
	if s.mockLedger != "" {
		sim = mock.NewRecording(mock.NewLedger(s.mockLedger))
	}
	offered := map[string]runner.Runner{"mock": sim}
	wrap := func(r runner.Runner) runner.Runner {
		if s.runnerDelay > 0 {
			return runner.Delayed(r, s.runnerDelay)
		}
		return r
	}
	var live []runner.Runner
	var liveErr error
	if s.build {
		live, prepare, liveErr = s.deferredRunners(logger, wrap)
	} else {
		live, liveErr = s.readyRunners(ctx, logger, wrap)
	}
	for _, r := range live {
		offered[r.Name()] = r
	}
	if s.kube.enabled() {
		kr, err := s.kubeRunner(ctx, logger)
		if err != nil {
			return nil, nil, nil, err
		}
		offered[kr.Name()] = wrap(kr)
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
	d, ok := offered[s.runnerName]
	if !ok {
		if liveErr != nil && s.runnerName != "mock" {
			return nil, nil, nil, fmt.Errorf("runner %s: %w", s.runnerName, liveErr)
		}
		return nil, nil, nil, fmt.Errorf("runner %q is not available (offered: %s)", s.runnerName, strings.Join(slices.Sorted(maps.Keys(offered)), ", "))
	}
	if liveErr != nil {
		logger.Warn("live OpenTofu runner not available; environments can only use the mock", "error", liveErr)
	}
	for name, r := range offered {
		if name != d.Name() {
			extra = append(extra, r)
		}
	}
	if d.Name() == "mock" {
		d = wrap(d)
	}
	for i, r := range extra {
		if r.Name() == "mock" {
			extra[i] = wrap(r)
		}
	}
	return d, extra, prepare, nil
}

// liveDirs are the live runners' working directories under the work dir.
func (s systemFlags) liveDirs() (workDir, toolDir string, err error) {
	workDir = s.workDir
	if workDir == "" {
		workDir = filepath.Join(os.TempDir(), "gantry-work")
	}
	if workDir, err = filepath.Abs(workDir); err != nil {
		return "", "", err
	}
	toolDir = filepath.Join(workDir, "toolchain")
	if err := os.MkdirAll(toolDir, 0o755); err != nil {
		return "", "", err
	}
	return workDir, toolDir, nil
}

// logWriter turns build progress lines into log records.
type logWriter struct{ logger *slog.Logger }

func (w logWriter) Write(p []byte) (int, error) {
	w.logger.Info(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}

// buildSystem assembles the portal on gdb (cmd/gantry/assemble is the composition root).
// prepare, when not nil, prepares the deferred live runners (dev): run it in the
// background once the portal serves.
func buildSystem(ctx context.Context, gdb *gorm.DB, dsn, baseURL string, sf systemFlags, logger *slog.Logger) (sys *assemble.Portal, prepare func(context.Context), err error) {
	if sf.keys == "" {
		return nil, nil, errors.New("--keys (or $GANTRY_KEYS) is required: artifacts and state are encrypted at rest")
	}
	keys, err := keyring.Parse(sf.keys)
	if err != nil {
		return nil, nil, fmt.Errorf("--keys: %w", err)
	}
	cfs, err := sf.catalogFS()
	if err != nil {
		return nil, nil, err
	}
	mailer, err := sf.mailer()
	if err != nil {
		return nil, nil, err
	}
	def, extra, prepare, err := sf.runners(ctx, logger)
	if err != nil {
		return nil, nil, err
	}
	if err := sf.issuer.open(logger); err != nil {
		return nil, nil, err
	}
	sys, err = assemble.Build(ctx, assemble.Config{DB: gdb, DSN: dsn, Keys: keys, CatalogFS: cfs, Runner: def, Extra: extra,
		BaseURL: baseURL, WorkloadIssuerURL: sf.issuer.issuerURL(), Logger: logger, RescueStuckJobsAfter: sf.rescueAfter, Timeouts: sf.timeouts, Leases: sf.leases, WorkloadTokenLifetime: sf.tokenLifetime, BreakglassDecisionWindow: sf.breakglassDecision,
		ContainerStatePort: sf.containerStatePort, RunnerStateURLs: sf.runnerStateURLs(), Mailer: mailer, Hooks: sf.hooks, CloudEndpoint: sf.cloudEndpoint, DriftDispatchEvery: sf.driftDispatch})
	return sys, prepare, err
}

// servePortal runs the job queue, the live-change listener and the HTTP server until
// ctx ends, then stops them: HTTP first, then the queue, letting running jobs finish
// for a while before cancelling them.
func servePortal(ctx context.Context, ln, metricsLn net.Listener, srv *web.Server, sys *assemble.Portal, sf systemFlags) error {
	if err := sys.Queue.Start(ctx); err != nil {
		return fmt.Errorf("starting job queue: %w", err)
	}
	g, gctx := errgroup.WithContext(ctx)
	if stateSocket := sf.stateSocket; stateSocket != "" {
		sock, err := listenSocket(stateSocket)
		if err != nil {
			return err
		}
		// Jobs in containers reach the state backend here, and nothing else of Gantry.
		g.Go(func() error { return serveUntilDone(gctx, sock, web.StateOnly(srv.Echo)) })
	}
	if sf.kube.enabled() {
		kln, err := net.Listen("tcp", sf.kube.listen)
		if err != nil {
			return fmt.Errorf("listening for runner pods on %s (--kube-listen): %w", sf.kube.listen, err)
		}
		// Pods reach the phase endpoint and the state backend here, and nothing else.
		g.Go(func() error { return serveUntilDone(gctx, kln, sf.kube.runnerHandler(srv)) })
	}
	g.Go(func() error { srv.Changes.Run(gctx); return nil })
	g.Go(func() error { sys.SweepRateLimits(gctx); return nil })
	g.Go(func() error { return serveUntilDone(gctx, ln, srv.Echo) })
	g.Go(func() error { return sf.issuer.serve(gctx, srv) })
	if metricsLn != nil {
		// Metrics are for the operators' scraper, on an address of their own: nothing of
		// the portal is served there, and the portal does not serve them.
		mux := http.NewServeMux()
		mux.Handle("GET /metrics", sys.Metrics.Handler())
		g.Go(func() error { return serveUntilDone(gctx, metricsLn, mux) })
	}
	err := g.Wait()
	stopCtx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if qerr := sys.Queue.Stop(stopCtx); qerr != nil && err == nil {
		err = qerr
	}
	sys.Close()
	return err
}

// listenMetrics listens on the metrics address ("": none, a nil listener).
func listenMetrics(addr string) (net.Listener, error) {
	if addr == "" {
		return nil, nil
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("listening for metrics on %s (--metrics-addr, \"\" for none): %w", addr, err)
	}
	return ln, nil
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

// runnerStateURLs are where runners other than the portal's own reach the state backend:
// the Kubernetes executor's pods.
func (s systemFlags) runnerStateURLs() map[string]string {
	if !s.kube.enabled() {
		return nil
	}
	return map[string]string{kube.Name: s.kube.stateBase()}
}

// defaultReplicaID is the host name ("gantry" when it cannot be read).
func defaultReplicaID() string {
	if h, err := os.Hostname(); err == nil && h != "" {
		return h
	}
	return "gantry"
}
