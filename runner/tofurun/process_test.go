//go:build !fast

// Live: needs process groups to signal: a shell runs as the process executor's job
// (tofurun.Process), signalled as tofu would be; no tofu.

package tofurun_test

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"gantry/bench"
	"gantry/runner/tofurun"
	"gantry/syncio"
)

// TestProcessStopsAsCtrlCDoes: a cancelled apply is interrupted first (SIGINT to its
// process group, what tofu stops gracefully at), so a program that handles it exits by
// itself; one that ignores it is killed once the grace period has passed. Any other
// command (a plan) is killed at once. The program
// is a shell standing in for tofu (this test needs no tofu).
func TestProcessStopsAsCtrlCDoes(t *testing.T) {
	t.Parallel()
	handles := `trap 'echo interrupted, storing the state; exit 3' INT; echo started; while :; do sleep 0.05; done`
	for _, c := range []struct {
		name, script string
		graceful     bool // an apply
		exit         int
		says         string
	}{
		{"handles the interrupt", handles, true, 3, "interrupted, storing the state"},
		{"ignores the interrupt", `trap '' INT; echo started; while :; do sleep 0.05; done`, true, 128 + 9, ""},
		{"not an apply: killed at once", handles, false, 128 + 9, ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
			cli := filepath.Join(dir, "cli.tfrc")
			require.NoError(t, os.WriteFile(cli, nil, 0o600))
			p := &tofurun.Process{Tofu: "/bin/sh", CLIConfig: cli, Grace: 500 * time.Millisecond}
			ctx, cancel := context.WithCancel(context.Background())
			var out syncio.Buffer
			type result struct {
				code int
				err  error
			}
			done := make(chan result, 1)
			go func() {
				code, _, err := p.Run(ctx, dir, tofurun.Command{Args: []string{"-c", c.script}, Stdout: &out, Stderr: &out, Graceful: c.graceful})
				done <- result{code, err}
			}()
			bench.Eventually(t, "the program to start", 10*time.Second, func() (bool, any) {
				return len(out.Bytes()) > 0, out.String()
			}, bench.Poll(10*time.Millisecond))
			cancel()
			res := bench.Receive(t, "the cancelled program to end", 10*time.Second, done)
			require.NoError(t, res.err)
			require.Equal(t, c.exit, res.code, out.String())
			require.Contains(t, out.String(), c.says)
			if !c.graceful {
				require.NotContains(t, out.String(), "interrupted", "a plan is not interrupted, it is killed")
			}
		})
	}
}
