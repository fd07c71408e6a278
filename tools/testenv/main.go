// Command testenv runs a command with TEST_DATABASE_URL pointing at a
// PostgreSQL server, for the Taskfile:
//
//	go run ./tools/testenv -- go test ./...
//
// If TEST_DATABASE_URL is already set, the command simply runs with it.
// Otherwise testenv starts a throwaway cluster (fsync off) in a temp dir,
// shares it with the whole command (so every test binary reuses one server
// and one migrated template), and removes it when the command exits. The
// exit code is the command's.
//
// The machine's Kubernetes test cluster is started by the first test that
// needs it (runner/kube/kubecluster/kubetest, in /var/lib/gantry/k8s); when
// the command exits, testenv stops it if the tests started it and no other
// test run on the machine still goes on, so a test run leaves no cluster
// behind but keeps one a developer started with `task k8s:up`.
package main

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"syscall"
	"time"

	"gantry/models/db/pgcluster"
	"gantry/runner/kube/kubecluster"
)

func main() { os.Exit(run(os.Args[1:])) }

func run(args []string) int {
	if len(args) > 0 && args[0] == "--" {
		args = args[1:]
	}
	if len(args) == 0 {
		fmt.Fprintln(os.Stderr, "usage: go run ./tools/testenv -- <command> [args...]")
		return 2
	}
	// Resolve the command first: no point starting postgres for a typo.
	cmd := exec.Command(args[0], args[1:]...)
	if cmd.Err != nil {
		fmt.Fprintf(os.Stderr, "testenv: running %s: %v\n", args[0], cmd.Err)
		return 127
	}
	// Catch signals from the start: dying on Ctrl-C while the cluster runs
	// would leave postgres and its temp dir behind.
	sigs := make(chan os.Signal, 4)
	signal.Notify(sigs, os.Interrupt, syscall.SIGTERM)
	defer signal.Stop(sigs)

	env := os.Environ()
	if raw := os.Getenv("TEST_DATABASE_URL"); raw != "" {
		fmt.Fprintf(os.Stderr, "testenv: using TEST_DATABASE_URL from the environment: %s\n", redact(raw))
	} else {
		dir, err := pgcluster.MkdirTemp("gantry-testenv-")
		if err != nil {
			fmt.Fprintf(os.Stderr, "testenv: %v\n", err)
			return 1
		}
		defer os.RemoveAll(dir)
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		cluster, err := pgcluster.Start(ctx, pgcluster.Options{Dir: filepath.Join(dir, "data"), Fast: true})
		cancel()
		if err != nil {
			fmt.Fprintf(os.Stderr, "testenv: starting throwaway postgres (or set TEST_DATABASE_URL): %v\n", err)
			return 1
		}
		defer func() {
			if err := cluster.Stop(); err != nil {
				fmt.Fprintf(os.Stderr, "testenv: %v\n", err)
			}
		}()
		env = append(env, "TEST_DATABASE_URL="+cluster.URL("postgres"))
		fmt.Fprintf(os.Stderr, "testenv: using throwaway PostgreSQL %s (data in %s, removed on exit)\n", cluster.URL("postgres"), dir)
	}
	// A signal that arrived while the cluster was starting cancels the run.
	select {
	case sig := <-sigs:
		return 128 + int(sig.(syscall.Signal))
	default:
	}
	cmd.Env = env
	// The machine's Kubernetes test cluster is started by the first test that needs it. This
	// run counts among the machine's test runs until it ends; the last run to end stops a
	// cluster the tests started, and leaves one a developer started with k8s:up.
	k8sDir := kubecluster.DefaultDir()
	testRun, joinErr := kubecluster.JoinTestRun(k8sDir)
	code := runChild(cmd, sigs)
	if joinErr != nil {
		// Not root, say: no test here could have started the cluster either.
		return code
	}
	last := testRun.Leave()
	defer testRun.Close()
	switch {
	case !kubecluster.Running(k8sDir) || kubecluster.StartedBy(k8sDir) != kubecluster.OwnerTests:
	case !last:
		fmt.Fprintf(os.Stderr, "testenv: left the Kubernetes test cluster (%s) running: another test run on this machine uses it, and the last to end stops it\n", k8sDir)
	default:
		if err := stopKubernetes(k8sDir); err != nil {
			fmt.Fprintf(os.Stderr, "testenv: stopping the Kubernetes test cluster the tests started: %v\n", err)
			return max(code, 1)
		}
		fmt.Fprintf(os.Stderr, "testenv: stopped the Kubernetes test cluster the tests started (%s)\n", k8sDir)
	}
	return code
}

// stopKubernetes stops the test cluster in dir once no test (of this run or another one,
// plain `go test` included) uses it.
func stopKubernetes(dir string) error {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	unlock, err := kubecluster.LockUsers(ctx, dir, true, "tools/testenv at the end of its run", os.Stderr)
	if err != nil {
		return err
	}
	defer unlock()
	return kubecluster.Stop(ctx, dir)
}

// runChild runs the command with our stdio and relays SIGINT/SIGTERM to it.
// On a terminal, Ctrl-C reaches the child directly as well (same process
// group); the relay matters for signals sent to testenv alone, e.g. by CI.
func runChild(cmd *exec.Cmd, sigs <-chan os.Signal) int {
	cmd.Stdin, cmd.Stdout, cmd.Stderr = os.Stdin, os.Stdout, os.Stderr
	if err := cmd.Start(); err != nil {
		fmt.Fprintf(os.Stderr, "testenv: running %s: %v\n", cmd.Path, err)
		return 127
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	for {
		select {
		case sig := <-sigs:
			_ = cmd.Process.Signal(sig)
		case err := <-done:
			return exitCode(err)
		}
	}
}

// exitCode mirrors the child's exit status, using the shell's 128+signal
// convention when it was killed by a signal.
func exitCode(err error) int {
	if err == nil {
		return 0
	}
	var exitErr *exec.ExitError
	if !errors.As(err, &exitErr) {
		fmt.Fprintf(os.Stderr, "testenv: %v\n", err)
		return 1
	}
	if ws, ok := exitErr.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		return 128 + int(ws.Signal())
	}
	return exitErr.ExitCode()
}

// redact hides a password in the URL we print.
func redact(raw string) string {
	u, err := url.Parse(raw)
	if err != nil {
		return "(unparsable URL)"
	}
	return u.Redacted()
}
