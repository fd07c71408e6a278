// Package statetest builds the fixtures the state backend's tests share: a migrated
// database with two organizations, workspaces and runs, and the backend over it. The
// calling test binary's TestMain must run dbtest.Main.
package statetest

import (
	"sync"

	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"gorm.io/gorm"

	"gantry/models/artifact"
	"gantry/models/audit"
	"gantry/models/db"
	"gantry/models/db/dbtest"
	"gantry/models/keyring"
	"gantry/models/runport"
	"gantry/models/state"
)

// Fixture is a database seeded for state tests.
type Fixture struct {
	DB        *gorm.DB
	KeySpec   string // the keyring specification (one key, "k1")
	Keys      *keyring.Keyring
	Artifacts *artifact.Store
	Audit     *audit.Log
	Service   *state.Service
	// Written records what the backend told the run lifecycle, write by write (the
	// run lifecycle itself is tested with it in web/).
	Written *Watcher

	OrgID       string // the organization the tests act in
	WorkspaceID string // its workspace under test, with run RunID
	RunID       string
	SiblingID   string // another workspace of OrgID, with run SiblingRunID
	SiblingRun  string
	ForeignOrg  string // another organization, with workspace ForeignID
	ForeignID   string
}

// New seeds a fresh database.
func New(t testing.TB) *Fixture {
	t.Helper()
	gdb := dbtest.New(t)
	spec := keyring.NewKeySpec("k1")
	keys, err := keyring.Parse(spec)
	require.NoError(t, err)
	log := audit.New(gdb)
	arts := artifact.NewStore(gdb, keys)
	f := &Fixture{DB: gdb, KeySpec: spec, Keys: keys, Artifacts: arts, Audit: log, Written: &Watcher{}}
	f.Service = state.NewService(state.NewStore(gdb, arts, log), f.Written)
	f.OrgID = f.org(t, "acme")
	env := f.env(t, f.OrgID)
	f.WorkspaceID = f.Workspace(t, f.OrgID, env, "network")
	f.SiblingID = f.Workspace(t, f.OrgID, env, "database")
	f.RunID = f.Run(t, f.OrgID, f.WorkspaceID)
	f.SiblingRun = f.Run(t, f.OrgID, f.SiblingID)
	f.ForeignOrg = f.org(t, "globex")
	f.ForeignID = f.Workspace(t, f.ForeignOrg, f.env(t, f.ForeignOrg), "network")
	return f
}

func (f *Fixture) org(t testing.TB, slug string) string {
	id := db.NewID("org")
	require.NoError(t, f.DB.Exec("INSERT INTO organizations (id, slug, name) VALUES (?, ?, ?)", id, slug, slug).Error)
	return id
}

func (f *Fixture) env(t testing.TB, orgID string) string {
	id := db.NewID("env")
	require.NoError(t, f.DB.Exec(`INSERT INTO environments (id, organization_id, name, tier, requires_approval)
		VALUES (?, ?, 'production', 'production', true)`, id, orgID).Error)
	return id
}

// Workspace adds a workspace named name to environment envID of orgID.
func (f *Fixture) Workspace(t testing.TB, orgID, envID, name string) string {
	t.Helper()
	id := db.NewID("ws")
	require.NoError(t, f.DB.Exec(`INSERT INTO workspaces (id, organization_id, environment_id, name, template_name)
		VALUES (?, ?, ?, ?, 'network')`, id, orgID, envID, name).Error)
	return id
}

// Run adds a queued run to workspace wsID (with a config bundle artifact, as every run has).
func (f *Fixture) Run(t testing.TB, orgID, wsID string) string {
	t.Helper()
	ctx := context.Background()
	cfg, err := f.Artifacts.Put(ctx, orgID, wsID, artifact.ConfigBundle, []byte("config of "+wsID))
	require.NoError(t, err)
	var envID string
	require.NoError(t, f.DB.Raw("SELECT environment_id FROM workspaces WHERE id = ?", wsID).Scan(&envID).Error)
	var number int
	require.NoError(t, f.DB.Raw("SELECT COALESCE(max(number), 0) + 1 FROM runs WHERE workspace_id = ?", wsID).Scan(&number).Error)
	id := db.NewID("run")
	require.NoError(t, f.DB.Exec(`INSERT INTO runs (id, organization_id, workspace_id, environment_id, number, kind, state,
		template_name, template_version, module_digest, requested_by, requested_by_name, runner, simulated,
		config_artifact_id, config_digest)
		VALUES (?, ?, ?, ?, ?, 'apply', 'QUEUED', 'network', '1.0.0', 'sha256:00', 'usr-test', 'Test', 'process', false, ?, ?)`,
		id, orgID, wsID, envID, number, cfg.ID, cfg.SHA256).Error)
	return id
}

// Issue mints a credential of phase for run runID of workspace wsID, valid an hour.
func (f *Fixture) Issue(t testing.TB, wsID, runID string, phase state.Phase) (username, password string) {
	t.Helper()
	var orgID string
	require.NoError(t, f.DB.Raw("SELECT organization_id FROM workspaces WHERE id = ?", wsID).Scan(&orgID).Error)
	username, password, err := f.Service.IssueCredentials(context.Background(), orgID, wsID, runID, phase, time.Hour)
	require.NoError(t, err)
	return username, password
}

// StateJSON is a state document as tofu writes it, carrying extra as an output value.
func StateJSON(serial int, lineage, extra string) []byte {
	return fmt.Appendf(nil, `{
  "version": 4,
  "terraform_version": "1.10.10",
  "serial": %d,
  "lineage": %q,
  "outputs": {
    "note": {
      "value": %q,
      "type": "string"
    }
  },
  "resources": [],
  "check_results": null
}
`, serial, lineage, extra)
}

// Watcher records the writes the backend reports (runport.StateWatcher), with whether the
// report came inside a transaction (it must: the stale marking commits with the write).
type Watcher struct {
	mu     sync.Mutex
	Writes []Write
}

// Write is one report.
type Write struct {
	WorkspaceID string
	Written     runport.Predecessor
	ByRunID     string
	InTx        bool
}

// LockWaiting is a no-op here: these tests have no waiting runs to lock.
func (w *Watcher) LockWaiting(context.Context, string, string) error { return nil }

// StateWritten records the report.
func (w *Watcher) StateWritten(ctx context.Context, orgID, workspaceID string, written runport.Predecessor, byRunID string) error {
	_, inTx := db.SQLTx(ctx)
	w.mu.Lock()
	defer w.mu.Unlock()
	w.Writes = append(w.Writes, Write{WorkspaceID: workspaceID, Written: written, ByRunID: byRunID, InTx: inTx})
	return nil
}

// All returns the reports so far.
func (w *Watcher) All() []Write {
	w.mu.Lock()
	defer w.mu.Unlock()
	return append([]Write(nil), w.Writes...)
}
