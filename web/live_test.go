package web_test

import (
	"encoding/json"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"gantry/models/run"
	"gantry/runner/tofu"
	"gantry/runner/tofurun"
	"gantry/sandbox/cloud"
	"gantry/web/webtest"
)

// liveApp is Gantry with the live OpenTofu runner (process executor) against a sandbox
// cloud that trusts Gantry's workload identity issuer.
type liveApp struct {
	*webtest.App
	cloudDir string
}

func startLive(t *testing.T) liveApp {
	t.Helper()
	tc, err := tofu.PrepareToolchain(t.Context(), "..", t.TempDir(), testLogWriter{t})
	require.NoError(t, err)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	cloudDir := t.TempDir()
	sc, err := cloud.New(t.Context(), cloud.Config{DataDir: cloudDir, Issuer: "http://" + ln.Addr().String() + "/workload", AdminToken: "admin-test-token"})
	require.NoError(t, err)
	cloudSrv := httptest.NewServer(sc)
	t.Cleanup(cloudSrv.Close)
	exec := &tofurun.Process{Tofu: tc.Tofu, CLIConfig: tc.CLIConfig, CloudEndpoint: cloudSrv.URL}
	app := webtest.StartWith(t, webtest.Options{Listener: ln, Runner: tofurun.New(exec, t.TempDir())})
	return liveApp{App: app, cloudDir: cloudDir}
}

// cloudObjects counts the live objects of a kind in the sandbox cloud's store.
func (l liveApp) cloudObjects(t *testing.T, kind string) int {
	t.Helper()
	n := 0
	require.NoError(t, filepath.WalkDir(l.cloudDir, func(path string, d os.DirEntry, err error) error {
		if err == nil && !d.IsDir() && strings.HasSuffix(path, ".json") && strings.Contains(path, string(filepath.Separator)+kind+string(filepath.Separator)) {
			n++
		}
		return err
	}))
	return n
}

func approve(t *testing.T, app *webtest.App, c *http.Client, r run.Run) {
	t.Helper()
	resp := app.PostForm(t, c, "/runs/"+r.ID+"/approve", url.Values{"_csrf": {app.CSRF(t, c)}, "plan_digest": {r.PlanDigest}})
	webtest.ReadBody(t, resp)
	require.Equal(t, http.StatusSeeOther, resp.StatusCode)
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

	first := waitForState(t, app.App, requestRun(t, app.App, operator, inputs("16", run.KindApply)), run.PendingApproval)
	require.False(t, first.Simulated)
	require.Equal(t, "tofu/process", first.Runner)
	require.Equal(t, 3, first.PlanSummary.Create, first.StateReason)
	approve(t, app.App, admin, first)
	first = waitForState(t, app.App, first.ID, run.Succeeded)
	require.Equal(t, 1, app.cloudObjects(t, "database"))
	require.Equal(t, 1, app.cloudObjects(t, "network"))
	require.Contains(t, string(first.Outputs), "orders.db.sandbox.internal:5432")

	// Engine version change: the database is replaced, with tofu's reason and path.
	second := waitForState(t, app.App, requestRun(t, app.App, operator, inputs("17", run.KindApply)), run.PendingApproval)
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
	approve(t, app.App, admin, second)
	waitForState(t, app.App, second.ID, run.Succeeded)

	// Destroy removes everything.
	destroy := waitForState(t, app.App, requestRun(t, app.App, operator, inputs("17", run.KindDestroy)), run.PendingApproval)
	require.Equal(t, 3, destroy.PlanSummary.Delete)
	approve(t, app.App, admin, destroy)
	waitForState(t, app.App, destroy.ID, run.Succeeded)
	for _, kind := range []string{"database", "subnet", "network"} {
		require.Zero(t, app.cloudObjects(t, kind), kind)
	}
}
