//go:build !fast

// Live: needs live OpenTofu (bin/tofu, built from tools/tofu): gantry dev builds and runs it.

package main

import (
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"gantry/bench"
	"gantry/cmd/gantry/webtest"
	"gantry/models/db/pgcluster"
	"gantry/runner/tofu/tofutest"
)

var runningAt = regexp.MustCompile(`Gantry is running at (http://\S+)`)
var idpAt = regexp.MustCompile(`development OpenID Provider: (http://\S+)`)

// startDev runs this test binary as `gantry dev` and waits for its banner; env is added
// to the process's environment. The test's cleanup stops it as Ctrl-C does (it stops
// its PostgreSQL then).
func startDev(t testing.TB, dataDir string, env ...string) (dev *process, appURL, issuer string) {
	t.Helper()
	dev = startMain(t, append([]string{"GANTRY_KEYS="}, env...), syscall.SIGINT,
		"dev", "--data-dir", dataDir, "--metrics-addr", "127.0.0.1:0", "--addr", "127.0.0.1:0", "--idp-addr", "127.0.0.1:0", "--sandbox-addr", "127.0.0.1:0")
	// Woken by its output; its exit fails the wait at once.
	bench.Eventually(t, "gantry dev's banner", devStartDeadline, func() (bool, any) {
		dev.alive(t, "gantry dev to come up")
		return banner.MatchString(dev.out.String()), bench.Later(func() string { return "its output:\n" + dev.out.String() })
	}, bench.Wake(dev.out.Wrote()))
	out := dev.out.String()
	m := runningAt.FindStringSubmatch(out)
	require.NotNil(t, m, out)
	if m := idpAt.FindStringSubmatch(out); m != nil {
		issuer = m[1]
	}
	return dev, m[1], issuer
}

// stopDev stops gantry dev as Ctrl-C does and requires a clean exit (it stops its
// PostgreSQL first: a minute of idle-machine time is plenty).
func stopDev(t testing.TB, dev *process) {
	t.Helper()
	require.NoError(t, dev.cmd.Process.Signal(syscall.SIGINT))
	require.NoError(t, dev.waitExit(t, time.Minute), dev.out.String())
}

// TestDevStartsEverything: `gantry dev` brings up PostgreSQL, migrations, the
// development OpenID Provider, demo data and Gantry; Ctrl-C stops all of it; a second
// start reuses the data directory.
func TestDevStartsEverything(t *testing.T) {
	dataDir, err := pgcluster.MkdirTemp("gantry-dev-test-")
	require.NoError(t, err)
	t.Cleanup(func() { os.RemoveAll(dataDir) })

	noRedirect := &http.Client{Timeout: 10 * time.Second, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	for start := 1; start <= 2; start++ {
		dev, appURL, issuer := startDev(t, dataDir)
		resp, err := noRedirect.Get(appURL + "/readyz")
		require.NoError(t, err)
		resp.Body.Close()
		require.Equal(t, http.StatusOK, resp.StatusCode)
		resp, err = noRedirect.Get(appURL + "/login")
		require.NoError(t, err)
		resp.Body.Close()
		require.Equal(t, http.StatusFound, resp.StatusCode)
		require.True(t, strings.HasPrefix(resp.Header.Get("Location"), issuer+"/authorize?"), resp.Header.Get("Location"))
		// The provider's login page lists the demo users with their passwords.
		page, err := http.Get(resp.Header.Get("Location"))
		require.NoError(t, err)
		body, _ := io.ReadAll(page.Body)
		page.Body.Close()
		require.Contains(t, string(body), "admin@acme.test")
		require.Contains(t, string(body), "admin-acme")
		require.Contains(t, dev.out.String(), "default executor: tofu/", "dev runs live OpenTofu by default")
		if start == 2 {
			devRunSucceeds(t, appURL, issuer, dev)
		}

		stopDev(t, dev)
		require.Contains(t, dev.out.String(), "Stopped.")
		_, err = os.Stat(filepath.Join(dataDir, "postgres", "postmaster.pid"))
		require.True(t, os.IsNotExist(err), "postgres still running after Ctrl-C (start %d)", start)
		_, err = os.Stat(filepath.Join(dataDir, "postgres", "PG_VERSION"))
		require.NoError(t, err, "the cluster stays for the next start")
	}
}

// devStartDeadline is the budget (of idle-machine time) for a start's banner: a cold start
// initialises PostgreSQL.
const devStartDeadline = 90 * time.Second

// TestColdDevServesBeforeTheOpenTofuBuild: a cold `gantry dev` (no data directory, no
// OpenTofu binary) serves /healthz and the sign-in page while OpenTofu is still being
// built, and a live run requested meanwhile waits in QUEUED, saying so, then completes
// once the build is done. The build is held by a stand-in for the go command that waits
// for the test to open a gate, so the order is certain: a portal that waited for the
// build would never answer.
func TestColdDevServesBeforeTheOpenTofuBuild(t *testing.T) {
	// The suite's OpenTofu first, waited for by its progress (tofutest): the cold start's
	// own build, into an empty bin directory, then finds its modules downloaded and its
	// packages compiled, so it reaches the gate in seconds and links once past it, rather
	// than compiling OpenTofu a second time beside the rest of the suite.
	tofutest.Binary(t, "../..", testLog{t})
	dataDir, err := pgcluster.MkdirTemp("gantry-cold-test-")
	require.NoError(t, err)
	t.Cleanup(func() { os.RemoveAll(dataDir) })
	binDir := t.TempDir()
	gates := t.TempDir()
	gate, held := filepath.Join(gates, "open"), filepath.Join(gates, "held")
	realGo, err := exec.LookPath("go")
	require.NoError(t, err)
	wrapper := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(wrapper, "go"), []byte(`#!/bin/sh
# Holds the build of OpenTofu (go build in tools/tofu) until the test opens the gate,
# and says that it does.
case "$(/bin/pwd)" in
*/tools/tofu) if [ "$1" = build ]; then : > "`+held+`"; while [ ! -e "`+gate+`" ]; do sleep 0.1; done; fi ;;
esac
exec "`+realGo+`" "$@"
`), 0o755))

	dev, appURL, issuer := startDev(t, dataDir, "PATH="+wrapper+":"+os.Getenv("PATH"), "GANTRY_BIN_DIR="+binDir)
	noRedirect := &http.Client{Timeout: 10 * time.Second, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	resp, err := noRedirect.Get(appURL + "/healthz")
	require.NoError(t, err)
	resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode)
	resp, err = noRedirect.Get(appURL + "/login")
	require.NoError(t, err)
	resp.Body.Close()
	require.Equal(t, http.StatusFound, resp.StatusCode)
	signIn, err := http.Get(resp.Header.Get("Location"))
	require.NoError(t, err)
	body, _ := io.ReadAll(signIn.Body)
	signIn.Body.Close()
	require.Equal(t, http.StatusOK, signIn.StatusCode)
	require.Contains(t, string(body), "operator@acme.test", "the sign-in page")
	_, err = os.Stat(filepath.Join(binDir, "tofu"))
	require.True(t, os.IsNotExist(err), "OpenTofu is not built yet while the portal already serves")
	require.NotContains(t, dev.out.String(), "the OpenTofu toolchain is ready")

	app := &webtest.App{URL: appURL, Issuer: issuer}
	admin := app.LoggedIn(t, "admin@acme.test")
	executors := webtest.ReadBody(t, app.Get(t, admin, "/executors"))
	require.Contains(t, executors, `data-testid="executor-preparing"`)
	require.Regexp(t, waitHeadline, executors)

	c := app.LoggedIn(t, "operator@acme.test")
	runID := devRequestBucket(t, app, c, "cold-start")
	// The plan job finds the executor preparing more than once: the run waits. Nothing
	// notifies the run's wait for its executor (the run stays QUEUED): this polls.
	var page string
	bench.Eventually(t, "the run page to say the run waits for the OpenTofu build", 30*time.Second, func() (bool, any) {
		dev.alive(t, "the run to wait for the build")
		page = webtest.ReadBody(t, app.Get(t, c, "/runs/"+runID))
		return waitHeadline.MatchString(page), bench.Later(func() string { return "the page:\n" + page })
	}, bench.Poll(100*time.Millisecond))
	require.Contains(t, page, `data-testid="run-state" data-state="QUEUED">`)
	require.Contains(t, page, `data-testid="executor-wait"`)
	require.Regexp(t, waitHeadline, page)

	// The build really is being held (not merely not finished yet). A file the stand-in
	// writes sends no event: this polls. Nothing is left to download or compile before
	// the gate (see above): seconds.
	bench.Eventually(t, "the OpenTofu build to reach the gate", 5*time.Minute, func() (bool, any) {
		dev.alive(t, "the OpenTofu build to reach the gate")
		_, err := os.Stat(held)
		return err == nil, bench.Later(func() string { return fmt.Sprintf("%v; gantry dev's output:\n%s", err, dev.out) })
	}, bench.Poll(100*time.Millisecond))
	require.NoError(t, os.WriteFile(gate, nil, 0o644))
	devRunEnds(t, app, c, runID, "SUCCEEDED", dev)
	_, err = os.Stat(filepath.Join(binDir, "tofu"))
	require.NoError(t, err, "the build finished into --bin-dir")
	require.Contains(t, dev.out.String(), "the OpenTofu toolchain is ready")
	stopDev(t, dev)
}

// devRequestBucket requests a bucket in development on the default executor and
// returns the run's id.
func devRequestBucket(t testing.TB, app *webtest.App, c *http.Client, workspace string) string {
	t.Helper()
	page := webtest.ReadBody(t, app.Get(t, c, "/requests/new?template=bucket"))
	env := regexp.MustCompile(`<option value="(env-[a-z0-9]+)"[^>]*>development`).FindStringSubmatch(page)
	require.NotNil(t, env, "no development environment on the request form")
	resp := app.PostForm(t, c, "/requests", url.Values{"_csrf": {app.CSRF(t, c)}, "template": {"bucket"}, "environment": {env[1]},
		"workspace": {workspace}, "kind": {"apply"}, "inputs.name": {workspace + "-bucket"}})
	body := webtest.ReadBody(t, resp)
	require.Equal(t, http.StatusSeeOther, resp.StatusCode, body)
	m := runLocation.FindStringSubmatch(resp.Header.Get("Location"))
	require.NotNil(t, m)
	return m[1]
}

// devRunEnds waits for the run to end and requires it to end in want. A build may be in
// front of it (OpenTofu's takes half an hour on a fresh, busy machine): the wait follows
// what the run page shows, its state and the build's count of packages while the run
// waits for it, and fails when that stops moving for tofutest.Stall of idle-machine
// time, not at a fixed minute. The run page's live stream wakes the wait at every change of the
// run; gantry dev's exit fails it at once.
func devRunEnds(t testing.TB, app *webtest.App, c *http.Client, runID, want string, dev *process) string {
	t.Helper()
	stream := openEvents(t, c, app.URL+"/runs/"+runID+"/events")
	defer stream.close()
	var state, page string
	bench.Eventually(t, fmt.Sprintf("run %s to end", runID), tofutest.Stall, func() (bool, any) {
		dev.alive(t, fmt.Sprintf("run %s to end", runID))
		page = webtest.ReadBody(t, app.Get(t, c, "/runs/"+runID))
		if s := runState.FindStringSubmatch(page); s != nil {
			state = s[1]
		}
		return state == "SUCCEEDED" || state == "FAILED", state
	}, bench.Wake(stream.wakes()), bench.Progress(func() any { return state + " " + waitingFor(page) }))
	require.Equal(t, want, state, "run page:\n%s\n%s", page, dev.out)
	return page
}

var runState = regexp.MustCompile(`data-testid="run-state" data-state="([A-Z_]+)">`)
var executorWait = regexp.MustCompile(`(?s)data-testid="executor-wait">(.*?)</section>`)

// waitHeadline is what a page says of a run waiting for the build: "Waiting for the
// OpenTofu build: 338 of 1399 packages (24 %)", the count once the build counted it.
var waitHeadline = regexp.MustCompile(`Waiting for the OpenTofu build(: \d+ of \d+ packages)? \(\d+ %\)`)

// waitingFor is what a run page says its run waits for ("Waiting for the OpenTofu build:
// 338 of 1399 packages (24 %) · compiling OpenTofu"), or "".
func waitingFor(page string) string {
	if m := executorWait.FindStringSubmatch(page); m != nil {
		return m[1]
	}
	return ""
}

var runLocation = regexp.MustCompile(`^/runs/(run-[a-z0-9]+)$`)

// devRunSucceeds signs in to a running `gantry dev` as the demo operator and runs a
// bucket in development (self-service) on the default executor: live OpenTofu against
// the embedded sandbox cloud, through dev's sockets and state backend.
func devRunSucceeds(t *testing.T, appURL, issuer string, dev *process) {
	t.Helper()
	app := &webtest.App{URL: appURL, Issuer: issuer}
	c := app.LoggedIn(t, "operator@acme.test")
	page := devRunEnds(t, app, c, devRequestBucket(t, app, c, "dev-smoke"), "SUCCEEDED", dev)
	require.NotContains(t, page, "SIMULATED")
	require.Regexp(t, `data-testid="executor">tofu/(oci · isolated \(runc\)|process · not isolated)<`, page)
}
