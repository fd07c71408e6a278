package main

import (
	"encoding/json"
	"net"
	"net/http/httptest"
	"os"
	"os/exec"
	"testing"

	"github.com/stretchr/testify/require"

	"gantry/web/devidp"
)

// startPortal runs this test binary as `gantry serve` (see TestMain) and returns it
// with its output, which the test may read while it runs.
func startPortal(t *testing.T, env []string, args ...string) (*exec.Cmd, *syncBuffer) {
	t.Helper()
	encoded, err := json.Marshal(append([]string{"serve"}, args...))
	require.NoError(t, err)
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	// Each portal's metrics on a free port of its own (the default one is shared).
	cmd.Env = append(os.Environ(), append(append([]string{"GANTRY_METRICS_ADDR=127.0.0.1:0"}, env...), "GANTRY_TEST_MAIN=1", "GANTRY_TEST_ARGS="+string(encoded))...)
	out := &syncBuffer{}
	cmd.Stdout, cmd.Stderr = out, out
	require.NoError(t, cmd.Start())
	t.Cleanup(func() {
		if cmd.ProcessState == nil {
			_ = cmd.Process.Kill()
			_ = cmd.Wait()
		}
	})
	return cmd, out
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
