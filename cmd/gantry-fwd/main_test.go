package main

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

var fwdBin string

// TestMain builds the helper the way the rootfs gets it (static, stripped), or acts as
// the TCP client child when GANTRY_FWD_TEST_CLIENT is set.
func TestMain(m *testing.M) {
	if addr := os.Getenv("GANTRY_FWD_TEST_CLIENT"); addr != "" {
		os.Exit(client(addr))
	}
	dir, err := os.MkdirTemp("", "gantry-fwd-test-")
	if err != nil {
		panic(err)
	}
	fwdBin = filepath.Join(dir, "fwd")
	build := exec.Command("go", "build", "-trimpath", "-ldflags", "-s -w", "-o", fwdBin, ".")
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := build.CombinedOutput(); err != nil {
		fmt.Fprintf(os.Stderr, "build fwd: %v\n%s", err, out)
		os.Exit(1)
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

func client(addr string) int {
	c, err := net.Dial("tcp", addr)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	defer c.Close()
	fmt.Fprint(c, "ping")
	c.(*net.TCPConn).CloseWrite()
	b, err := io.ReadAll(c)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	fmt.Print(string(b))
	return 0
}

func runFwd(t *testing.T, env []string, args ...string) (string, int) {
	t.Helper()
	cmd := exec.Command(fwdBin, args...)
	cmd.Env = env
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	var ee *exec.ExitError
	if err != nil && !errors.As(err, &ee) {
		t.Fatal(err)
	}
	return out.String(), cmd.ProcessState.ExitCode()
}

func TestExitCodes(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want int
	}{
		{[]string{"--", "/bin/sh", "-c", "exit 0"}, 0},
		{[]string{"--", "/bin/sh", "-c", "exit 3"}, 3},
		{[]string{"--", "/bin/sh", "-c", "kill -TERM $$"}, 143},
		{[]string{"--", "/bin/sh", "-c", "kill -KILL $$"}, 137},
		{[]string{"--", "/nonexistent/prog"}, 127},
		{[]string{}, 125},
		{[]string{"-listen", "127.0.0.1:0", "--", "/bin/true"}, 125}, // -listen without -unix
		{[]string{"-secret-env", "X=/nonexistent", "--", "/bin/true"}, 125},
	} {
		out, code := runFwd(t, nil, tc.args...)
		if code != tc.want {
			t.Errorf("fwd %q: exit %d, want %d (output %q)", tc.args, code, tc.want, out)
		}
	}
}

func TestSecretEnv(t *testing.T) {
	dir := t.TempDir()
	f := filepath.Join(dir, "token")
	if err := os.WriteFile(f, []byte("sbx-SECRET\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	out, code := runFwd(t, []string{"TOKEN=old", "KEEP=1"}, "-secret-env", "TOKEN="+f, "--", "/bin/sh", "-c", `printf '%s|%s' "$TOKEN" "$KEEP"`)
	if code != 0 || out != "sbx-SECRET|1" {
		t.Fatalf("got %q exit %d", out, code)
	}
}

func TestForwardsSignals(t *testing.T) {
	cmd := exec.Command(fwdBin, "--", "/bin/sh", "-c", `trap 'exit 7' TERM; echo ready; while :; do sleep 0.05; done`)
	out, _ := cmd.StdoutPipe()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 6)
	if _, err := io.ReadFull(out, buf); err != nil {
		t.Fatal(err)
	}
	_ = cmd.Process.Signal(syscall.SIGTERM)
	_ = cmd.Wait()
	if code := cmd.ProcessState.ExitCode(); code != 7 {
		t.Fatalf("exit %d, want 7 (the child's trap)", code)
	}
}

func TestForwardsTCPToUnix(t *testing.T) {
	dir := t.TempDir()
	sock := filepath.Join(dir, "state.sock")
	ln, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				b, _ := io.ReadAll(c)
				fmt.Fprintf(c, "echo:%s", b)
			}()
		}
	}()
	// A free port for fwd's listener.
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()

	self, _ := os.Executable()
	start := time.Now()
	out, code := runFwd(t, []string{"GANTRY_FWD_TEST_CLIENT=" + addr}, "-listen", addr, "-unix", sock, "--", self)
	if code != 0 || strings.TrimSpace(out) != "echo:ping" {
		t.Fatalf("got %q exit %d", out, code)
	}
	t.Logf("round trip through fwd in %s", time.Since(start))
}
