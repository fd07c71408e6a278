package kubecluster

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// What a running cluster is: healthy, reusable, described. Start asks it before it starts
// anything; the tasks and the tests' failure reports ask it too.

// reuseWait is how long Start gives a cluster whose every component runs to answer as
// healthy before it reports it broken: its apiserver answers readyz within milliseconds on an
// idle machine, but on one that other builds keep busy (load 20 seen in CI) an answer or the
// node's status update can take many seconds, and a running cluster must never be torn down
// for being slow while other tests use it.
const reuseWait = 2 * time.Minute

// reuse returns the cluster running in the directory once it answers as healthy, waiting up to
// reuseWait while every component runs. A cluster the tests started that a developer now asks
// for is handed over to the developer; one that runs another binary than this source tree
// pins is used all the same, with a note (it is the machine's, and its users may be of
// another checkout).
func (l layout) reuse(ctx context.Context, o Options) (*Cluster, error) {
	ctx, cancel := context.WithTimeout(ctx, reuseWait)
	defer cancel()
	for {
		c, err := l.healthy(ctx)
		if err == nil {
			c.Reused = true
			if o.Owner == OwnerDeveloper && Owner(l.recorded("owner")) != OwnerDeveloper {
				_ = os.WriteFile(l.path("run", "owner"), []byte(string(OwnerDeveloper)+"\n"), 0o644)
			}
			if want, err := CacheDir(o.RepoRoot); err == nil && o.Binary == "" {
				if have := l.recorded("binary"); have != "" && filepath.Dir(have) != want {
					fmt.Fprintf(o.Log, "kubecluster: reusing the machine's test cluster in %s, which runs %s; this source tree pins %s (`go tool task k8s:down` once no test uses it, to restart it with this tree's)\n", l.dir, have, want)
				}
			}
			return c, nil
		}
		if len(l.running()) != len(startOrder()) {
			return nil, err
		}
		select {
		case <-ctx.Done():
			return nil, err
		case <-time.After(time.Second):
		}
	}
}

// healthy returns the running cluster when every component runs, the apiserver is ready and
// the node Ready.
func (l layout) healthy(ctx context.Context) (*Cluster, error) {
	if running := l.running(); len(running) != len(startOrder()) {
		return nil, fmt.Errorf("components running: %v", running)
	}
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	c := &Cluster{l: l}
	clientset, err := c.Client()
	if err != nil {
		return nil, err
	}
	if err := apiServerReady(ctx, clientset); err != nil {
		return nil, err
	}
	node, err := readyNode(ctx, clientset)
	if err != nil {
		return nil, err
	}
	c.nodeIP = node
	return c, nil
}

// Running reports whether any component of a cluster in dir runs (by its PID files).
func Running(dir string) bool {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return false
	}
	return len(layout{dir: abs}.running()) > 0
}

// Status describes the cluster in dir: the components running (by PID file) and the
// cluster when it is healthy, or why it is not.
func Status(ctx context.Context, dir string) (running []string, c *Cluster, err error) {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return nil, nil, err
	}
	l := layout{dir: abs}
	c, err = l.healthy(ctx)
	return l.running(), c, err
}

// PIDs returns the PIDs of the components running in dir, by name.
func PIDs(dir string) map[string]int {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return nil
	}
	l := layout{dir: abs}
	out := map[string]int{}
	for _, c := range startOrder() {
		if pid := l.pid(c); pid != 0 {
			out[c] = pid
		}
	}
	return out
}

// Diagnose describes the cluster in dir for a failure report: each component, whether it
// runs, and the end of its log (how it ended, when it did), then who uses the cluster.
func Diagnose(dir string) string {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return err.Error()
	}
	l := layout{dir: abs}
	var b strings.Builder
	for _, c := range startOrder() {
		state := "not running"
		if pid := l.pid(c); pid != 0 {
			state = fmt.Sprintf("running (pid %d)", pid)
		}
		fmt.Fprintf(&b, "--- %s: %s; the end of %s:\n%s\n", c, state, l.logFile(c), l.logTail(c))
	}
	fmt.Fprintf(&b, "--- users: %s\n", holders(abs))
	return b.String()
}
