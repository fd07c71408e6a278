package pgcluster

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"time"
)

// Stopping and restarting a running cluster.

// Stop shuts the server down (pg_ctl stop -m fast), also one that Start found
// running and reused. Calling it again, or on a server that is already down,
// is a no-op.
func (c *Cluster) Stop() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.done {
		return nil
	}
	out, err := c.command(context.Background(), filepath.Join(c.bin, "pg_ctl"),
		"-w", "-t", "60", "-D", c.dir, "-m", "fast", "stop").CombinedOutput()
	if err != nil {
		if _, running := runningPort(c.dir); running {
			return fmt.Errorf("stopping postgres: %w: %s", err, strings.TrimSpace(string(out)))
		}
	}
	c.done = true
	return nil
}

// Restart stops the server with pg_ctl's shutdown mode ("fast": sessions are ended
// and the server shuts down cleanly; "immediate": it quits at once, like a crash, and
// recovers from its WAL at start) and starts it again on the same port, after pause.
// The reliability tests restart the database under a working portal with it.
func (c *Cluster) Restart(ctx context.Context, mode string, pause time.Duration) error {
	if mode != "fast" && mode != "immediate" {
		return fmt.Errorf("restarting postgres: unknown shutdown mode %q", mode)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	out, err := c.command(ctx, filepath.Join(c.bin, "pg_ctl"), "-w", "-t", "60", "-D", c.dir, "-m", mode, "stop").CombinedOutput()
	if err != nil {
		return fmt.Errorf("stopping postgres (%s): %w: %s", mode, err, strings.TrimSpace(string(out)))
	}
	select {
	case <-time.After(pause):
	case <-ctx.Done():
		return ctx.Err()
	}
	if err := c.pgCtlStart(ctx, c.port); err != nil {
		return err
	}
	return c.waitReady(ctx)
}
