// Package assemble is Gantry's one composition root: it builds the stores, then the
// services on them, then the job queue, then the web server, each constructor given
// exactly what it needs. `gantry serve`, `gantry dev` and the whole-app test harness
// (web/webtest) all start Gantry through it, so what the tests run is what ships.
package assemble

import (
	"cmp"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"net/http"
	"strings"
	"time"

	"gantry/models/scim"

	"github.com/jackc/pgx/v5/pgxpool"
	"gorm.io/gorm"

	"gantry/models/apitoken"
	"gantry/models/artifact"
	"gantry/models/attest"
	"gantry/models/audit"
	"gantry/models/breakglass"
	"gantry/models/catalog"
	"gantry/models/environment"
	"gantry/models/evidence"
	"gantry/models/governance"
	"gantry/models/idempotency"
	"gantry/models/identity"
	"gantry/models/keyring"
	"gantry/models/modules"
	"gantry/models/notify"
	"gantry/models/org"
	"gantry/models/policy"
	"gantry/models/promotion"
	"gantry/models/ratelimit"
	"gantry/models/risk"
	"gantry/models/rollback"
	"gantry/models/run"
	"gantry/models/session"
	"gantry/models/state"
	"gantry/models/workspace"
	"gantry/runner"
	"gantry/runner/cloudhistory"
	"gantry/runner/mock"
	"gantry/telemetry"
	"gantry/views/paths"
	"gantry/web"
)

// Config is what the portal is built from.
type Config struct {
	DB        *gorm.DB
	DSN       string // for the LISTEN/NOTIFY pool
	Keys      *keyring.Keyring
	CatalogFS fs.FS
	// Runner is the deployment's default executor; Extra are the others environments
	// may choose. Names must differ.
	Runner runner.Runner
	Extra  []runner.Runner
	// BaseURL is where runners reach Gantry's state backend and clouds its workload issuer.
	BaseURL string
	// WorkloadIssuerURL is the workload issuer's URL as targets reach it, when it is not
	// BaseURL + /workload (the issuer served alone over TLS: web.IssuerTLS).
	WorkloadIssuerURL    string
	Logger               *slog.Logger
	RescueStuckJobsAfter time.Duration
	Timeouts             runner.Timeouts
	// Leases: the replica id, heartbeat and lease duration of the phase workers.
	Leases runner.LeaseConfig
	// ContainerStatePort is the loopback port jobs in containers (tofu/oci) reach the
	// state backend at, forwarded to the portal's state socket; 0 means BaseURL.
	ContainerStatePort int
	// RunnerStateURLs are, by runner name, where a runner's jobs reach the state backend
	// when it is neither BaseURL nor the containers' port (the Kubernetes executor's
	// pods: --kube-state-url).
	RunnerStateURLs map[string]string
	MaxWorkers      int
	OnApplyStart    func(runID string, pickedUp time.Time)
	ApplyHooks      runner.ApplyHooks // tests' hooks into each attempt of an apply job
	// Mailer sends notification mail (nil: none is sent); Hooks are the webhook
	// client's settings.
	Mailer notify.Mailer
	Hooks  notify.HookOptions
	// CloudEndpoint is the cloud's API as Gantry reaches it: drift checks read who
	// changed a resource there through the change history protocol
	// (docs/change-history.md), and break-glass credentials are shown with it ("":
	// none; drift is then reported without who made it).
	CloudEndpoint string
	// DriftDispatchEvery is how often the leader looks for due drift checks (zero:
	// runner.DriftDispatchEvery).
	DriftDispatchEvery time.Duration
	// BreakglassDecisionWindow is how long a break-glass request waits for a decision
	// (zero: breakglass.DefaultDecisionWindow).
	BreakglassDecisionWindow time.Duration
	// WorkloadTokenLifetime is how long a workload token lives (zero:
	// identity.MaxLifetime, which is also its most). Tests shorten it so that a phase
	// outlives its token and the runner must refresh it.
	WorkloadTokenLifetime time.Duration
	// ModuleClient fetches the allowlisted registry and https modules templates call
	// (nil: https with the system's roots; models/modules). Tests hand it a loopback
	// TLS server's client.
	ModuleClient *http.Client
}

// Portal is one portal process's parts, built in order: stores, services, queue.
type Portal struct {
	// Stores: data access with no rules of their own.
	Audit        *audit.Log
	AuditKeys    *audit.Keys
	Attestations *attest.Attestor
	Artifacts    *artifact.Store
	Keys         *idempotency.Store
	Catalog      *catalog.Catalog
	Matrix       *risk.Store
	Policies     *policy.Store
	StateStore   *state.Store
	Workspaces   *workspace.Store
	// RateLimits are the rate limits' buckets, shared by every replica (SweepRateLimits
	// forgets the idle ones).
	RateLimits *ratelimit.Store

	// Services: the rules, each authorizing its subject.
	Orgs           *org.Service
	Members        *org.Members
	Environments   *environment.Service
	Credentials    *environment.Credentials
	WorkspaceViews *workspace.Service
	// Archiver archives workspaces that hold nothing (destroyed, or never applied).
	Archiver   *workspace.Archiver
	Identity   *identity.Issuer
	Runs       *run.Runs
	Previews   *run.Previewer
	Promotions *promotion.Service
	Rollbacks  *rollback.Service
	Evidence   *evidence.Reports
	State      *state.Service
	Exports    *audit.Exports
	Governance governance.Service
	Notify     *notify.Service
	Windows    *breakglass.Store
	Breakglass *breakglass.Service
	Tokens     *apitoken.Service
	SCIM       *scim.Service
	GroupRules *org.GroupRules

	// Metrics are the Prometheus metrics (served on their own address: Portal.Metrics.Handler).
	Metrics *telemetry.Metrics

	// The queue and the runners it drives.
	Queue      *runner.Queue
	ListenPool *pgxpool.Pool
	Runners    runner.RunnerSet
	Default    string

	db     *gorm.DB         // the session store (its lifetimes come with the web config) and the queue depth metric
	keys   *keyring.Keyring // seal the web's sign-in cookie
	mail   bool             // an SMTP server is configured
	sqlDB  *sql.DB
	logger *slog.Logger
}

// Build loads the catalog (pinning template digests in the database) and builds the
// portal. Start its queue with Portal.Queue.Start; Close it after stopping the queue.
func Build(ctx context.Context, cfg Config) (*Portal, error) {
	if cfg.DB == nil || cfg.Keys == nil || cfg.CatalogFS == nil || cfg.Runner == nil {
		return nil, errors.New("assemble: DB, Keys, CatalogFS and Runner are required")
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	sqlDB, err := cfg.DB.DB()
	if err != nil {
		return nil, err
	}
	p := &Portal{db: cfg.DB, keys: cfg.Keys, sqlDB: sqlDB, logger: cfg.Logger, Default: cfg.Runner.Name(), Runners: runner.RunnerSet{}}

	// Stores.
	gdb := cfg.DB
	p.Audit = audit.New(gdb)
	p.AuditKeys = audit.NewKeys(gdb, cfg.Keys)
	p.Attestations = attest.New(gdb, p.AuditKeys)
	p.Artifacts = artifact.NewStore(gdb, cfg.Keys)
	p.Keys = idempotency.NewStore(gdb)
	p.RateLimits = ratelimit.NewStore(gdb)
	p.Matrix = risk.NewStore(gdb, p.Audit, run.Floors)
	p.StateStore = state.NewStore(gdb, p.Artifacts, p.Audit)
	p.Workspaces = workspace.NewStore(gdb, p.Audit)
	p.Windows = breakglass.NewStore(gdb, p.Audit)
	if p.Catalog, err = catalog.Load(ctx, cfg.CatalogFS, catalog.DBPins{DB: gdb}); err != nil {
		return nil, fmt.Errorf("loading catalog: %w", err)
	}
	for _, e := range p.Catalog.All() {
		if !e.Usable() {
			cfg.Logger.WarnContext(ctx, "template refused", "template", e.Template.Name, "version", e.Template.Version, "reason", e.Refused)
		}
	}

	// Services that need no run lifecycle. Environments' reads stand below runs; the
	// service that changes environments tells runs, so it comes after them.
	p.Orgs = org.NewService(gdb, p.Audit)
	envs := environment.NewDirectory(gdb)
	p.Policies = policy.NewStore(gdb, p.Audit, envs)
	p.Credentials = environment.NewCredentials(gdb, p.Audit, cfg.Keys)
	p.WorkspaceViews = workspace.NewService(gdb, envs)
	base := strings.TrimRight(cfg.BaseURL, "/")

	// The runners on offer.
	offered := run.Runners{Default: cfg.Runner.Name()}
	for _, r := range append([]runner.Runner{cfg.Runner}, cfg.Extra...) {
		if _, dup := p.Runners[r.Name()]; dup {
			return nil, fmt.Errorf("two runners are named %s", r.Name())
		}
		p.Runners[r.Name()] = r
		offered.Available = append(offered.Available, run.RunnerInfo{Name: r.Name(), Simulated: r.Simulated()})
	}
	// Every service puts its jobs on the queue through the inserter, in its own
	// transactions; the queue's workers, built last, are handed every service they drive.
	inserter, err := runner.NewInserter(sqlDB, cfg.Logger)
	if err != nil {
		return nil, err
	}
	p.Metrics = telemetry.New(telemetry.Gauges{Runs: p.runCounts, Queue: p.queueDepth}, cfg.Logger)

	// The run lifecycle: it sends its notices to the outbox (fanned out by p.Notify).
	stateAddress := func(runnerName, workspaceID string) string {
		at := stateBase(base, cfg.ContainerStatePort, runnerName)
		if u := cfg.RunnerStateURLs[runnerName]; u != "" {
			at = strings.TrimRight(u, "/")
		}
		address, _ := state.Addresses(at, workspaceID)
		return address
	}
	// Requests fetch the allowlisted modules a template calls (once, kept by sha256).
	runCatalog := catalog.ForRuns(p.Catalog).WithArchives(modules.New(gdb, cfg.ModuleClient))
	p.Runs, err = run.New(run.Config{
		DB: gdb, Audit: p.Audit, Artifacts: p.Artifacts, Enqueuer: runner.Enqueuer{Client: inserter}, Catalog: runCatalog,
		Runners: offered, StateAddress: stateAddress,
		Environments: envs, Members: p.Orgs, Workspaces: p.Workspaces, States: p.StateStore, Fencer: p.StateStore,
		Matrix: p.Matrix, Policies: p.Policies, Attestor: attestor{p.Attestations}, Notifier: notify.NewOutbox(runner.NotifyEnqueuer{Client: inserter}),
		Keys: cfg.Keys, Windows: p.Windows, Observer: p.Metrics,
	})
	if err != nil {
		return nil, err
	}

	// The workload issuer: a cloud asks it, at every call a token makes, whether the
	// token's grant still holds, and it asks the grant's owner (a window, a run's phase).
	issuerURL := cmp.Or(cfg.WorkloadIssuerURL, base+"/workload")
	p.Identity = identity.NewIssuer(gdb, cfg.Keys, issuerURL, identity.Options{Lifetime: cfg.WorkloadTokenLifetime,
		Windows: p.Windows, Phases: p.Runs.Jobs})

	// The services that call into runs, each handed the role it needs.
	// The request form's preview prices a simulated plan, whatever runs the real one.
	p.Previews = run.NewPreviewer(p.Runs.Requests, mock.New())
	if p.Promotions, err = promotion.New(promotion.Config{Runs: p.Runs.Reads, Requests: p.Runs.Requests, Environments: envs,
		Workspaces: p.Workspaces, Catalog: runCatalog, StateAddress: stateAddress}); err != nil {
		return nil, err
	}
	if p.Rollbacks, err = rollback.New(p.Runs.Reads, p.Runs.Requests, p.StateStore, runCatalog); err != nil {
		return nil, err
	}
	p.Evidence = evidence.New(p.Audit, p.Policies, p.Artifacts, attestor{p.Attestations})
	p.State = state.NewService(p.StateStore, p.Runs.Staleness)
	p.Archiver = workspace.NewArchiver(gdb, p.Audit, p.WorkspaceViews, p.StateStore, p.Runs.Reads)
	p.Members = org.NewMembers(gdb, p.Audit, p.Runs.Eligibility)
	p.GroupRules = org.NewGroupRules(gdb, p.Audit, p.Runs.Eligibility, scim.NewReader(gdb))
	p.Environments = environment.NewService(gdb, p.Audit, p.Runs.Eligibility)
	if p.Notify, err = notify.NewService(notify.Config{DB: gdb, Audit: p.Audit, Keys: cfg.Keys, Enqueuer: runner.NotifyEnqueuer{Client: inserter},
		People: p.Orgs, Runs: p.Runs.Reads, Link: func(runID string) string { return base + paths.RunReview(runID) },
		WindowLink:     func(id string) string { return base + paths.BreakglassWindow(id) },
		PreferencesURL: base + paths.NotificationSettings(), Mailer: cfg.Mailer, Hooks: cfg.Hooks, Logger: cfg.Logger}); err != nil {
		return nil, err
	}
	p.mail = cfg.Mailer != nil
	p.Exports = audit.NewExports(gdb, p.Audit, cfg.Keys, p.AuditKeys, runner.ExportEnqueuer{Client: inserter})
	if p.Breakglass, err = breakglass.NewService(breakglass.Config{Store: p.Windows, Audit: p.Audit, Runs: p.Runs.DriftChecks, Actors: p.Runs.Decisions,
		Environments: p.Environments, Workspaces: p.Workspaces, Minter: p.Identity, Enqueuer: runner.Enqueuer{Client: inserter},
		Notifier: notify.NewOutbox(runner.NotifyEnqueuer{Client: inserter}), Members: p.Orgs, DecisionWindow: cfg.BreakglassDecisionWindow,
		CloudEndpoint: cfg.CloudEndpoint}); err != nil {
		return nil, err
	}
	// Break-glass requests wait for a person's decision too: the inbox counts them.
	p.Runs.Inbox.CountEmergencies(p.Breakglass)
	p.Tokens = apitoken.NewService(gdb, p.Audit, p.Orgs)
	// A directory's deactivation ends sessions whatever their timeouts: the store's are unused.
	// The directory applies the group rules, and its groups feed them.
	p.SCIM = scim.NewService(gdb, p.Audit, p.Orgs, session.NewStore(gdb, 0, 0), p.Tokens, p.GroupRules)
	p.Governance = governance.Service{Environments: p.Environments, Policies: p.Policies, Matrix: p.Matrix, Rules: run.GovernanceRules{},
		Executors: governanceExecutors{runners: p.Runners, def: p.Default}, Catalog: catalogTemplates{p.Catalog}, Applies: p.Audit,
		Floors: run.Floors, IssuerURL: issuerURL, Windows: p.Windows, Drift: p.Runs.DriftChecks, ApprovalValidity: run.ApprovalValidity}

	// The queue and its workers, last: they drive the services above.
	poolCfg, err := pgxpool.ParseConfig(cfg.DSN)
	if err != nil {
		return nil, fmt.Errorf("parsing database URL: %w", err)
	}
	poolCfg.MaxConns = 4 // LISTEN connections only
	if p.ListenPool, err = pgxpool.NewWithConfig(ctx, poolCfg); err != nil {
		return nil, fmt.Errorf("opening listen pool: %w", err)
	}
	var changes runner.ChangeLog
	if cfg.CloudEndpoint != "" {
		changes = cloudhistory.Client{Endpoint: cfg.CloudEndpoint}
	}
	p.Queue, err = runner.NewQueue(runner.QueueConfig{Metrics: p.Metrics, SQLDB: sqlDB, ListenPool: p.ListenPool, Runners: p.Runners, Logger: cfg.Logger,
		Credentials: runner.NewJobCredentials(p.StateStore, p.Identity, p.Credentials, envs), StateLocks: p.StateStore, Changes: changes, DriftDispatchEvery: cfg.DriftDispatchEvery,
		RescueStuckJobsAfter: cfg.RescueStuckJobsAfter, Timeouts: cfg.Timeouts, Leases: cfg.Leases, MaxWorkers: cfg.MaxWorkers, OnApplyStart: cfg.OnApplyStart, ApplyHooks: cfg.ApplyHooks,
		Runs: p.Runs, Notify: p.Notify, Exports: p.Exports, Chain: p.Audit, Windows: p.Breakglass})
	if err != nil {
		p.ListenPool.Close()
		return nil, err
	}
	return p, nil
}

// stateBase is where a runner's jobs reach the state backend. The address is embedded
// in saved plans, so it must be the same wherever the plan is applied: containers
// always see http://127.0.0.1:<port>, forwarded to the portal's state socket.
func stateBase(base string, containerPort int, runnerName string) string {
	if runnerName == "tofu/oci" && containerPort > 0 {
		return fmt.Sprintf("http://127.0.0.1:%d", containerPort)
	}
	return base
}

// Web builds the HTTP server on the portal's services. It discovers the OpenID
// Provider, so the provider must answer.
func (p *Portal) Web(ctx context.Context, cfg web.Config) (*web.Server, error) {
	if cfg.Logger == nil {
		cfg.Logger = p.logger
	}
	cfg, err := cfg.WithDefaults()
	if err != nil {
		return nil, err
	}
	sessions := session.NewStore(p.db, cfg.SessionIdle, cfg.SessionLifetime)
	limiter := p.RateLimits
	if cfg.RateLimits.Now != nil {
		limiter = limiter.WithClock(cfg.RateLimits.Now) // a test's clock
	}
	return web.New(ctx, cfg, web.Services{
		Sessions: sessions, LoginKeys: p.keys, Orgs: p.Orgs, GroupRules: p.GroupRules, Members: p.Members, Audit: p.Audit, Exports: p.Exports, AuditKeys: p.AuditKeys, Governance: p.Governance, Environments: p.Environments,
		Credentials: p.Credentials, Matrix: p.Matrix, Policies: p.Policies, Workspaces: p.WorkspaceViews, Runs: p.Runs,
		Previews: p.Previews, Promotions: p.Promotions, Rollbacks: p.Rollbacks, Archiver: p.Archiver, Evidence: p.Evidence, Catalog: p.Catalog, Keys: p.Keys, State: p.State, Identity: p.Identity,
		Executors: runner.Executors{Runners: p.Runners, Default: p.Default}, ListenPool: p.ListenPool,
		Notifications: p.Notify, MailConfigured: p.mail, Breakglass: p.Breakglass, Tokens: p.Tokens, SCIM: p.SCIM, SCIMTokens: p.SCIM, Metrics: p.Metrics,
		Ready: func(ctx context.Context) error { return p.sqlDB.PingContext(ctx) }, Limiter: limiter,
	})
}

// SweepRateLimits deletes the rate limits' idle buckets every ratelimit.SweepEvery until
// ctx ends: every replica sweeps.
func (p *Portal) SweepRateLimits(ctx context.Context) {
	p.RateLimits.RunSweeper(ctx, ratelimit.SweepEvery, p.logger)
}

// Close releases the listen pool (stop the queue first).
func (p *Portal) Close() { p.ListenPool.Close() }
