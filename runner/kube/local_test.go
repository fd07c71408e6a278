//go:build !fast

// Live: needs live OpenTofu (bin/tofu, built from tools/tofu) and gantry-phase built from source.

package kube_test

// localLauncher runs each phase's gantry-phase as a local process instead of a pod:
// the same binary, against the same phase endpoint, with the same Secret files (in a
// 0700 directory) and environment, so the protocol is tested end to end with real
// OpenTofu before any cluster is involved.

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"

	"github.com/stretchr/testify/require"

	"gantry/runner/kube"
	"gantry/runner/tofu"
)

type localLauncher struct {
	bin  string
	tc   tofu.Toolchain
	root string
	// killOn, when set, SIGKILLs a phase's gantry-phase (and so its tofu) as soon as its
	// log shows the phase's string, once per phase: a pod deleted mid-phase.
	killOn map[string]string
	// killAfter, for a phase of killOn, delays the kill until the channel is closed (the
	// cloud has made its first change): a kill that lands mid-apply, not before it.
	killAfter map[string]<-chan struct{}

	mu      sync.Mutex
	started []kube.PodSpec
}

func newLocalLauncher(t testing.TB, tc tofu.Toolchain, root string) *localLauncher {
	t.Helper()
	bin, err := kube.BuildPhase(t.Context(), root, t.TempDir())
	require.NoError(t, err)
	// A short root: go-plugin's unix sockets live in the job's TMPDIR below it, and a
	// socket path may not be longer than 107 bytes (a pod's is /work/jobs/job-…/.home).
	pods, err := os.MkdirTemp("", "gp-")
	require.NoError(t, err)
	t.Cleanup(func() { os.RemoveAll(pods) })
	return &localLauncher{bin: bin, tc: tc, root: pods}
}

func (l *localLauncher) Health(context.Context) error {
	_, err := os.Stat(l.bin)
	return err
}

func (l *localLauncher) Launch(ctx context.Context, spec kube.PodSpec) (kube.Pod, error) {
	dir, err := os.MkdirTemp(l.root, spec.Phase+"-")
	if err != nil {
		return nil, err
	}
	secrets := filepath.Join(dir, "secrets")
	if err := os.Mkdir(secrets, 0o700); err != nil {
		return nil, err
	}
	for name, v := range spec.Secrets {
		if err := os.WriteFile(filepath.Join(secrets, name), v, 0o400); err != nil {
			return nil, err
		}
	}
	p := &localPod{dir: dir, term: filepath.Join(dir, "termination-log"), done: make(chan struct{})}
	cmd := exec.Command(l.bin, "-secrets", secrets, "-work", filepath.Join(dir, "work"), "-tofu", l.tc.Tofu,
		"-cli-config", l.tc.CLIConfig, "-mirror", l.tc.Mirror, "-plugin-cache", "", "-termination-log", p.term)
	cmd.Env = []string{"PATH=/usr/bin:/bin"}
	for k, v := range spec.Env {
		cmd.Env = append(cmd.Env, k+"="+v)
	}
	out := spec.Log
	l.mu.Lock()
	watch, after := l.killOn[spec.Phase], l.killAfter[spec.Phase]
	delete(l.killOn, spec.Phase) // once: the next attempt runs to its end
	l.mu.Unlock()
	if watch != "" {
		kill := p.kill
		if after != nil {
			var once sync.Once
			kill = func() {
				once.Do(func() {
					go func() {
						select {
						case <-after:
							p.kill()
						case <-p.done:
						}
					}()
				})
			}
		}
		out = &killer{w: spec.Log, watch: []byte(watch), kill: kill}
	}
	cmd.Stdout, cmd.Stderr = out, out
	// Before Start: the killer may kill the pod from Start's output copying goroutine,
	// which exec starts once cmd.Process is set.
	p.cmd = cmd
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	l.mu.Lock()
	l.started = append(l.started, spec)
	l.mu.Unlock()
	go func() {
		p.err = cmd.Wait()
		close(p.done)
	}()
	return p, nil
}

// launched are the specs of the pods started so far.
func (l *localLauncher) launched() []kube.PodSpec {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]kube.PodSpec(nil), l.started...)
}

type localPod struct {
	cmd       *exec.Cmd
	dir, term string
	done      chan struct{}
	err       error
	once      sync.Once
}

func (p *localPod) kill() {
	p.once.Do(func() { _ = p.cmd.Process.Signal(syscall.SIGKILL) })
}

func (p *localPod) Wait(ctx context.Context) (kube.Exit, error) {
	select {
	case <-ctx.Done():
		return kube.Exit{}, ctx.Err()
	case <-p.done:
	}
	var exit *exec.ExitError
	switch {
	case p.err == nil:
		return kube.Exit{}, nil
	case errors.As(p.err, &exit):
		e := kube.Exit{ExitCode: exit.ExitCode()}
		if ws, ok := exit.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
			e.ExitCode = 128 + int(ws.Signal())
		}
		msg, _ := os.ReadFile(p.term)
		e.Message = strings.TrimSpace(string(msg))
		return e, nil
	}
	return kube.Exit{}, fmt.Errorf("gantry-phase: %w", p.err)
}

func (p *localPod) Delete(_ context.Context, wait bool) error {
	p.kill()
	if wait {
		<-p.done
	}
	return os.RemoveAll(p.dir)
}

// killer passes the log on and kills the pod once the log shows watch.
type killer struct {
	w     interface{ Write([]byte) (int, error) }
	watch []byte
	kill  func()
	mu    sync.Mutex
	seen  []byte
}

func (k *killer) Write(p []byte) (int, error) {
	n, err := k.w.Write(p)
	k.mu.Lock()
	k.seen = append(k.seen, p...)
	hit := bytes.Contains(k.seen, k.watch)
	k.mu.Unlock()
	if hit {
		k.kill()
	}
	return n, err
}
