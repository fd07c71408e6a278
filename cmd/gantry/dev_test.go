package main

import (
	"bufio"
	"encoding/json"
	"io"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"gantry/models/db/pgcluster"
	"gantry/web/webtest"
)

var runningAt = regexp.MustCompile(`Gantry is running at (http://\S+)`)
var idpAt = regexp.MustCompile(`development OpenID Provider: (http://\S+)`)

// startDev runs this test binary as `gantry dev` and waits for its banner; env is added
// to the process's environment.
func startDev(t testing.TB, dataDir string, env ...string) (cmd *exec.Cmd, appURL, issuer string, output func() string) {
	t.Helper()
	args, err := json.Marshal([]string{"dev", "--data-dir", dataDir, "--metrics-addr", "127.0.0.1:0", "--addr", "127.0.0.1:0", "--idp-addr", "127.0.0.1:0", "--sandbox-addr", "127.0.0.1:0"})
	require.NoError(t, err)
	cmd = exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(append(os.Environ(), "GANTRY_TEST_MAIN=1", "GANTRY_TEST_ARGS="+string(args), "GANTRY_KEYS="), env...)
	stdout, err := cmd.StdoutPipe()
	require.NoError(t, err)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	require.NoError(t, cmd.Start())
	t.Cleanup(func() {
		if cmd.ProcessState == nil {
			_ = cmd.Process.Signal(syscall.SIGINT)
			_ = cmd.Wait()
		}
	})
	var mu sync.Mutex
	var out strings.Builder
	banner := make(chan struct{})
	go func() {
		lines := bufio.NewScanner(stdout)
		for lines.Scan() {
			line := lines.Text()
			mu.Lock()
			out.WriteString(line + "\n")
			if m := runningAt.FindStringSubmatch(line); m != nil {
				appURL = m[1]
			}
			if m := idpAt.FindStringSubmatch(line); m != nil {
				issuer = m[1]
			}
			mu.Unlock()
			if strings.HasPrefix(line, "Press Ctrl-C") {
				close(banner)
			}
		}
	}()
	output = func() string {
		mu.Lock()
		defer mu.Unlock()
		return out.String() + stderr.String()
	}
	select {
	case <-banner:
	case <-time.After(devStartDeadline):
		t.Fatalf("gantry dev did not come up:\n%s", output())
	}
	mu.Lock()
	defer mu.Unlock()
	require.NotEmpty(t, appURL)
	return cmd, appURL, issuer, output
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
		cmd, appURL, issuer, output := startDev(t, dataDir)
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
		require.Contains(t, output(), "default executor: tofu/", "dev runs live OpenTofu by default")
		if start == 2 {
			devRunSucceeds(t, appURL, issuer, output)
		}

		require.NoError(t, cmd.Process.Signal(syscall.SIGINT))
		require.NoError(t, cmd.Wait(), output())
		require.Contains(t, output(), "Stopped.")
		_, err = os.Stat(filepath.Join(dataDir, "postgres", "postmaster.pid"))
		require.True(t, os.IsNotExist(err), "postgres still running after Ctrl-C (start %d)", start)
		_, err = os.Stat(filepath.Join(dataDir, "postgres", "PG_VERSION"))
		require.NoError(t, err, "the cluster stays for the next start")
	}
}

// devStartDeadline bounds the wait for a start's banner (a busy CI machine is slow to
// initialise PostgreSQL).
const devStartDeadline = 90 * time.Second

// TestColdDevServesBeforeTheOpenTofuBuild: a cold `gantry dev` (no data directory, no
// OpenTofu binary) serves /healthz and the sign-in page while OpenTofu is still being
// built, and a live run requested meanwhile waits in QUEUED, saying so, then completes
// once the build is done. The build is held by a stand-in for the go command that waits
// for the test to open a gate, so the order is certain: a portal that waited for the
// build would never answer.
func TestColdDevServesBeforeTheOpenTofuBuild(t *testing.T) {
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

	cmd, appURL, issuer, output := startDev(t, dataDir, "PATH="+wrapper+":"+os.Getenv("PATH"), "GANTRY_BIN_DIR="+binDir)
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
	require.NotContains(t, output(), "the OpenTofu toolchain is ready")

	app := &webtest.App{URL: appURL, Issuer: issuer}
	admin := app.LoggedIn(t, "admin@acme.test")
	executors := webtest.ReadBody(t, app.Get(t, admin, "/executors"))
	require.Contains(t, executors, `data-testid="executor-preparing"`)
	require.Contains(t, executors, "Waiting for the OpenTofu build (")

	c := app.LoggedIn(t, "operator@acme.test")
	runID := devRequestBucket(t, app, c, "cold-start")
	// The plan job finds the executor preparing more than once: the run waits.
	deadline := time.Now().Add(30 * time.Second)
	var page string
	for time.Now().Before(deadline) {
		page = webtest.ReadBody(t, app.Get(t, c, "/runs/"+runID))
		if strings.Contains(page, "Waiting for the OpenTofu build (") {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	require.Contains(t, page, `data-testid="run-state">QUEUED<`)
	require.Contains(t, page, `data-testid="executor-wait"`)
	require.Regexp(t, `Waiting for the OpenTofu build \(\d+ %\)`, page)

	// The build really is being held (not merely not finished yet).
	require.Eventually(t, func() bool { _, err := os.Stat(held); return err == nil }, 5*time.Minute, 100*time.Millisecond,
		"the OpenTofu build never reached the gate:\n%s", output())
	require.NoError(t, os.WriteFile(gate, nil, 0o644))
	devRunEnds(t, app, c, runID, "SUCCEEDED", output)
	_, err = os.Stat(filepath.Join(binDir, "tofu"))
	require.NoError(t, err, "the build finished into --bin-dir")
	require.Contains(t, output(), "the OpenTofu toolchain is ready")
	require.NoError(t, cmd.Process.Signal(syscall.SIGINT))
	require.NoError(t, cmd.Wait(), output())
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

// devRunEnds waits (at most five minutes: a build may be in front of it) for the run to
// end and requires it to end in want.
func devRunEnds(t testing.TB, app *webtest.App, c *http.Client, runID, want string, output func() string) string {
	t.Helper()
	var state, page string
	deadline := time.Now().Add(5 * time.Minute)
	for time.Now().Before(deadline) {
		page = webtest.ReadBody(t, app.Get(t, c, "/runs/"+runID))
		if s := runState.FindStringSubmatch(page); s != nil {
			state = s[1]
		}
		if state == "SUCCEEDED" || state == "FAILED" {
			break
		}
		time.Sleep(200 * time.Millisecond)
	}
	require.Equal(t, want, state, "run page:\n%s\n%s", page, output())
	return page
}

var runState = regexp.MustCompile(`data-testid="run-state">([A-Z_]+)<`)
var runLocation = regexp.MustCompile(`^/runs/(run-[a-z0-9]+)$`)

// devRunSucceeds signs in to a running `gantry dev` as the demo operator and runs a
// bucket in development (self-service) on the default executor: live OpenTofu against
// the embedded sandbox cloud, through dev's sockets and state backend.
func devRunSucceeds(t *testing.T, appURL, issuer string, output func() string) {
	t.Helper()
	app := &webtest.App{URL: appURL, Issuer: issuer}
	c := app.LoggedIn(t, "operator@acme.test")
	page := devRunEnds(t, app, c, devRequestBucket(t, app, c, "dev-smoke"), "SUCCEEDED", output)
	require.NotContains(t, page, "SIMULATED")
	require.Regexp(t, `data-testid="executor">tofu/(oci · isolated \(runc\)|process · not isolated)<`, page)
}
