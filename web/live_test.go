//go:build !fast

// Live: needs live OpenTofu (bin/tofu, built from tools/tofu).

package web_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"gantry/bench"
	"gantry/cmd/gantry/webtest"
	"gantry/models/authz"
	"gantry/models/run"
	"gantry/runner/tofu"
	"gantry/runner/tofurun"
	"gantry/sandbox/client"
	"gantry/sandbox/cloud"
)

// liveApp is Gantry with the live OpenTofu runner (process executor) against a sandbox
// cloud that trusts Gantry's workload identity issuer (webtest.StartLive).
type liveApp struct {
	*webtest.App
	cloudDir  string
	cloudURL  string
	exec      tofurun.Executor
	toolchain tofu.Toolchain
}

// liveOptions adjust startLive (webtest.LiveOptions).
type liveOptions = webtest.LiveOptions

func startLive(t *testing.T) liveApp { return startLiveWith(t, liveOptions{}) }

func startLiveWith(t testing.TB, opts liveOptions) liveApp {
	t.Helper()
	l := webtest.StartLive(t, opts)
	return liveApp{App: l.App, cloudDir: l.CloudDir, cloudURL: l.CloudURL, exec: l.Exec, toolchain: l.Toolchain}
}

// cloudObjects counts the live objects of a kind in the sandbox cloud's store (its
// objects directory; the change history keeps deleted ones).
func (l liveApp) cloudObjects(t *testing.T, kind string) int {
	t.Helper()
	n := 0
	require.NoError(t, filepath.WalkDir(filepath.Join(l.cloudDir, "objects"), func(path string, d os.DirEntry, err error) error {
		if err == nil && !d.IsDir() && strings.HasSuffix(path, ".json") && strings.Contains(path, string(filepath.Separator)+kind+string(filepath.Separator)) {
			n++
		}
		return err
	}))
	return n
}

// appliedOnce requires that the sandbox cloud's applies ledger saw exactly one attempt at
// each run's plan, by that run (its apply token names the plan digest and the attempt),
// and that nothing else was applied.
func (l liveApp) appliedOnce(t *testing.T, runs ...run.Run) {
	t.Helper()
	ledger, err := cloud.ReadApplies(l.cloudDir)
	require.NoError(t, err)
	require.Empty(t, ledger.Twice(), "a plan applied twice")
	require.Len(t, ledger.Plans, len(runs), "every apply, and only those, in the ledger")
	for _, r := range runs {
		var attempts []cloud.ApplyAttempt
		for _, p := range ledger.Plans {
			if p.PlanDigest == r.PlanDigest {
				attempts = p.Attempts
			}
		}
		require.Len(t, attempts, 1, "run %s's plan %s", r.ID, r.PlanDigest)
		require.Equal(t, r.ID, attempts[0].Run)
		require.Equal(t, r.WorkspaceID, attempts[0].Workspace)
	}
}

// TestLiveRunsWithOpenTofu: a database on a network is planned, approved, applied and
// verified with real OpenTofu and the sandbox provider; an engine version change plans a
// replace with its reason; a destroy run removes everything.
func TestLiveRunsWithOpenTofu(t *testing.T) {
	t.Parallel()
	app := startLive(t)
	operator := app.LoggedIn(t, "operator@acme.test")
	admin := app.LoggedIn(t, "admin@acme.test")
	staging := app.OrgEnvironmentID(t, "acme", "staging")
	inputs := func(version string, kind run.Kind) url.Values {
		return url.Values{"template": {"postgres"}, "environment": {staging}, "workspace": {"orders-db"}, "kind": {string(kind)},
			"inputs.name": {"orders"}, "inputs.engine_version": {version}, "inputs.size": {"small"}, "inputs.storage_gb": {"20"},
			"inputs.backup_retention_days": {"7"}, "inputs.network_cidr": {"10.30.0.0/16"}}
	}

	first := waitForState(t, app.App, app.App.RequestRun(t, operator, inputs("16", run.KindApply)), run.PendingApproval)
	require.False(t, first.Simulated)
	require.Equal(t, "tofu/process", first.Runner)
	require.Equal(t, 3, first.PlanSummary.Create, first.StateReason)
	approve(t, app.App, admin, first)
	first = waitForState(t, app.App, first.ID, run.Succeeded)
	require.Equal(t, 1, app.cloudObjects(t, "database"))
	require.Equal(t, 1, app.cloudObjects(t, "network"))
	require.Contains(t, string(first.Outputs), "orders.db.sandbox.internal:5432")

	// Engine version change: the database is replaced, with tofu's reason and path.
	second := waitForState(t, app.App, app.App.RequestRun(t, operator, inputs("17", run.KindApply)), run.PendingApproval)
	require.Equal(t, 1, second.PlanSummary.Replace)
	planJSON := webtest.ReadBody(t, app.Get(t, admin, "/runs/"+second.ID+"/plan.json"))
	var plan struct {
		ResourceChanges []struct {
			Address      string `json:"address"`
			ActionReason string `json:"action_reason"`
			Change       struct {
				Actions      []string `json:"actions"`
				ReplacePaths [][]any  `json:"replace_paths"`
			} `json:"change"`
		} `json:"resource_changes"`
	}
	require.NoError(t, json.Unmarshal([]byte(planJSON), &plan))
	var replaced bool
	for _, rc := range plan.ResourceChanges {
		if rc.Address == "module.postgres.sandbox_database.this" {
			replaced = true
			require.Equal(t, []string{"delete", "create"}, rc.Change.Actions)
			require.Equal(t, "replace_because_cannot_update", rc.ActionReason)
			require.Equal(t, [][]any{{"engine_version"}}, rc.Change.ReplacePaths)
		}
	}
	require.True(t, replaced, planJSON)
	// Replacing a database loses its data: risk 3, an owner decides (elevated).
	require.Equal(t, 3, *second.RiskClass)
	approve(t, app.App, app.LoggedIn(t, "owner@acme.test"), second)
	second = waitForState(t, app.App, second.ID, run.Succeeded)

	// Destroy removes everything.
	destroy := waitForState(t, app.App, app.App.RequestRun(t, operator, inputs("17", run.KindDestroy)), run.PendingApproval)
	require.Equal(t, 3, destroy.PlanSummary.Delete)
	// A destroy needs an owner; an admin is refused.
	resp := app.PostForm(t, admin, "/runs/"+destroy.ID+"/approve", decisionForm(t, app.App, admin, destroy))
	webtest.ReadBody(t, resp)
	require.Equal(t, http.StatusForbidden, resp.StatusCode)
	owner := app.LoggedIn(t, "owner@acme.test")
	approve(t, app.App, owner, destroy)
	destroy = waitForState(t, app.App, destroy.ID, run.Succeeded)
	for _, kind := range []string{"database", "subnet", "network"} {
		require.Zero(t, app.cloudObjects(t, kind), kind)
	}
	app.appliedOnce(t, first, second, destroy)
}

// TestLiveStalePlanNeverApplies: two runs planned from the same state; the first is
// approved and applied; the state it writes makes the second STALE in the same
// transaction, so approving it is refused (409 STALE_EVIDENCE) and it never applies.
func TestLiveStalePlanNeverApplies(t *testing.T) {
	t.Parallel()
	app := startLive(t)
	operator := app.LoggedIn(t, "operator@acme.test")
	admin := app.LoggedIn(t, "admin@acme.test")
	staging := app.OrgEnvironmentID(t, "acme", "staging")
	bucket := func(retention string) url.Values {
		return url.Values{"template": {"bucket"}, "environment": {staging}, "workspace": {"logs"}, "kind": {"apply"},
			"inputs.name": {"logs-archive"}, "inputs.retention_days": {retention}}
	}
	// Requesting on a live executor needs cloud.live (owners grant it per member).
	noLive := app.NewMember(t, "acme", "No Live", authz.RoleOperator, false)
	c := app.SessionFor(t, noLive.UserID, noLive.OrgID, time.Now())
	form := bucket("30")
	form.Set("_csrf", app.CSRF(t, c))
	resp := app.PostForm(t, c, "/requests", form)
	body := webtest.ReadBody(t, resp)
	require.Equal(t, http.StatusUnprocessableEntity, resp.StatusCode)
	require.Contains(t, body, "needs the live-cloud entitlement")
	require.Zero(t, countRows(t, app.App, "SELECT count(*) FROM runs WHERE requested_by = ?", noLive.UserID), "nothing was created")

	base := waitForState(t, app.App, app.App.RequestRun(t, operator, bucket("30")), run.PendingApproval)
	approve(t, app.App, admin, base)
	waitForState(t, app.App, base.ID, run.Succeeded)

	first := waitForState(t, app.App, app.App.RequestRun(t, operator, bucket("60")), run.PendingApproval)
	second := waitForState(t, app.App, app.App.RequestRun(t, operator, bucket("90")), run.PendingApproval)
	require.Equal(t, first.PriorSerial, second.PriorSerial, "both planned from the same state")
	approve(t, app.App, admin, first)
	waitForState(t, app.App, first.ID, run.Succeeded)
	second = waitForState(t, app.App, second.ID, run.Stale)
	require.Contains(t, second.StateReason, "the workspace state moved to serial")
	resp = app.PostForm(t, admin, "/runs/"+second.ID+"/approve", decisionForm(t, app.App, admin, second))
	body = webtest.ReadBody(t, resp)
	require.Equal(t, http.StatusConflict, resp.StatusCode, body)
	require.Contains(t, body, "This run is stale")
	var versions int64
	require.NoError(t, app.DB.Table("state_versions").Where("workspace_id = ? AND run_id = ?", second.WorkspaceID, second.ID).Count(&versions).Error)
	require.Zero(t, versions, "the stale run wrote no state")
}

// killingExecutor kills `tofu apply` once the cloud has its first write (writing is
// closed then), as an OOM kill or a crashed node would mid-apply, leaving tofu's state
// lock behind. Killing on a timer instead would, on a busy machine, kill some applies
// before they wrote anything.
type killingExecutor struct {
	tofurun.Executor
	writing <-chan struct{}
	killed  func()        // called once a killed apply's tofu has exited
	kills   *atomic.Int32 // how many applies are still to be killed
}

func (k killingExecutor) Run(ctx context.Context, dir string, c tofurun.Command) (int, string, error) {
	if len(c.Args) > 0 && c.Args[0] == "apply" && k.kills.Add(-1) >= 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithCancel(ctx)
		defer cancel()
		go func() {
			select {
			case <-k.writing:
				cancel()
			case <-ctx.Done():
			}
		}()
		defer k.killed()
	}
	return k.Executor.Run(ctx, dir, c)
}

// TestLiveApplyKilled: tofu killed mid-apply ends the run FAILED with the lock fenced;
// the next run of the workspace then locks, plans and applies normally.
func TestLiveApplyKilled(t *testing.T) {
	t.Parallel()
	// tofu is killed as soon as it sent a database's creation; the creation reaches the
	// cloud (which records the attempt in its applies ledger) only once tofu has exited,
	// so tofu never hears the answer. reached closes when the cloud has answered it.
	writing, exited, reached := make(chan struct{}), make(chan struct{}), make(chan struct{})
	var first atomic.Bool
	lateDatabases := func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.Method == http.MethodPost && strings.Contains(r.URL.Path, "/v1/database") && first.CompareAndSwap(false, true) {
				close(writing)
				select {
				case <-exited:
				case <-t.Context().Done(): // tofu was never killed: the test fails on the run's state
				}
				defer close(reached)
			}
			next.ServeHTTP(w, r)
		})
	}
	var kills atomic.Int32
	kills.Store(1)
	app := startLiveWith(t, liveOptions{Cloud: lateDatabases, Exec: func(e tofurun.Executor, _ string) tofurun.Executor {
		return killingExecutor{Executor: e, writing: writing, killed: sync.OnceFunc(func() { close(exited) }), kills: &kills}
	}})
	operator := app.LoggedIn(t, "operator@acme.test")
	admin := app.LoggedIn(t, "admin@acme.test")
	staging := app.OrgEnvironmentID(t, "acme", "staging")
	form := url.Values{"template": {"postgres"}, "environment": {staging}, "workspace": {"killed"}, "kind": {"apply"}, "inputs.name": {"killed-db"}}
	r := waitForState(t, app.App, app.App.RequestRun(t, operator, form), run.PendingApproval)
	approve(t, app.App, admin, r)
	r = waitForState(t, app.App, r.ID, run.Failed)
	require.Contains(t, r.StateReason, "apply failed")
	var lock struct {
		LockID *string
		Fence  int64
	}
	require.NoError(t, app.DB.Raw("SELECT lock_id, fence FROM state_locks WHERE workspace_id = ?", r.WorkspaceID).Scan(&lock).Error)
	require.Nil(t, lock.LockID, "the dead job's lock is released")
	require.Positive(t, lock.Fence)
	var fenced int64
	require.NoError(t, app.DB.Table("audit_events").Where("action = 'state.lock_fenced' AND target_id = ?", r.WorkspaceID).Count(&fenced).Error)
	require.EqualValues(t, 1, fenced)

	// The workspace is usable again: the next run locks the state, plans and applies.
	next := waitForState(t, app.App, app.App.RequestRun(t, operator, form), run.PendingApproval)
	approve(t, app.App, admin, next)
	next = waitForState(t, app.App, next.ID, run.Succeeded)
	// The killed apply tried once (its creation reached the cloud after tofu died) and
	// was never tried again.
	bench.Receive(t, "the killed apply's creation to reach the cloud", time.Minute, reached)
	app.appliedOnce(t, r, next)
}

// driftingExecutor changes every bucket out of band (break-glass admin API) right after
// `tofu apply` finished: the verification that follows must find the drift.
type driftingExecutor struct {
	tofurun.Executor
	cloud *client.Client
}

func (d driftingExecutor) Run(ctx context.Context, dir string, c tofurun.Command) (int, string, error) {
	code, explain, err := d.Executor.Run(ctx, dir, c)
	if err == nil && code == 0 && len(c.Args) > 0 && c.Args[0] == "apply" {
		buckets, lerr := d.cloud.AdminList(ctx, "bucket")
		if lerr != nil {
			return code, explain, lerr
		}
		for _, b := range buckets {
			if _, uerr := d.cloud.AdminUpdate(ctx, "bucket", b.ID, map[string]any{"retention_days": 1}, "drift test"); uerr != nil {
				return code, explain, uerr
			}
		}
	}
	return code, explain, err
}

// TestLiveVerificationFindsDrift: a change made out of band between apply and
// verification fails the run's verification, with the drift recorded and shown.
func TestLiveVerificationFindsDrift(t *testing.T) {
	t.Parallel()
	app := startLiveWith(t, liveOptions{Exec: func(e tofurun.Executor, cloudURL string) tofurun.Executor {
		admin, err := client.New(cloudURL, webtest.CloudAdminToken)
		require.NoError(t, err)
		return driftingExecutor{Executor: e, cloud: admin}
	}})
	operator := app.LoggedIn(t, "operator@acme.test")
	dev := app.OrgEnvironmentID(t, "acme", "development")
	id := app.App.RequestRun(t, operator, url.Values{"template": {"bucket"}, "environment": {dev}, "workspace": {"drifty"},
		"kind": {"apply"}, "inputs.name": {"drifty-bucket"}})
	r := waitForState(t, app.App, id, run.Failed)
	require.Contains(t, r.StateReason, "verification found drift")
	require.NotNil(t, r.VerifyLogArtifactID)
	page := webtest.ReadBody(t, app.Get(t, operator, "/runs/"+id))
	require.Contains(t, page, "retention_days", "the drift is shown on the run page")
}
