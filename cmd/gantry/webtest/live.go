package webtest

import (
	"io"
	"io/fs"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"gantry/runner"
	"gantry/runner/tofu"
	"gantry/runner/tofu/tofutest"
	"gantry/runner/tofurun"
	"gantry/sandbox/cloud"
)

// CloudAdminToken authenticates the live sandbox cloud's admin API in tests (the
// out-of-band changes drift and break-glass tests make).
const CloudAdminToken = "admin-test-token"

// LiveOptions adjust StartLive.
type LiveOptions struct {
	// Catalog replaces the shipped catalog.
	Catalog fs.FS
	// Cloud wraps the sandbox cloud's handler (to slow it down).
	Cloud func(http.Handler) http.Handler
	// Exec wraps the executor; it gets the cloud's URL for out-of-band changes.
	Exec func(e tofurun.Executor, cloudURL string) tofurun.Executor
	// Runner wraps the live runner.
	Runner func(runner.Runner) runner.Runner
	// WorkloadTokenLifetime shortens the workload tokens' life (zero: 15 minutes).
	WorkloadTokenLifetime time.Duration
	// DatabaseURL and Log are Options.DatabaseURL and Options.Log.
	DatabaseURL string
	Log         io.Writer
}

// Live is Gantry with the live OpenTofu runner (the process executor) against a
// sandbox cloud that trusts Gantry's workload identity issuer.
type Live struct {
	*App
	CloudDir, CloudURL string
	Exec               tofurun.Executor
	Toolchain          tofu.Toolchain
}

// StartLive starts Gantry with live OpenTofu, built from the source tree around the
// test (the Go build cache makes that seconds after the first time).
func StartLive(t testing.TB, opts LiveOptions) Live {
	t.Helper()
	root, err := tofu.RepoRoot(".")
	require.NoError(t, err)
	tc := tofutest.Toolchain(t, root, t.TempDir(), logWriter{t})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	cloudDir := t.TempDir()
	sc, err := cloud.New(t.Context(), cloud.Config{DataDir: cloudDir, Issuer: "http://" + ln.Addr().String() + "/workload", AdminToken: CloudAdminToken})
	require.NoError(t, err)
	var handler http.Handler = sc
	if opts.Cloud != nil {
		handler = opts.Cloud(handler)
	}
	cloudSrv := httptest.NewServer(handler)
	t.Cleanup(cloudSrv.Close)
	var exec tofurun.Executor = &tofurun.Process{Tofu: tc.Tofu, CLIConfig: tc.CLIConfig, CloudEndpoint: cloudSrv.URL}
	if opts.Exec != nil {
		exec = opts.Exec(exec, cloudSrv.URL)
	}
	var live runner.Runner = tofurun.New(exec, t.TempDir(), &tofu.PluginCache{Mirror: tc.Mirror, Root: t.TempDir()})
	if opts.Runner != nil {
		live = opts.Runner(live)
	}
	app := StartWith(t, Options{Listener: ln, Runner: live, CatalogFS: opts.Catalog, CloudEndpoint: cloudSrv.URL,
		WorkloadTokenLifetime: opts.WorkloadTokenLifetime, DatabaseURL: opts.DatabaseURL, Log: opts.Log})
	return Live{App: app, CloudDir: cloudDir, CloudURL: cloudSrv.URL, Exec: exec, Toolchain: tc}
}

// logWriter writes the toolchain build's output to the test log.
type logWriter struct{ t testing.TB }

func (w logWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}
