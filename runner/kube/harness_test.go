//go:build !fast

// Live: needs live OpenTofu (bin/tofu, built from tools/tofu) and gantry-phase built from source.

package kube_test

// The tests' harness: Gantry (webtest) with the tofu/kubernetes executor, its runner
// listener (the phase endpoint and the state backend), and a sandbox cloud that trusts
// Gantry's workload issuer, all listening where the pods reach them; and helpers that
// drive runs through the HTTP interface as people do.

import (
	"context"
	"io"
	"io/fs"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"gantry/bench"
	"gantry/cmd/gantry/webtest"
	"gantry/models/idempotency"
	"gantry/models/run"
	"gantry/runner"
	"gantry/runner/kube"
	"gantry/runner/oci"
	"gantry/runner/tofu"
	"gantry/runner/tofu/tofutest"
	"gantry/sandbox/cloud"
	"gantry/web"
)

const cloudAdminToken = "admin-test-token"

// env is Gantry running phases as pods.
type env struct {
	*webtest.App
	Runner    *kube.Runner
	Portal    *kube.Portal
	CloudURL  string
	CloudDir  string
	PortalURL string
	Toolchain tofu.Toolchain
	Root      string // the source tree
}

// envOptions adjust start.
type envOptions struct {
	// host is where Gantry, the runner listener and the cloud listen: loopback for
	// local pods, the cluster's bridge gateway for real ones.
	host string
	// launcher makes the pods' launcher once the toolchain is built.
	launcher func(t testing.TB, tc tofu.Toolchain, root string) kube.Launcher
	// cloud wraps the sandbox cloud's handler.
	cloud         func(http.Handler) http.Handler
	tokenLifetime time.Duration
	limits        oci.Limits
	catalog       fs.FS
}

// start builds the toolchain and starts everything.
func start(t testing.TB, opts envOptions) *env {
	t.Helper()
	if opts.host == "" {
		opts.host = "127.0.0.1"
	}
	root, err := tofu.RepoRoot(".")
	require.NoError(t, err)
	tc := tofutest.Toolchain(t, root, t.TempDir(), logWriter{t})
	listen := func() net.Listener {
		ln, err := net.Listen("tcp", net.JoinHostPort(opts.host, "0"))
		require.NoError(t, err, "listening on %s (for pods to reach)", opts.host)
		return ln
	}
	gantryLn, runnerLn, cloudLn := listen(), listen(), listen()
	e := &env{Portal: kube.NewPortal(), CloudURL: "http://" + cloudLn.Addr().String(), PortalURL: "http://" + runnerLn.Addr().String(),
		Toolchain: tc, Root: root, CloudDir: t.TempDir()}
	e.Runner = &kube.Runner{Launcher: opts.launcher(t, tc, root), Portal: e.Portal, PortalURL: e.PortalURL,
		CloudEndpoint: e.CloudURL, Limits: opts.limits, WorkRoot: t.TempDir(),
		Timeouts: runner.Timeouts{Plan: 5 * time.Minute, Apply: 5 * time.Minute, Verify: 5 * time.Minute}}
	e.App = webtest.StartWith(t, webtest.Options{Listener: gantryLn, Runner: e.Runner, CloudEndpoint: e.CloudURL,
		WorkloadTokenLifetime: opts.tokenLifetime, CatalogFS: opts.catalog})
	// The runner listener: the phase endpoint and the state backend, nothing else.
	mux := http.NewServeMux()
	mux.Handle(kube.PathPrefix, e.Portal)
	mux.Handle("/state/", web.StateOnly(e.App.Server.Echo))
	serve(t, runnerLn, mux)
	sc, err := cloud.New(t.Context(), cloud.Config{DataDir: e.CloudDir, Issuer: e.App.URL + "/workload", AdminToken: cloudAdminToken,
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	require.NoError(t, err)
	var h http.Handler = sc
	if opts.cloud != nil {
		h = opts.cloud(h)
	}
	serve(t, cloudLn, h)
	return e
}

func serve(t testing.TB, ln net.Listener, h http.Handler) {
	t.Helper()
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second}
	go srv.Serve(ln) //nolint:errcheck // ends with ErrServerClosed
	t.Cleanup(func() {
		ctx, cancel := bench.Context(context.Background(), 5*time.Second)
		defer cancel()
		_ = srv.Shutdown(ctx)
	})
}

// logWriter writes to the test log.
type logWriter struct{ t testing.TB }

func (w logWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}

// approve decides r as its review page would.
func approve(t testing.TB, app *webtest.App, c *http.Client, r run.Run) {
	t.Helper()
	v := url.Values{"_csrf": {app.CSRF(t, c)}, "idempotency_key": {idempotency.NewKey()}}
	for field, value := range run.EvidenceOf(r).Fields() {
		v.Set(field, value)
	}
	if run.RequirementOf(r).Elevated {
		v.Set("confirm", "DESTROY")
		v.Set("reason", "checked with the data owner")
	}
	resp := app.PostForm(t, c, "/runs/"+r.ID+"/approve", v)
	body := webtest.ReadBody(t, resp)
	require.Equal(t, http.StatusSeeOther, resp.StatusCode, body)
}

// cloudObjects counts the live objects of a kind in the sandbox cloud's store.
func (e *env) cloudObjects(t testing.TB, kind string) int {
	t.Helper()
	n := 0
	require.NoError(t, filepath.WalkDir(filepath.Join(e.CloudDir, "objects"), func(path string, d os.DirEntry, err error) error {
		if err == nil && !d.IsDir() && strings.HasSuffix(path, ".json") && strings.Contains(path, string(filepath.Separator)+kind+string(filepath.Separator)) {
			n++
		}
		return err
	}))
	return n
}

// applies are the sandbox cloud's apply attempts at r's plan.
func (e *env) applies(t testing.TB, r run.Run) []cloud.ApplyAttempt {
	t.Helper()
	ledger, err := cloud.ReadApplies(e.CloudDir)
	require.NoError(t, err)
	require.Empty(t, ledger.Twice(), "a plan applied twice")
	for _, p := range ledger.Plans {
		if p.PlanDigest == r.PlanDigest {
			return p.Attempts
		}
	}
	return nil
}

// logChunks counts the live log chunks stored for a run's phase.
func logChunks(t testing.TB, app *webtest.App, runID, phase string) int64 {
	t.Helper()
	var n int64
	require.NoError(t, app.DB.Raw("SELECT count(*) FROM run_log_chunks WHERE run_id = ? AND phase = ?", runID, phase).Scan(&n).Error)
	return n
}

func postgresInputs(envID, workspace string, kind run.Kind) url.Values {
	return url.Values{"template": {"postgres"}, "environment": {envID}, "workspace": {workspace}, "kind": {string(kind)},
		"inputs.name": {"orders"}, "inputs.engine_version": {"16"}, "inputs.size": {"small"}, "inputs.storage_gb": {"20"},
		"inputs.backup_retention_days": {"7"}, "inputs.network_cidr": {"10.30.0.0/16"}}
}

func bucketInputs(envID, workspace, retention string) url.Values {
	return url.Values{"template": {"bucket"}, "environment": {envID}, "workspace": {workspace}, "kind": {"apply"},
		"inputs.name": {workspace}, "inputs.retention_days": {retention}}
}
