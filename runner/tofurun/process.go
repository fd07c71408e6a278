package tofurun

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"syscall"
	"time"

	"gantry/runner/tofu"
)

// Process runs tofu as a plain child process of the portal: the development executor.
// It is NOT isolated: the job shares the portal's user, filesystem and network, so pages
// label its runs "not isolated". Credentials still reach tofu only as environment and
// the job's secret files (its workload token).
type Process struct {
	Tofu string // path of the pinned tofu binary
	// CLIConfig is the CLI configuration (filesystem mirror only).
	CLIConfig string
	// CloudEndpoint is SANDBOX_ENDPOINT as seen from the host.
	CloudEndpoint string
	// Grace is how long a cancelled job's tofu has to stop by itself after its interrupt
	// before it is killed (zero: StopGrace).
	Grace time.Duration
}

// StopGrace is how long OpenTofu gets to stop gracefully once interrupted: it finishes
// the provider calls under way, starts no new one and stores the state it wrote (an
// apply's, through the http backend) before it exits. Then the job is killed.
const StopGrace = 20 * time.Second

func (p *Process) grace() time.Duration {
	if p.Grace > 0 {
		return p.Grace
	}
	return StopGrace
}

// interruptThenKill makes cmd's cancellation (its context ending) stop tofu the way it
// expects, as a terminal's Ctrl-C does: SIGINT to the job's process group (tofu stops
// gracefully; the provider plugins, go-plugin servers, ignore it and are told to stop
// by tofu), then SIGKILL to the group once grace has passed; with no grace, SIGKILL at
// once. The returned func, called once cmd was waited for, disarms the kill (the group
// id may be reused).
func interruptThenKill(cmd *exec.Cmd, grace time.Duration) func() {
	if grace <= 0 {
		cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
		return func() {}
	}
	var mu sync.Mutex
	exited := false
	var timer *time.Timer
	cmd.Cancel = func() error {
		pgid := cmd.Process.Pid
		mu.Lock()
		timer = time.AfterFunc(grace, func() {
			mu.Lock()
			defer mu.Unlock()
			if !exited {
				_ = syscall.Kill(-pgid, syscall.SIGKILL)
			}
		})
		mu.Unlock()
		return syscall.Kill(-pgid, syscall.SIGINT)
	}
	// Wait returns only once tofu exited and its output pipes closed; a plugin that
	// outlives it keeps them open: killed with the group after grace, and the pipes
	// given up a moment later.
	cmd.WaitDelay = grace + 2*time.Second
	return func() {
		mu.Lock()
		defer mu.Unlock()
		exited = true
		if timer != nil {
			timer.Stop()
		}
	}
}

func (p *Process) Name() string   { return "process" }
func (p *Process) Isolated() bool { return false }

// Health checks that tofu runs.
func (p *Process) Health(ctx context.Context) error {
	out, err := exec.CommandContext(ctx, p.Tofu, "version").CombinedOutput()
	if err != nil {
		return fmt.Errorf("tofu version: %v: %s", err, out)
	}
	if _, err := os.Stat(p.CLIConfig); err != nil {
		return fmt.Errorf("CLI configuration: %w", err)
	}
	return nil
}

// Run runs tofu in workdir with nothing from the portal's environment but what
// tofu.Env sets, the cloud endpoint and the job's secrets.
func (p *Process) Run(ctx context.Context, workdir string, c Command) (int, string, error) {
	home := filepath.Join(workdir, ".home")
	if err := os.MkdirAll(home, 0o700); err != nil {
		return 0, "", err
	}
	cmd := exec.CommandContext(ctx, p.Tofu, c.Args...)
	cmd.Dir = workdir
	cmd.Env = append(tofu.Env(p.CLIConfig, home), "SANDBOX_ENDPOINT="+p.CloudEndpoint)
	if c.PluginCache != "" {
		cmd.Env = append(cmd.Env, "TF_PLUGIN_CACHE_DIR="+c.PluginCache)
	}
	for k, v := range c.Secrets {
		cmd.Env = append(cmd.Env, k+"="+v)
	}
	// The secret files are read where they are: the job runs as the portal's user.
	cmd.Env = append(cmd.Env, c.Files.Env()...)
	cmd.Stdout, cmd.Stderr = c.Stdout, c.Stderr
	// Its own process group, so a cancelled job takes the provider plugins with it; and
	// killed with the portal (Linux), so a dead portal leaves no tofu applying on alone.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	grace := time.Duration(0) // killed at once
	if c.Graceful {
		grace = p.grace()
	}
	stop := interruptThenKill(cmd, grace)
	err := cmd.Run()
	stop()
	var exit *exec.ExitError
	switch {
	case err == nil:
		return 0, "", nil
	case errors.As(err, &exit):
		if ctx.Err() != nil {
			return exitCode(exit), "the job was cancelled or exceeded its time limit", nil
		}
		return exitCode(exit), "", nil
	default:
		return 0, "", err
	}
}

func exitCode(e *exec.ExitError) int {
	if ws, ok := e.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		return 128 + int(ws.Signal())
	}
	return e.ExitCode()
}
