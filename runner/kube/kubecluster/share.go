package kubecluster

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"time"
)

// One cluster per machine, shared by every checkout on it. What a cluster uses is
// machine-wide (ports 2379/2380/6443/10250, the gantry-k8s0 bridge, the kubepods cgroups,
// /var/lib/cni), so a state directory per checkout only gave two checkouts two clusters
// fighting over the same ports. The state therefore lives in one machine-wide directory, and
// everything that orders its users is counted there:
//
//   - cluster.lock: one Start or Stop at a time;
//   - users.lock: held shared by every test while it uses the cluster, exclusively by whoever
//     stops it (a stop waits for the tests of every checkout), with stop.gate in front so that
//     a waiting stop is not starved by tests that keep starting: a new user waits at the gate
//     while a stop is pending;
//   - users/: one file per holder saying who it is, so that whoever waits can say whom for;
//   - runs.lock: held shared by every test run (tools/testenv, and each test process that uses
//     the cluster) for as long as it lasts; the last run to end stops a cluster the tests
//     started, and never one a developer started (run/owner).

// DefaultDirEnv overrides DefaultDir.
const DefaultDirEnv = "GANTRY_K8S_DIR"

// DefaultDir is the machine's test cluster state directory: the one `go tool task k8s:up`
// starts and the tests of every checkout share (kubetest). $GANTRY_K8S_DIR overrides it.
func DefaultDir() string {
	if d := os.Getenv(DefaultDirEnv); d != "" {
		return d
	}
	return "/var/lib/gantry/k8s"
}

// Owner says who started a cluster.
type Owner string

const (
	// OwnerTests: started by a test; the last test run to end stops it.
	OwnerTests Owner = "tests"
	// OwnerDeveloper: started by `task k8s:up`; it runs until `task k8s:down`.
	OwnerDeveloper Owner = "developer"
)

// record notes how this start was made: the node's address (Stop waits for the kubelet's
// port on it), the binary and who started it.
func (l layout) record(nodeIP, binary string, owner Owner) error {
	if owner == "" {
		owner = OwnerTests
	}
	for name, value := range map[string]string{"node-ip": nodeIP, "binary": binary, "owner": string(owner)} {
		if err := os.WriteFile(l.path("run", name), []byte(value+"\n"), 0o644); err != nil {
			return err
		}
	}
	return nil
}

// recorded reads one value record wrote, or "".
func (l layout) recorded(name string) string {
	data, err := os.ReadFile(l.path("run", name))
	if err != nil {
		return ""
	}
	return strings.TrimSpace(string(data))
}

// nodeIP is the address the running (or last) cluster's kubelet serves on.
func (l layout) nodeIP() string {
	if ip := l.recorded("node-ip"); ip != "" {
		return ip
	}
	if ip, err := detectNodeIP(); err == nil {
		return ip
	}
	return "0.0.0.0"
}

// StartedBy says who started the cluster in dir ("" when nothing says).
func StartedBy(dir string) Owner {
	return Owner(layout{dir: dir}.recorded("owner"))
}

// LockUsers takes the lock that orders the cluster's users and whoever stops it: shared for a
// user (a test using the cluster), exclusive for a stop that must not pull the cluster from
// under a test in another process or checkout. who says who is asking ("TestX in /src/a"),
// for the messages of others who wait. While it waits it prints, to log, whom it waits for
// (as it begins to wait, then every minute). It waits until it gets the lock or ctx ends;
// unlock releases it (so does the process's exit). A process holding it shared must not ask
// for it exclusively: it would wait for itself.
func LockUsers(ctx context.Context, dir string, exclusive bool, who string, log io.Writer) (unlock func(), err error) {
	if log == nil {
		log = io.Discard
	}
	if err := os.MkdirAll(filepath.Join(dir, "users"), 0o755); err != nil {
		return nil, err
	}
	// Both files are opened close-on-exec (os.OpenFile's default): a process this one
	// starts while it holds a lock (the cluster's own components, when a stop test starts
	// the cluster again) must not inherit the lock and hold it for its whole life.
	gate, err := os.OpenFile(filepath.Join(dir, "stop.gate"), os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return nil, err
	}
	users, err := os.OpenFile(filepath.Join(dir, "users.lock"), os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		gate.Close()
		return nil, err
	}
	kind := "uses the cluster"
	how := syscall.LOCK_SH
	if exclusive {
		kind, how = "stops the cluster", syscall.LOCK_EX
	}
	waiting := func() string { return holders(dir) }
	if exclusive {
		// Users that already wait go first: a stop that ends and another that follows at
		// once (a stop test run many times) would otherwise take the gate again before a
		// waiting user polls it, and starve it.
		if err := letWaitersIn(ctx, dir, log, who, waiting); err != nil {
			users.Close()
			gate.Close()
			return nil, err
		}
	} else {
		waits := register(dir, who+" waits to use the cluster", waitingEntry)
		defer os.Remove(waits)
	}
	if err := flockWait(ctx, gate, how, log, who, waiting); err != nil {
		users.Close()
		gate.Close()
		if exclusive {
			return nil, fmt.Errorf("waiting for another stop of the cluster in %s: %w", dir, err)
		}
		return nil, fmt.Errorf("the cluster in %s is being stopped: %w", dir, err)
	}
	if err := flockWait(ctx, users, how, log, who, waiting); err != nil {
		users.Close()
		gate.Close()
		return nil, fmt.Errorf("the cluster in %s is still in use: %w", dir, err)
	}
	if !exclusive {
		gate.Close() // a user only passes the gate; a stop keeps it shut until it is done
		gate = nil
	}
	entry := register(dir, who+" "+kind, holderEntry)
	return func() {
		os.Remove(entry)
		users.Close() // closing the file drops the lock
		if gate != nil {
			gate.Close()
		}
	}, nil
}

// flockWait takes an flock, waiting until ctx ends, and says whom it waits for: once as it
// begins to wait, then every minute.
func flockWait(ctx context.Context, f *os.File, how int, log io.Writer, who string, waiting func() string) error {
	began := time.Now()
	var next time.Duration
	for {
		err := syscall.Flock(int(f.Fd()), how|syscall.LOCK_NB)
		if err == nil {
			return nil
		}
		if !errors.Is(err, syscall.EWOULDBLOCK) {
			return fmt.Errorf("locking %s: %w", f.Name(), err)
		}
		if waited := time.Since(began); waited >= next {
			fmt.Fprintf(log, "kubecluster: %s waits for the test cluster (%s so far; %s): %s\n", who, waited.Round(time.Second), filepath.Base(f.Name()), waiting())
			next += time.Minute
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%w after %s (held by: %s)", ctx.Err(), time.Since(began).Round(time.Second), waiting())
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// letWaitersIn waits until no user is registered as waiting (each has passed the gate).
func letWaitersIn(ctx context.Context, dir string, log io.Writer, who string, waiting func() string) error {
	began := time.Now()
	var next time.Duration
	for waitingUsers(dir) > 0 {
		if waited := time.Since(began); waited >= next {
			fmt.Fprintf(log, "kubecluster: %s lets the users that wait go first (%s so far): %s\n", who, waited.Round(time.Second), waiting())
			next += time.Minute
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("letting the waiting users of the cluster in %s go first: %w (%s)", dir, ctx.Err(), waiting())
		case <-time.After(100 * time.Millisecond):
		}
	}
	return nil
}

var registered atomic.Int64

// The kinds of entries in users/: a holder of either lock, or a user waiting to get it.
const (
	holderEntry  = "h"
	waitingEntry = "w"
)

// register writes users/<pid>.<start>.<n>.<kind> saying who holds or waits for the lock, and
// returns its name.
func register(dir, text, kind string) string {
	me, _ := lookup(os.Getpid())
	name := filepath.Join(dir, "users", fmt.Sprintf("%d.%d.%d.%s", me.pid, me.start, registered.Add(1), kind))
	_ = os.WriteFile(name, []byte(fmt.Sprintf("%s since %s", text, time.Now().Format("15:04:05"))), 0o644)
	return name
}

// entry is one registered holder or waiter, of a live process.
type entry struct {
	pid     int
	waiting bool
	text    string
}

// entries lists the registered entries of live processes, removing those of processes that
// have gone (the kernel dropped their locks).
func entries(dir string) []entry {
	files, _ := os.ReadDir(filepath.Join(dir, "users"))
	var out []entry
	for _, f := range files {
		parts := strings.Split(f.Name(), ".")
		name := filepath.Join(dir, "users", f.Name())
		if len(parts) != 4 {
			continue
		}
		pid, _ := strconv.Atoi(parts[0])
		start, _ := strconv.ParseUint(parts[1], 10, 64)
		if !(proc{pid: pid, start: start}).alive() {
			os.Remove(name)
			continue
		}
		text, _ := os.ReadFile(name)
		out = append(out, entry{pid: pid, waiting: parts[3] == waitingEntry, text: string(text)})
	}
	return out
}

// waitingUsers counts the users registered as waiting.
func waitingUsers(dir string) int {
	n := 0
	for _, e := range entries(dir) {
		if e.waiting {
			n++
		}
	}
	return n
}

// holders lists who holds or waits for the locks now ("pid 123: TestX in /src/a uses the
// cluster since 10:04:05").
func holders(dir string) string {
	var out []string
	for _, e := range entries(dir) {
		out = append(out, fmt.Sprintf("pid %d: %s", e.pid, e.text))
	}
	if len(out) == 0 {
		return "nobody registered (a process of an older Gantry, or one about to register)"
	}
	sort.Strings(out)
	return strings.Join(out, "; ")
}

// TestRun is one test run's hold on the machine's cluster: while any run holds one, no other
// run's end stops the cluster.
type TestRun struct {
	dir string
	f   *os.File
}

// JoinTestRun records a test run that may use the cluster in dir until Leave (or the
// process's exit).
func JoinTestRun(dir string) (*TestRun, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	f, err := os.OpenFile(filepath.Join(dir, "runs.lock"), os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return nil, err
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_SH); err != nil {
		f.Close()
		return nil, err
	}
	return &TestRun{dir: dir, f: f}, nil
}

// Leave ends the run's hold and reports whether it was the last run: then it holds runs.lock
// exclusively (no run starts meanwhile) until Close, so the caller may stop the cluster.
// Each run lets go before it asks, so of runs that end together at least one is the last.
func (r *TestRun) Leave() (last bool) {
	r.f.Close()
	f, err := os.OpenFile(filepath.Join(r.dir, "runs.lock"), os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return false
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		f.Close()
		return false
	}
	r.f = f
	return true
}

// Close releases what Leave kept.
func (r *TestRun) Close() { r.f.Close() }
