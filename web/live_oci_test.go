//go:build !fast

// Live: needs runc (as root) and live OpenTofu (bin/tofu, built from tools/tofu).

package web_test

import (
	"context"
	"fmt"
	"io/fs"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"gantry/bench"
	"gantry/cmd/gantry/webtest"
	"gantry/models/run"
	"gantry/runner"
	"gantry/runner/oci"
	"gantry/runner/tofu"
	"gantry/runner/tofu/tofutest"
	"gantry/runner/tofurun"
	"gantry/sandbox/cloud"
	"gantry/web"
)

// runcApp is Gantry with the live OpenTofu runner on the OCI (runc) executor: every
// tofu command runs in its own container whose only ways out are the state socket
// (forwarded by gantry-fwd to 127.0.0.1:<Gantry's port> inside) and the cloud socket.
type runcApp struct {
	*webtest.App
	cloudDir string
	exec     *oci.Executor
	tofu     *tofurun.OCI
	runner   *runcTimedRunner
}

// runcRequire skips unless runc can run containers here (root and the runc binary).
func runcRequire(t testing.TB) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Fatal("the OCI executor needs root (runc); CI runs as root")
	}
	if _, err := exec.LookPath("runc"); err != nil {
		t.Fatal("runc is not installed: apt-get install runc")
	}
}

// runcSocketDir makes a directory the job's (unused) uid can traverse, for one socket.
func runcSocketDir(t testing.TB, name string) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), name)
	require.NoError(t, os.Mkdir(dir, 0o755))
	require.NoError(t, os.Chmod(dir, 0o755))
	return dir
}

// runcListenUnix listens on a unix socket connectable by any uid (the job's is unused).
func runcListenUnix(t testing.TB, path string) net.Listener {
	t.Helper()
	ln, err := net.Listen("unix", path)
	require.NoError(t, err)
	require.NoError(t, os.Chmod(path, 0o666))
	t.Cleanup(func() { ln.Close() })
	return ln
}

func runcServe(t testing.TB, ln net.Listener, h http.Handler) {
	t.Helper()
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second}
	go srv.Serve(ln) //nolint:errcheck // ends with ErrServerClosed
	t.Cleanup(func() {
		ctx, cancel := bench.Context(context.Background(), 5*time.Second)
		defer cancel()
		_ = srv.Shutdown(ctx)
	})
}

func startRunc(t *testing.T, limits oci.Limits) runcApp {
	t.Helper()
	return startRuncWith(t, runcOptions{limits: limits})
}

// runcOptions: the containers' limits and the catalog (nil: the shipped one); cloud
// and wrap wrap the sandbox cloud's handler and the runner; tokenLifetime shortens the
// workload tokens' life.
type runcOptions struct {
	limits        oci.Limits
	catalog       fs.FS
	cloud         func(http.Handler) http.Handler
	wrap          func(runner.Runner) runner.Runner
	tokenLifetime time.Duration
	moduleClient  *http.Client // fetches allowlisted modules (nil: the system's https)
}

func startRuncWith(t testing.TB, opts runcOptions) runcApp {
	t.Helper()
	limits := opts.limits
	runcRequire(t)
	tools := t.TempDir()
	tc := tofutest.Toolchain(t, "..", tools, testLogWriter{t})
	fwd, err := tofu.BuildFwd(t.Context(), "..", tools)
	require.NoError(t, err)

	// Gantry's TCP listener: its URL is the BaseURL, so the generated backend address is
	// http://127.0.0.1:<port>/state/<ws>, which is also what fwd listens on in the
	// container. Host and container see the same address (a saved plan embeds it).
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	port := ln.Addr().(*net.TCPAddr).Port
	baseURL := "http://" + ln.Addr().String()

	// The same Gantry handler, restricted to the state backend, on a unix socket
	// (served once Gantry exists; connections wait in the backlog until then).
	stateSock := filepath.Join(runcSocketDir(t, "state"), "gantry.sock")
	stateLn := runcListenUnix(t, stateSock)

	// The sandbox cloud only on a unix socket: nothing but the provider in the container
	// talks to it. The cloud itself is created once Gantry serves its issuer (cloud.New
	// tries discovery at once and would wait 5 s for a listener nobody serves yet).
	cloudSock := filepath.Join(runcSocketDir(t, "cloud"), "cloud.sock")
	cloudLn := runcListenUnix(t, cloudSock)

	scratch := t.TempDir()
	ex := &oci.Executor{
		StateRoot:  filepath.Join(scratch, "runc"),
		BundleRoot: filepath.Join(scratch, "bundles"),
		CgroupRoot: fmt.Sprintf("gantry-webtest-%d-%s", os.Getpid(), strings.ToLower(strings.NewReplacer("/", "-", "_", "-").Replace(t.Name()))),
	}
	t.Cleanup(func() { runcRemoveCgroupRoot(ex.CgroupRoot) })
	ociExec, err := tofurun.NewOCI(t.Context(), tofurun.OCIConfig{
		Toolchain:   tc,
		Fwd:         fwd,
		RootfsDir:   filepath.Join(scratch, "rootfs"),
		StateSocket: stateSock,
		StatePort:   port,
		CloudSocket: cloudSock,
		Limits:      limits,
		Timeout:     2 * time.Minute,
		Executor:    ex,
	})
	require.NoError(t, err)
	tr := &runcTimedRunner{Runner: tofurun.New(ociExec, filepath.Join(scratch, "work"), &tofu.PluginCache{Mirror: tc.Mirror, Root: filepath.Join(scratch, "plugins")})}
	var live runner.Runner = tr
	if opts.wrap != nil {
		live = opts.wrap(tr)
	}
	app := webtest.StartWith(t, webtest.Options{Listener: ln, Runner: live, CatalogFS: opts.catalog, WorkloadTokenLifetime: opts.tokenLifetime,
		ModuleClient: opts.moduleClient})
	require.Equal(t, baseURL, app.URL)
	runcServe(t, stateLn, web.StateOnly(app.Server.Echo))
	cloudDir := t.TempDir()
	sc, err := cloud.New(t.Context(), cloud.Config{DataDir: cloudDir, Issuer: baseURL + "/workload", AdminToken: "admin-test-token",
		Logger: slog.New(slog.NewTextHandler(testLogWriter{t}, nil))})
	require.NoError(t, err)
	var cloudHandler http.Handler = sc
	if opts.cloud != nil {
		cloudHandler = opts.cloud(sc)
	}
	runcServe(t, cloudLn, cloudHandler)

	hctx, cancel := bench.Context(t.Context(), 30*time.Second)
	defer cancel()
	require.NoError(t, ociExec.Health(hctx), "executor health (%v)", context.Cause(hctx))
	return runcApp{App: app, cloudDir: cloudDir, exec: ex, tofu: ociExec, runner: tr}
}

func (a runcApp) cloudObjects(t *testing.T, kind string) int {
	return liveApp{App: a.App, cloudDir: a.cloudDir}.cloudObjects(t, kind)
}

// runcTimedRunner records how long each phase took.
type runcTimedRunner struct {
	runner.Runner
	mu    sync.Mutex
	times []string
}

// Health and Isolated are the wrapped runner's (the executors page asks for them).
func (r *runcTimedRunner) Health(ctx context.Context) error {
	if h, ok := r.Runner.(interface{ Health(context.Context) error }); ok {
		return h.Health(ctx)
	}
	return nil
}

func (r *runcTimedRunner) Isolated() bool {
	i, ok := r.Runner.(interface{ Isolated() bool })
	return ok && i.Isolated()
}

func (r *runcTimedRunner) note(phase string, start time.Time) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.times = append(r.times, fmt.Sprintf("%s %s", phase, time.Since(start).Round(time.Millisecond)))
}

func (r *runcTimedRunner) Plan(ctx context.Context, req runner.PlanRequest) (runner.PlanResult, error) {
	defer r.note("plan", time.Now())
	return r.Runner.Plan(ctx, req)
}

func (r *runcTimedRunner) Apply(ctx context.Context, req runner.ApplyRequest) (runner.ApplyResult, error) {
	defer r.note("apply", time.Now())
	return r.Runner.Apply(ctx, req)
}

func (r *runcTimedRunner) Verify(ctx context.Context, req runner.VerifyRequest) (runner.VerifyResult, error) {
	defer r.note("verify", time.Now())
	return r.Runner.Verify(ctx, req)
}

func (r *runcTimedRunner) Times() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return strings.Join(r.times, ", ")
}

func runcPostgresInputs(staging string, kind run.Kind) url.Values {
	return url.Values{"template": {"postgres"}, "environment": {staging}, "workspace": {"orders-db"}, "kind": {string(kind)},
		"inputs.name": {"orders"}, "inputs.engine_version": {"16"}, "inputs.size": {"small"}, "inputs.storage_gb": {"20"},
		"inputs.backup_retention_days": {"7"}, "inputs.network_cidr": {"10.30.0.0/16"}}
}

// TestLiveRunsInRunc: the postgres template is planned, approved, applied and verified
// with real OpenTofu, every command in its own runc container; a destroy run removes
// everything; nothing of the containers is left behind.
func TestLiveRunsInRunc(t *testing.T) {
	t.Parallel()
	app := startRunc(t, oci.Limits{MemoryBytes: 512 << 20, Pids: 256, CPUs: 1})
	operator := app.LoggedIn(t, "operator@acme.test")
	admin := app.LoggedIn(t, "admin@acme.test")
	staging := app.OrgEnvironmentID(t, "acme", "staging")
	// The bases of the waits below (WaitForRun spends them at the machine's pace): a live
	// phase in a container takes seconds to a minute on an idle machine.
	const phase = 2 * time.Minute

	first := app.App.WaitForRun(t, app.App.RequestRun(t, operator, runcPostgresInputs(staging, run.KindApply)), run.PendingApproval, phase)
	require.False(t, first.Simulated)
	require.Equal(t, "tofu/oci", first.Runner)
	require.Equal(t, 3, first.PlanSummary.Create, first.StateReason+app.App.RunLogs(t, first))
	approve(t, app.App, admin, first)
	first = app.App.WaitForRun(t, first.ID, run.Succeeded, 2*phase)
	require.Equal(t, 1, app.cloudObjects(t, "database"), app.App.RunLogs(t, first))
	require.Equal(t, 1, app.cloudObjects(t, "network"))
	require.Contains(t, string(first.Outputs), "orders.db.sandbox.internal:5432")
	log := app.App.RunLogs(t, first)
	require.Regexp(t, `(?m)^\$ tofu apply .*plan\.bin$`, log)
	require.Contains(t, log, "Apply complete! Resources: 3 added")

	// An engine version change replaces the database, with tofu's reason and path.
	upgrade := runcPostgresInputs(staging, run.KindApply)
	upgrade.Set("inputs.engine_version", "17")
	second := app.App.WaitForRun(t, app.App.RequestRun(t, operator, upgrade), run.PendingApproval, phase)
	require.Equal(t, 1, second.PlanSummary.Replace, app.App.RunLogs(t, second))
	planJSON := webtest.ReadBody(t, app.Get(t, admin, "/runs/"+second.ID+"/plan.json"))
	require.Contains(t, planJSON, `"action_reason":"replace_because_cannot_update"`)
	require.Contains(t, planJSON, `"replace_paths":[["engine_version"]]`)
	// Replacing a database loses its data: risk 3, an owner decides (elevated).
	require.Equal(t, 3, *second.RiskClass)
	approve(t, app.App, app.LoggedIn(t, "owner@acme.test"), second)
	app.App.WaitForRun(t, second.ID, run.Succeeded, 2*phase)

	destroy := app.App.WaitForRun(t, app.App.RequestRun(t, operator, runcPostgresInputs(staging, run.KindDestroy)), run.PendingApproval, phase)
	require.Equal(t, 3, destroy.PlanSummary.Delete, app.App.RunLogs(t, destroy))
	// A destroy needs an owner; an admin is refused.
	resp := app.PostForm(t, admin, "/runs/"+destroy.ID+"/approve", decisionForm(t, app.App, admin, destroy))
	webtest.ReadBody(t, resp)
	require.Equal(t, http.StatusForbidden, resp.StatusCode)
	owner := app.LoggedIn(t, "owner@acme.test")
	approve(t, app.App, owner, destroy)
	destroy = app.App.WaitForRun(t, destroy.ID, run.Succeeded, 2*phase)
	for _, kind := range []string{"database", "subnet", "network"} {
		require.Zero(t, app.cloudObjects(t, kind), kind+app.App.RunLogs(t, destroy))
	}
	t.Logf("phase durations (oci): %s", app.runner.Times())
	runcAssertNoLeftovers(t, app.exec)
}

// TestRuncJobLimits: a job over its memory limit is OOM-killed; the run fails saying
// so, and its container, bundle and cgroups are gone.
func TestRuncJobLimits(t *testing.T) {
	t.Parallel()
	app := startRunc(t, oci.Limits{MemoryBytes: 8 << 20, Pids: 256, CPUs: 1})
	operator := app.LoggedIn(t, "operator@acme.test")
	staging := app.OrgEnvironmentID(t, "acme", "staging")

	id := app.App.RequestRun(t, operator, runcPostgresInputs(staging, run.KindApply))
	var r run.Run
	require.NoError(t, app.DB.Where("id = ?", id).Take(&r).Error)
	changed, stop := app.Server.Changes.Subscribe(r.OrganizationID, id)
	defer stop()
	bench.Eventually(t, "run "+id+" to end its plan", 2*time.Minute, func() (bool, any) {
		require.NoError(t, app.DB.Where("id = ?", id).Take(&r).Error)
		return r.State.Terminal() || r.State == run.PendingApproval, bench.Later(func() string {
			return string(r.State) + app.App.RunLogs(t, r)
		})
	}, bench.Wake(changed))
	logs := app.App.RunLogs(t, r)
	require.Equal(t, run.Failed, r.State, "%s%s", r.StateReason, logs)
	require.Contains(t, r.StateReason, "exceeded its memory limit of 8 MiB", logs)
	require.Contains(t, logs, "exceeded its memory limit of 8 MiB")
	t.Logf("reason: %s%s", r.StateReason, logs)
	runcAssertNoLeftovers(t, app.exec)
}
