//go:build !fast

// Live: needs live OpenTofu (bin/tofu, built from tools/tofu) and, for tofu/oci, runc (as root).

package main

import (
	"context"
	"net"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"gantry/runner/tofu"
	"gantry/runner/tofu/tofutest"
	"gantry/sandbox/cloud"
)

// The chaos and load suites with live OpenTofu: the portals run real tofu (as a plain
// process, or in runc containers) against a sandbox cloud that trusts their workload
// identity issuer. The cloud's applies ledger counts every apply per plan digest (an
// apply token names the plan it applies and its attempt), so "no plan applied twice" is
// checked on the far side of every kill, where the change is made.

// TestChaosLive is TestChaos with live OpenTofu: runs through the API across two
// organizations and three environments while portals are SIGKILLed (their tofu dies
// with them) and restarted; the same invariants, checked against the sandbox cloud's
// applies ledger. CI runs 6 runs and 2 kills on the process executor; `go tool task
// chaos` runs 30 and 10 on each of the process and runc executors (GANTRY_CHAOS_LIVE_RUNS,
// GANTRY_CHAOS_LIVE_KILLS, GANTRY_CHAOS_LIVE_EXECUTORS; GANTRY_CHAOS_LIVE_REPORT names a
// file for the report).
func TestChaosLive(t *testing.T) {
	t.Parallel()
	runs, kills := envInt(t, "GANTRY_CHAOS_LIVE_RUNS", 6), envInt(t, "GANTRY_CHAOS_LIVE_KILLS", 2)
	executors := os.Getenv("GANTRY_CHAOS_LIVE_EXECUTORS")
	if executors == "" {
		executors = "tofu/process"
	}
	var reports []string
	for _, executor := range filepath.SplitList(executors) {
		t.Run(executor, func(t *testing.T) {
			c := newLiveChaos(t, executor)
			c.reportTo = "" // written below, for every executor
			c.run(runs, kills)
			reports = append(reports, c.lastReport)
		})
	}
	if path := os.Getenv("GANTRY_CHAOS_LIVE_REPORT"); path != "" && len(reports) > 0 {
		require.NoError(t, os.WriteFile(path, []byte(strings.Join(reports, "\n")+"\n"), 0o644))
	}
}

// newLiveChaos starts portals a and b on executor ("tofu/process" or "tofu/oci") behind
// one front address, with a sandbox cloud trusting their issuer.
func newLiveChaos(t *testing.T, executor string) *chaos {
	r := newReplicas(t)
	dir := t.TempDir()
	c := &chaos{t: t, r: r, work: filepath.Join(dir, "work"), cloudDir: filepath.Join(dir, "cloud"),
		label: "chaos (live OpenTofu, " + executor + ")"}
	c.fleet = &fleet{r: r, live: map[string]*replica{}}
	c.fleet.args = liveArgs(t, c.fleet, executor, c.cloudDir, c.work)
	c.begin()
	return c
}

// liveArgs prepares what portals need to run live OpenTofu on executor: the toolchain
// (tofu from bin/, cached between runs; the provider and gantry-fwd built), a front
// address that forwards to whichever portal of f is alive (their base URL: the workload
// issuer the cloud trusts and the state backend tofu calls must outlive any one
// portal, as behind a load balancer), and the sandbox cloud with its data in cloudDir.
func liveArgs(t *testing.T, f *fleet, executor, cloudDir, work string) []string {
	t.Helper()
	oci := executor == "tofu/oci"
	if oci {
		requireRunc(t)
	}
	root, err := tofu.RepoRoot(".")
	require.NoError(t, err)
	tc, fwd := tofutest.Build(t, tofu.Build{Root: root, Dir: t.TempDir(), Fwd: oci, Log: testLog{t}})

	front := httptest.NewServer(&httputil.ReverseProxy{
		Rewrite: func(pr *httputil.ProxyRequest) {
			urls := f.urls()
			if len(urls) == 0 {
				return // no portal: the transport fails, the client sees 502 and tries again
			}
			u, err := url.Parse(urls[0])
			if err == nil {
				pr.SetURL(u)
				pr.Out.Host = pr.In.Host
			}
		},
		ErrorHandler: func(w http.ResponseWriter, _ *http.Request, _ error) { w.WriteHeader(http.StatusBadGateway) },
	})
	t.Cleanup(front.Close)

	require.NoError(t, os.MkdirAll(cloudDir, 0o700))
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	sc, err := cloud.New(ctx, cloud.Config{DataDir: cloudDir, Issuer: front.URL + "/workload", AdminToken: "chaos-cloud-admin"})
	require.NoError(t, err)
	cloudSrv := httptest.NewServer(sc)
	t.Cleanup(cloudSrv.Close)

	args := []string{"--runner=" + executor, "--tofu=" + tc.Tofu, "--sandbox-provider=" + tc.Provider,
		"--cloud-endpoint=" + cloudSrv.URL, "--base-url=" + front.URL, "--work-dir=" + work}
	if oci {
		// runc jobs have no network: they reach the cloud and their portal's state backend
		// through unix sockets in directories the job's (unused) uid can traverse.
		sockets := filepath.Join(t.TempDir(), "sockets")
		require.NoError(t, os.Mkdir(sockets, 0o755))
		require.NoError(t, os.Chmod(sockets, 0o755))
		cloudSocket := filepath.Join(sockets, "cloud.sock")
		ln, err := net.Listen("unix", cloudSocket)
		require.NoError(t, err)
		require.NoError(t, os.Chmod(cloudSocket, 0o666))
		srv := &http.Server{Handler: sc, ReadHeaderTimeout: 10 * time.Second}
		go srv.Serve(ln) //nolint:errcheck // ends with Close
		t.Cleanup(func() { srv.Close() })
		args = append(args, "--fwd="+fwd, "--cloud-socket="+cloudSocket)
		f.own = func(id string) []string {
			return []string{"--state-socket=" + filepath.Join(sockets, "state-"+id+".sock")}
		}
	}
	return args
}

// requireRunc fails (never skips) where runc jobs cannot run: CI runs as root with runc.
func requireRunc(t *testing.T) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Fatal("the runc executor needs root; CI runs as root")
	}
	if _, err := exec.LookPath("runc"); err != nil {
		t.Fatal("runc is not installed: apt-get install runc (go tool task deps)")
	}
}

// testLog writes a build's output to the test log.
type testLog struct{ t *testing.T }

func (l testLog) Write(p []byte) (int, error) {
	l.t.Logf("%s", p)
	return len(p), nil
}
