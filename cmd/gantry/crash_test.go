package main

import (
	"encoding/json"
	"net"
	"net/http/httptest"
	"os"
	"os/exec"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"gantry/bench"
	"gantry/web/devidp"
)

// process is a `gantry` command the test started (this test binary, see TestMain).
type process struct {
	cmd *exec.Cmd
	out *syncBuffer // its stdout and stderr
	// exited is closed once the process has ended and all its output is in out; err is
	// then what cmd.Wait returned. A test waiting for the process's work selects on it,
	// so a process that dies fails the wait at once instead of letting its budget run out.
	exited chan struct{}
	err    error
}

// startPortal runs this test binary as `gantry serve` (see TestMain) and returns it
// with its output, which the test may read (and wait on) while it runs.
func startPortal(t *testing.T, env []string, args ...string) *process {
	t.Helper()
	// Each portal's metrics on a free port of its own (the default one is shared).
	return startMain(t, append([]string{"GANTRY_METRICS_ADDR=127.0.0.1:0"}, env...), os.Kill, append([]string{"serve"}, args...)...)
}

// startMain runs this test binary as `gantry` with args (see TestMain), env added to its
// environment; the test's cleanup ends it with signal stop if it still runs, and waits
// for it.
func startMain(t testing.TB, env []string, stop os.Signal, args ...string) *process {
	t.Helper()
	encoded, err := json.Marshal(args)
	require.NoError(t, err)
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(append(os.Environ(), env...), "GANTRY_TEST_MAIN=1", "GANTRY_TEST_ARGS="+string(encoded))
	p := &process{cmd: cmd, out: newSyncBuffer(), exited: make(chan struct{})}
	cmd.Stdout, cmd.Stderr = p.out, p.out
	require.NoError(t, cmd.Start())
	// cmd.Wait is called here alone: stop, kill and the waits read exited and err.
	go func() {
		p.err = cmd.Wait()
		close(p.exited)
	}()
	t.Cleanup(func() {
		select {
		case <-p.exited:
		default:
			_ = cmd.Process.Signal(stop)
			<-p.exited
		}
	})
	return p
}

// alive fails the test at once, saying so, when the process has exited: a wait for its
// work (what says what the test waited for) would otherwise only run out of budget.
func (p *process) alive(t testing.TB, what string) {
	t.Helper()
	select {
	case <-p.exited:
		t.Fatalf("waiting for %s: the process exited (%v):\n%s", what, p.err, p.out)
	default:
	}
}

// waitExit waits for the process to end, within base of idle-machine time, and returns
// what cmd.Wait returned.
func (p *process) waitExit(t testing.TB, base time.Duration) error {
	t.Helper()
	bench.Receive(t, "the process to exit", base, p.exited)
	return p.err
}

// startTestIssuer runs an OpenID Provider for the portal to discover at start; it knows
// the demo users (gantry dev's, with their passwords), so a test can sign in for real
// at a portal whose base URL is the default of replicas.start.
func startTestIssuer(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	issuer := "http://" + ln.Addr().String()
	idp, err := devidp.New(devidp.Config{Issuer: issuer, Clients: []devidp.Client{{ID: "gantry", Secret: "s", RedirectURIs: []string{"http://127.0.0.1:1/auth/callback"}}},
		Users: append(devUsers(), devidp.User{Subject: "u", Email: "u@example.test", Password: "p"})})
	require.NoError(t, err)
	srv := httptest.NewUnstartedServer(idp)
	srv.Listener.Close()
	srv.Listener = ln
	srv.Start()
	t.Cleanup(srv.Close)
	return issuer
}
