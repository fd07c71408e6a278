package runner

import (
	"context"
	"fmt"
	"io/fs"
	"log/slog"
	"strings"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"gorm.io/gorm"

	"gantry/models/artifact"
	"gantry/models/audit"
	"gantry/models/catalog"
	"gantry/models/environment"
	"gantry/models/identity"
	"gantry/models/keyring"
	"gantry/models/run"
	"gantry/models/state"
)

// SystemConfig is what the run machinery is built from.
type SystemConfig struct {
	DB        *gorm.DB
	DSN       string // for the LISTEN/NOTIFY pool
	Keys      *keyring.Keyring
	CatalogFS fs.FS
	// Runner is the deployment's default executor; Extra are the others environments
	// may choose. Names must differ.
	Runner Runner
	Extra  []Runner
	// BaseURL is where runners reach Gantry's state backend.
	BaseURL              string
	Logger               *slog.Logger
	RescueStuckJobsAfter time.Duration
	Timeouts             Timeouts
	// ContainerStatePort is the loopback port jobs in containers (tofu/oci) reach the
	// state backend at, forwarded to the portal's state socket; 0 means BaseURL.
	ContainerStatePort int
	MaxWorkers         int
	OnApplyStart       func(runID string)
}

// System is the run machinery of one portal process: the catalog, the run service,
// the River queue and its workers, and the pool that carries LISTEN/NOTIFY.
type System struct {
	// Runners are the executors on offer, by name; Default is the deployment's.
	Runners RunnerSet
	Default string
	Catalog *catalog.Catalog
	// Identity mints workload identity tokens per job phase (issuer BaseURL/workload).
	Identity   *identity.Issuer
	State      *state.Service
	Runs       *run.Service
	Artifacts  *artifact.Store
	Queue      *Queue
	ListenPool *pgxpool.Pool
	// Credentials holds environments' static cloud credentials (standing-credential findings).
	Credentials *environment.Credentials
}

// NewSystem loads the catalog (pinning template digests in the database) and wires
// the run service to the queue. Start the queue with System.Queue.Start.
func NewSystem(ctx context.Context, cfg SystemConfig) (*System, error) {
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	cat, err := catalog.Load(ctx, cfg.CatalogFS, catalog.DBPins{DB: cfg.DB})
	if err != nil {
		return nil, fmt.Errorf("loading catalog: %w", err)
	}
	for _, e := range cat.All() {
		if !e.Usable() {
			cfg.Logger.WarnContext(ctx, "template refused", "template", e.Template.Name, "version", e.Template.Version, "reason", e.Refused)
		}
	}
	poolCfg, err := pgxpool.ParseConfig(cfg.DSN)
	if err != nil {
		return nil, fmt.Errorf("parsing database URL: %w", err)
	}
	poolCfg.MaxConns = 4 // LISTEN connections only
	pool, err := pgxpool.NewWithConfig(ctx, poolCfg)
	if err != nil {
		return nil, fmt.Errorf("opening listen pool: %w", err)
	}
	sqlDB, err := cfg.DB.DB()
	if err != nil {
		pool.Close()
		return nil, err
	}
	base := strings.TrimRight(cfg.BaseURL, "/")
	arts := artifact.NewStore(cfg.DB, cfg.Keys)
	states := state.NewService(cfg.DB, arts, audit.New(cfg.DB))
	ident := identity.NewIssuer(cfg.DB, cfg.Keys, base+"/workload", identity.Options{})
	creds := environment.NewCredentials(cfg.DB, audit.New(cfg.DB), cfg.Keys)
	set := RunnerSet{}
	offered := run.Runners{Default: cfg.Runner.Name()}
	for _, r := range append([]Runner{cfg.Runner}, cfg.Extra...) {
		if _, dup := set[r.Name()]; dup {
			pool.Close()
			return nil, fmt.Errorf("two runners are named %s", r.Name())
		}
		set[r.Name()] = r
		offered.Available = append(offered.Available, run.RunnerInfo{Name: r.Name(), Simulated: r.Simulated()})
	}
	q, err := NewQueue(QueueConfig{SQLDB: sqlDB, ListenPool: pool, Runners: set, Logger: cfg.Logger,
		Credentials:          jobCredentials{state: states, identity: ident, static: creds},
		RescueStuckJobsAfter: cfg.RescueStuckJobsAfter, Timeouts: cfg.Timeouts, MaxWorkers: cfg.MaxWorkers, OnApplyStart: cfg.OnApplyStart})
	if err != nil {
		pool.Close()
		return nil, err
	}
	runs := run.NewService(run.Config{
		DB: cfg.DB, Audit: audit.New(cfg.DB), Artifacts: arts, Enqueuer: q.Enqueuer(), Catalog: catalog.ForRuns(cat),
		Runners: offered,
		StateAddress: func(runnerName, workspaceID string) string {
			address, _ := state.Addresses(stateBase(base, cfg.ContainerStatePort, runnerName), workspaceID)
			return address
		},
		Fencer: states,
	})
	q.Bind(runs)
	return &System{Runners: set, Default: cfg.Runner.Name(), Catalog: cat, Identity: ident, State: states, Runs: runs, Artifacts: arts, Queue: q, ListenPool: pool, Credentials: creds}, nil
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

// Close releases the listen pool (stop the queue first).
func (s *System) Close() { s.ListenPool.Close() }
