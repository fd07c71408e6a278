//go:build !fast

// Live: needs runc (as root) and live OpenTofu (bin/tofu, built from tools/tofu).

package tofurun_test

import (
	"bytes"
	"context"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"gantry/runner"
	"gantry/runner/oci"
	"gantry/runner/tofu"
	"gantry/runner/tofurun"
)

// TestOCIPlanApply runs the postgres template's plan and apply through the OCI
// executor: the state backend is reached through fwd, the cloud through its socket,
// the credentials arrive as environment only.
func TestOCIPlanApply(t *testing.T) {
	e := setupOCI(t)
	o := e.newOCI(t, oci.Limits{MemoryBytes: 512 << 20, Pids: 256, CPUs: 1}, 2*time.Minute)
	require.Equal(t, "oci", o.Name())
	require.True(t, o.Isolated())
	require.NoError(t, o.Health(t.Context()))
	r := tofurun.New(o, filepath.Join(e.dir, "work"), &tofu.PluginCache{Mirror: e.tc.Mirror, Root: filepath.Join(e.dir, "plugins")})
	require.Equal(t, "tofu/oci", r.Name())

	var live bytes.Buffer // the worker's live log, as the output arrives
	plan, err := r.Plan(t.Context(), runner.PlanRequest{RunID: "run-1", WorkspaceID: workspaceID, Kind: runner.KindApply,
		Config: e.config, Credentials: e.creds(t, "plan", "read"), Log: &live})
	require.NoError(t, err, "%s", plan.Log)
	require.Equal(t, string(plan.Log), live.String(), "the live log gets everything the phase's log has, as it is written")
	require.True(t, plan.HasChanges)
	require.Contains(t, string(plan.Log), "from the shared cache directory")
	require.NotContains(t, string(plan.Log), "tofu validate", "plan validates; no separate process")
	require.Contains(t, string(plan.Log), "Plan: 3 to add, 0 to change, 0 to destroy.")
	require.Contains(t, string(plan.PlanJSON), `"sandbox_database"`)

	apply, err := r.Apply(t.Context(), runner.ApplyRequest{RunID: "run-1", WorkspaceID: workspaceID, Config: e.config,
		PlanFile: plan.PlanFile, Credentials: e.creds(t, "apply", "write")})
	require.NoError(t, err, "%s", apply.Log)
	require.Contains(t, string(apply.Outputs), "orders.db.sandbox.internal:5432")
	e.state.mu.Lock()
	state, calls := e.state.state, strings.Join(e.state.calls, "\n")
	e.state.mu.Unlock()
	require.Contains(t, string(state), "sandbox_database", calls)
	require.Contains(t, calls, "LOCK /state/ws-1/lock")

	// The secrets are nowhere on disk (the job directories are gone; the rootfs and the
	// executor's roots never saw them).
	for _, root := range []string{e.dir} {
		_ = filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
			if err == nil && d.Type().IsRegular() {
				b, _ := os.ReadFile(p)
				for _, s := range []string{statePass} {
					require.False(t, bytes.Contains(b, []byte(s)), "secret in %s", p)
				}
			}
			return nil
		})
	}
	e.assertClean(t)
}

// TestOCIRunDetails: the files tofu creates in the workdir are given back to its
// owner, the environment is exactly the documented one, and limits are explained.
func TestOCIRunDetails(t *testing.T) {
	e := setupOCI(t)
	o := e.newOCI(t, oci.Limits{}, time.Minute)

	const mainTF = `terraform {
  required_providers {
    sandbox = {
      source  = "portal.local/sandbox/sandbox"
      version = "0.1.0"
    }
  }
}
`
	work := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(work, "main.tf"), []byte(mainTF), 0o644))
	require.NoError(t, os.WriteFile(filepath.Join(work, ".terraform.lock.hcl"), e.tc.Lock.File(), 0o644))
	var out bytes.Buffer
	code, explain, err := o.Run(t.Context(), work, tofurun.Command{Args: []string{"init", "-no-color", "-lockfile=readonly"},
		Secrets: map[string]string{"SANDBOX_TOKEN": "tok"}, Stdout: &out, Stderr: &out})
	require.NoError(t, err)
	require.Equal(t, 0, code, out.String())
	require.Empty(t, explain)
	n := 0
	require.NoError(t, filepath.WalkDir(work, func(p string, d fs.DirEntry, err error) error {
		require.NoError(t, err)
		info, err := d.Info()
		require.NoError(t, err)
		st := info.Sys().(*syscall.Stat_t)
		require.Equal(t, uint32(os.Geteuid()), st.Uid, "owner of %s", p)
		n++
		return nil
	}))
	require.Greater(t, n, 5, "tofu init installed the provider into .terraform")
	// The provider was extracted, not symlinked to the mirror (packed mirror).
	var links []string
	filepath.WalkDir(filepath.Join(work, ".terraform"), func(p string, d fs.DirEntry, err error) error {
		if err == nil && d.Type()&fs.ModeSymlink != 0 {
			links = append(links, p)
		}
		return nil
	})
	require.Empty(t, links)

	// With a plugin cache, init links the provider from it (mounted read-only) instead.
	plugins := &tofu.PluginCache{Mirror: e.tc.Mirror, Root: filepath.Join(e.dir, "plugins-details")}
	cacheDir, err := plugins.Dir(e.tc.Lock.File())
	require.NoError(t, err)
	cached := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(cached, "main.tf"), []byte(mainTF), 0o644))
	require.NoError(t, os.WriteFile(filepath.Join(cached, ".terraform.lock.hcl"), e.tc.Lock.File(), 0o644))
	out.Reset()
	code, _, err = o.Run(t.Context(), cached, tofurun.Command{Args: []string{"init", "-no-color", "-lockfile=readonly"},
		Stdout: &out, Stderr: &out, PluginCache: cacheDir})
	require.NoError(t, err)
	require.Equal(t, 0, code, out.String())
	require.Contains(t, out.String(), "Using portal.local/sandbox/sandbox v0.1.0 from the shared cache directory")
	link, err := os.Readlink(filepath.Join(cached, ".terraform/providers/portal.local/sandbox/sandbox/0.1.0/linux_amd64"))
	require.NoError(t, err)
	require.True(t, strings.HasPrefix(link, "/tofu/plugin-cache/"), link)

	// A cache whose provider no longer matches the lock file: tofu would reinstall it
	// into the cache, which the job cannot write.
	bin := filepath.Join(cacheDir, "portal.local/sandbox/sandbox/0.1.0/linux_amd64/terraform-provider-sandbox_v0.1.0")
	f, err := os.OpenFile(bin, os.O_APPEND|os.O_WRONLY, 0)
	require.NoError(t, err)
	_, err = f.WriteString("tampered")
	require.NoError(t, err)
	require.NoError(t, f.Close())
	tampered := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(tampered, "main.tf"), []byte(mainTF), 0o644))
	require.NoError(t, os.WriteFile(filepath.Join(tampered, ".terraform.lock.hcl"), e.tc.Lock.File(), 0o644))
	out.Reset()
	code, _, err = o.Run(t.Context(), tampered, tofurun.Command{Args: []string{"init", "-no-color", "-lockfile=readonly"},
		Stdout: &out, Stderr: &out, PluginCache: cacheDir})
	require.NoError(t, err)
	require.NotZero(t, code, out.String())
	require.Contains(t, out.String(), "read-only file system")

	// A command that exits non-zero: its code, no explanation.
	out.Reset()
	code, explain, err = o.Run(t.Context(), work, tofurun.Command{Args: []string{"no-such-command"}, Stdout: &out, Stderr: &out})
	require.NoError(t, err)
	require.NotZero(t, code, out.String())
	require.Empty(t, explain)

	// Limits.
	for _, tc := range []struct {
		name    string
		limits  oci.Limits
		timeout time.Duration
		want    string
	}{
		{"memory", oci.Limits{MemoryBytes: 8 << 20}, time.Minute, "exceeded its memory limit of 8 MiB"},
		{"time", oci.Limits{}, 100 * time.Millisecond, "exceeded its time limit of 100ms"},
		{"pids", oci.Limits{Pids: 10}, time.Minute, "pids limit of 10"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			lo := e.newOCI(t, tc.limits, tc.timeout)
			w := t.TempDir()
			require.NoError(t, os.CopyFS(w, os.DirFS(work)))
			require.NoError(t, os.RemoveAll(filepath.Join(w, ".terraform")))
			var out bytes.Buffer
			code, explain, err := lo.Run(t.Context(), w, tofurun.Command{Args: []string{"init", "-no-color", "-lockfile=readonly"}, Stdout: &out, Stderr: &out})
			require.NoError(t, err)
			t.Logf("exit %d: %s\n%s", code, explain, out.String())
			require.NotZero(t, code)
			require.Contains(t, explain, tc.want)
		})
	}

	// Cancelling the job's context ends the container and says so. It is cancelled at
	// tofu's first output, so the container is known to run (init goes on for a while:
	// it installs the providers).
	ctx, cancel := context.WithCancel(t.Context())
	out.Reset()
	w := t.TempDir()
	require.NoError(t, os.CopyFS(w, os.DirFS(work)))
	require.NoError(t, os.RemoveAll(filepath.Join(w, ".terraform")))
	running := &cancelOnWrite{w: &out, cancel: cancel}
	_, explain, err = o.Run(ctx, w, tofurun.Command{Args: []string{"init", "-no-color", "-lockfile=readonly"}, Stdout: running, Stderr: running})
	require.NoError(t, err)
	require.Contains(t, explain, "cancelled")
	e.assertClean(t)

	// Health names a socket the job's uid cannot connect to.
	require.NoError(t, os.Chmod(e.stateSk, 0o600))
	err = o.Health(t.Context())
	require.ErrorContains(t, err, "chmod 0666")
	require.NoError(t, os.Chmod(e.stateSk, 0o666))
	require.NoError(t, o.Health(t.Context()))
}

// cancelOnWrite passes output on to w and cancels at its first write: the event that
// the job's container runs.
type cancelOnWrite struct {
	mu     sync.Mutex // stdout and stderr may be copied on goroutines of their own
	w      io.Writer
	cancel context.CancelFunc
}

func (c *cancelOnWrite) Write(p []byte) (int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.cancel()
	return c.w.Write(p)
}

type timedExec struct {
	tofurun.Executor
	times map[string]time.Duration
}

func (x *timedExec) Run(ctx context.Context, workdir string, c tofurun.Command) (int, string, error) {
	start := time.Now()
	code, explain, err := x.Executor.Run(ctx, workdir, c)
	if x.times == nil {
		x.times = map[string]time.Duration{}
	}
	x.times[c.Args[0]] = time.Since(start)
	return code, explain, err
}

func mean(ds []time.Duration) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	var sum time.Duration
	for _, d := range ds {
		sum += d
	}
	return (sum / time.Duration(len(ds))).Round(time.Millisecond)
}
