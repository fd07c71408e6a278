//go:build !fast

// Live: needs runc (as root).

package oci

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"gantry/bench"
	"gantry/syncio"
)

// The tests run real containers: they need root and runc (Debian package runc).

type env struct {
	dir    string // scratch root
	rootfs string
	ex     *Executor
	uid    uint32
}

var (
	setupOnce sync.Once
	shared    *env
	setupErr  error
)

const testSecret = "sbx-SECRET-7f3a9c1e2d"

func setup(t *testing.T) *env {
	t.Helper()
	setupOnce.Do(func() { shared, setupErr = doSetup() })
	if setupErr != nil {
		t.Fatal(setupErr)
	}
	return shared
}

func doSetup() (*env, error) {
	if _, err := exec.LookPath("runc"); err != nil {
		return nil, fmt.Errorf("runc not found: install the Debian package runc (apt-get install runc): %v", err)
	}
	if os.Geteuid() != 0 {
		return nil, errors.New("the runner/oci tests must run as root (runc)")
	}
	dir, err := os.MkdirTemp("", "gantry-oci-test-")
	if err != nil {
		return nil, err
	}
	bin := filepath.Join(dir, "bin")
	for _, b := range []struct{ out, pkg string }{
		{filepath.Join(bin, "workload"), "./testdata/workload"},
		{filepath.Join(bin, "fwd"), "gantry/cmd/gantry-fwd"},
	} {
		cmd := exec.Command("go", "build", "-trimpath", "-ldflags", "-s -w", "-o", b.out, b.pkg)
		cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
		if out, err := cmd.CombinedOutput(); err != nil {
			return nil, fmt.Errorf("build %s: %v\n%s", b.pkg, err, out)
		}
	}
	rootfs := filepath.Join(dir, "rootfs")
	if err := PrepareRootfs(rootfs, map[string]string{
		"/bin/workload": filepath.Join(bin, "workload"),
		"/bin/fwd":      filepath.Join(bin, "fwd"),
	}); err != nil {
		return nil, err
	}
	uid, err := UnusedID(200000)
	if err != nil {
		return nil, err
	}
	return &env{
		dir:    dir,
		rootfs: rootfs,
		uid:    uid,
		ex: &Executor{
			StateRoot:  filepath.Join(dir, "state"),
			BundleRoot: filepath.Join(dir, "bundles"),
			CgroupRoot: fmt.Sprintf("gantry-test-%d", os.Getpid()),
		},
	}, nil
}

func TestMain(m *testing.M) {
	code := m.Run()
	if shared != nil {
		// The per-test checks verify that every job's cgroups are gone; remove the
		// (empty) test root too.
		if cg, err := detectCgroups(); err == nil {
			for _, mnt := range cg.mounts {
				_ = syscall.Rmdir(filepath.Join(mnt, shared.ex.CgroupRoot))
			}
		}
		os.RemoveAll(shared.dir)
	}
	os.Exit(code)
}

var jobSeq int

func (e *env) spec(t *testing.T, args ...string) Spec {
	t.Helper()
	jobSeq++
	return Spec{
		ID:      fmt.Sprintf("t%d-%d", os.Getpid(), jobSeq),
		Rootfs:  e.rootfs,
		Args:    args,
		Env:     []string{"PATH=/bin", "HOME=/tmp"},
		Workdir: t.TempDir(),
		UID:     e.uid,
		GID:     e.uid,
		Timeout: 30 * time.Second,
	}
}

// assertClean checks that nothing of the job is left: no runc container, no bundle,
// no cgroup directory (in any hierarchy).
func (e *env) assertClean(t *testing.T, id string) {
	t.Helper()
	out, err := exec.Command("runc", "--root", e.ex.StateRoot, "list", "-q").CombinedOutput()
	if err != nil {
		t.Errorf("runc list: %v: %s", err, out)
	} else if s := strings.TrimSpace(string(out)); s != "" {
		t.Errorf("runc list is not empty: %q", s)
	}
	if ents, err := os.ReadDir(e.ex.BundleRoot); err != nil {
		t.Errorf("bundle root: %v", err)
	} else if len(ents) != 0 {
		t.Errorf("bundle root not empty: %v", ents)
	}
	if id != "" {
		if _, err := os.Stat(filepath.Join(e.ex.StateRoot, id)); !os.IsNotExist(err) {
			t.Errorf("runc state dir of %s left (%v)", id, err)
		}
	}
	cg, err := detectCgroups()
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range cg.mounts {
		ents, _ := os.ReadDir(filepath.Join(m, e.ex.CgroupRoot))
		for _, ent := range ents {
			if ent.IsDir() {
				t.Errorf("cgroup dir left: %s", filepath.Join(m, e.ex.CgroupRoot, ent.Name()))
			}
		}
	}
}

func (e *env) run(t *testing.T, ctx context.Context, s Spec) (Result, string, error) {
	t.Helper()
	var out syncio.Buffer // stdout and stderr, copied by two goroutines
	s.Stdout, s.Stderr = &out, &out
	res, err := e.ex.Run(ctx, s)
	e.assertClean(t, s.ID)
	return res, out.String(), err
}

func TestHealth(t *testing.T) {
	e := setup(t)
	if err := e.ex.Health(context.Background()); err != nil {
		t.Fatal(err)
	}
	e.assertClean(t, "")
	bad := &Executor{RuncPath: "/nonexistent/runc", StateRoot: e.ex.StateRoot, BundleRoot: e.ex.BundleRoot}
	if err := bad.Health(context.Background()); err == nil || !strings.Contains(err.Error(), "install the Debian package runc") {
		t.Fatalf("missing runc: %v", err)
	}
}

func TestHello(t *testing.T) {
	e := setup(t)
	s := e.spec(t, "/bin/workload", "hello", "a b", "--flag")
	// The workload runs until the hook below, done looking, releases it.
	s.Env = []string{"PATH=/bin", "EXIT=3", "SANDBOX_TOKEN=" + testSecret, "WAIT_FOR=/workspace/release", "HOME=/workspace"}
	// While the container runs, the secret must not be on disk under the executor's roots.
	scanned := false
	testHookRunning = func(id string) {
		scanned = true
		// The container runs until this hook releases it (WAIT_FOR), so runc's state is
		// there to look at whatever the machine's pace.
		defer func() {
			if err := os.WriteFile(filepath.Join(s.Workdir, "release"), nil, 0o644); err != nil {
				t.Errorf("releasing the workload: %v", err)
			}
		}()
		// Wait for runc's state.json, then scan everything runc and the executor wrote. No
		// event says runc wrote the file: poll it within a budget of idle-machine time.
		stateFile := filepath.Join(e.ex.StateRoot, id, "state.json")
		for b := bench.NewBudget(time.Second); ; time.Sleep(5 * time.Millisecond) {
			_, err := os.Stat(stateFile)
			if err == nil {
				break
			}
			if b.Spent() {
				t.Errorf("runc state.json: not within %s: %v", b, err)
				break
			}
		}
		// The limits are set on the job's parent cgroup.
		if cg, err := detectCgroups(); err == nil && cg.unified == "" {
			rel := filepath.Join(e.ex.CgroupRoot, id)
			for file, want := range map[string]string{
				filepath.Join(cg.v1["memory"], rel, "memory.limit_in_bytes"):       "536870912",
				filepath.Join(cg.v1["memory"], rel, "memory.memsw.limit_in_bytes"): "536870912",
				filepath.Join(cg.v1["pids"], rel, "pids.max"):                      "128",
				filepath.Join(cg.v1["cpu"], rel, "cpu.cfs_quota_us"):               "100000",
			} {
				b, err := os.ReadFile(file)
				if err != nil && strings.Contains(file, "memsw") {
					continue // swap accounting disabled
				}
				if got := strings.TrimSpace(string(b)); got != want {
					t.Errorf("%s = %q (%v), want %s", file, got, err, want)
				}
			}
		}
		for _, root := range []string{e.ex.StateRoot, e.ex.BundleRoot} {
			_ = filepath.WalkDir(root, func(p string, d os.DirEntry, err error) error {
				if err == nil && d.Type().IsRegular() {
					if b, _ := os.ReadFile(p); bytes.Contains(b, []byte(testSecret)) {
						t.Errorf("the secret is on disk in %s", p)
					}
				}
				if err == nil && filepath.Base(p) == "config.json" {
					t.Errorf("config.json still exists while the job runs: %s", p)
				}
				return nil
			})
		}
	}
	defer func() { testHookRunning = nil }()
	res, out, err := e.run(t, context.Background(), s)
	if err != nil {
		t.Fatal(err, out)
	}
	if !scanned {
		t.Error("the running hook was not called")
	}
	if res.ExitCode != 3 || res.OOMKilled || res.PidsLimited || res.TimedOut {
		t.Fatalf("result %+v", res)
	}
	if res.Explain() != "the job exited with code 3" {
		t.Errorf("Explain: %q", res.Explain())
	}
	var got struct{ Args, Env []string }
	// stdout and stderr reach the writer through separate pipes: their order varies.
	var line string
	for _, l := range strings.Split(out, "\n") {
		if strings.HasPrefix(l, "{") {
			line = l
		}
	}
	if err := json.Unmarshal([]byte(line), &got); err != nil {
		t.Fatalf("output %q: %v", out, err)
	}
	if strings.Join(got.Args, "|") != "a b|--flag" {
		t.Errorf("args %q", got.Args)
	}
	if strings.Join(got.Env, "\n") != strings.Join(s.Env, "\n") {
		t.Errorf("env is not exactly Spec.Env:\n got %q\nwant %q", got.Env, s.Env)
	}
	if !strings.Contains(out, "to stderr") {
		t.Errorf("stderr missing: %q", out)
	}
	t.Logf("duration %s", res.Duration)

	// exit 0; without HOME in Env, runc adds the runner's home from /etc/passwd.
	s = e.spec(t, "/bin/workload", "hello")
	s.Env = []string{"PATH=/bin"}
	res, out, err = e.run(t, context.Background(), s)
	if err != nil || res.ExitCode != 0 || res.Explain() != "the job exited successfully (exit code 0)" {
		t.Fatalf("%+v %v %s", res, err, out)
	}
	if !strings.Contains(out, `"env":["PATH=/bin","HOME=/tmp"]`) {
		t.Errorf("env: %s", out)
	}
}

func TestConcurrent(t *testing.T) {
	e := setup(t)
	var wg sync.WaitGroup
	specs := make([]Spec, 4)
	for i := range specs {
		specs[i] = e.spec(t, "/bin/workload", "hello", fmt.Sprint(i))
		specs[i].Env = []string{"PATH=/bin", fmt.Sprintf("EXIT=%d", i)}
	}
	errs := make([]error, len(specs))
	results := make([]Result, len(specs))
	for i := range specs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			results[i], errs[i] = e.ex.Run(context.Background(), specs[i])
		}()
	}
	wg.Wait()
	for i := range specs {
		if errs[i] != nil || results[i].ExitCode != i {
			t.Errorf("job %d: %+v %v", i, results[i], errs[i])
		}
	}
	e.assertClean(t, "")
}

func TestIsolation(t *testing.T) {
	e := setup(t)
	// A TCP listener on the host's loopback: the container must not reach it.
	hostLn, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer hostLn.Close()
	go func() {
		for {
			c, err := hostLn.Accept()
			if err != nil {
				return
			}
			c.Close()
		}
	}()
	// An echo server on a host unix socket, reached through fwd.
	sockDir := t.TempDir()
	os.Chmod(sockDir, 0o755)
	sock := filepath.Join(sockDir, "echo.sock")
	ln, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	os.Chmod(sock, 0o666) // the job's uid must be able to connect
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
	// A secret file, readable by the job's group only.
	secDir := t.TempDir()
	os.Chmod(secDir, 0o755)
	secFile := filepath.Join(secDir, "token")
	if err := os.WriteFile(secFile, []byte(testSecret+"\n"), 0o440); err != nil {
		t.Fatal(err)
	}
	os.Chown(secFile, 0, int(e.uid))

	s := e.spec(t, "/bin/fwd", "-listen", "127.0.0.1:8765", "-unix", "/run/state/echo.sock",
		"-secret-env", "TOKEN=/run/secrets/token",
		"--", "/bin/workload", "isolation", hostLn.Addr().String(), "127.0.0.1:8765")
	s.Mounts = []Mount{
		{Source: sockDir, Destination: "/run/state", ReadOnly: true},
		{Source: secDir, Destination: "/run/secrets", ReadOnly: true},
	}
	res, out, err := e.run(t, context.Background(), s)
	if err != nil || res.ExitCode != 0 {
		t.Fatalf("%+v %v\n%s", res, err, out)
	}
	var r map[string]any
	if err := json.Unmarshal([]byte(out), &r); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	t.Logf("inside: %s", out)
	check := func(key string, ok bool, what string) {
		t.Helper()
		if !ok {
			t.Errorf("%s: %s = %v", what, key, r[key])
		}
	}
	str := func(k string) string { s, _ := r[k].(string); return s }
	check("uid", r["uid"] == float64(e.uid) && r["euid"] == float64(e.uid), "runs as the unused uid")
	check("gid", r["gid"] == float64(e.uid), "runs as the unused gid")
	check("user", str("user") == RunnerName, "the uid is named runner")
	check("capEff", str("capEff") == "0000000000000000", "no effective capabilities")
	check("capPrm", str("capPrm") == "0000000000000000", "no permitted capabilities")
	check("capBnd", str("capBnd") == "0000000000000000", "empty bounding set")
	check("initCapEff", str("initCapEff") == "0000000000000000" && str("initName") == "fwd", "PID 1 is fwd without capabilities")
	check("noNewPrivs", str("noNewPrivs") == "1", "no_new_privs")
	check("writeRoot", strings.Contains(str("writeRoot"), "read-only file system"), "/ is read-only")
	check("writeBin", strings.Contains(str("writeBin"), "read-only file system"), "/bin is read-only")
	check("writeState", strings.Contains(str("writeState"), "read-only file system"), "the socket dir is read-only")
	check("writeWorkspace", str("writeWorkspace") == "", "/workspace is writable")
	check("writeTmp", str("writeTmp") == "", "/tmp is writable")
	check("cwd", str("cwd") == "/workspace", "cwd")
	check("hostname", str("hostname") == hostname, "own uts namespace")
	ifs, _ := r["interfaces"].([]any)
	check("interfaces", len(ifs) == 1 && ifs[0] == "lo", "only lo")
	check("hostTCP", strings.Contains(str("hostTCP"), "connection refused"), "the host's 127.0.0.1 listener is unreachable")
	check("outside", strings.Contains(str("outside"), "network is unreachable"), "no route out")
	check("fwd", str("fwd") == "echo:ping", "the host unix socket is reachable through fwd")
	check("token", str("token") == testSecret, "fwd exported the secret file")
	// The workspace file written inside is back to the workdir's owner.
	var st syscall.Stat_t
	if err := syscall.Stat(filepath.Join(s.Workdir, "out.txt"), &st); err != nil || st.Uid != 0 {
		t.Errorf("workspace file after the run: uid %d, %v", st.Uid, err)
	}
}

func TestMemoryLimit(t *testing.T) {
	e := setup(t)
	s := e.spec(t, "/bin/workload", "oom")
	s.Limits.MemoryBytes = 64 << 20
	res, out, err := e.run(t, context.Background(), s)
	if err != nil {
		t.Fatal(err, out)
	}
	if !res.OOMKilled || res.ExitCode != 137 {
		t.Fatalf("result %+v, output %q", res, out)
	}
	if want := "the job exceeded its memory limit of 64 MiB and was killed (exit code 137)"; res.Explain() != want {
		t.Errorf("Explain: %q", res.Explain())
	}
	// The same workload fits in 512 MiB.
	s = e.spec(t, "/bin/workload", "oom")
	res, out, err = e.run(t, context.Background(), s)
	if err != nil || res.OOMKilled || res.ExitCode != 0 {
		t.Fatalf("%+v %v %q", res, err, out)
	}
}

func TestPidsLimit(t *testing.T) {
	e := setup(t)
	s := e.spec(t, "/bin/workload", "pids")
	s.Limits.Pids = 16
	res, out, err := e.run(t, context.Background(), s)
	if err != nil {
		t.Fatal(err, out)
	}
	t.Logf("result %+v: %s; output %q", res, res.Explain(), out)
	if !res.PidsLimited || res.ExitCode == 0 {
		t.Fatalf("result %+v, output %q", res, out)
	}
	if !strings.Contains(res.Explain(), "pids limit of 16") {
		t.Errorf("Explain: %q", res.Explain())
	}
}

func TestTimeout(t *testing.T) {
	e := setup(t)
	s := e.spec(t, "/bin/workload", "sleep", "30s")
	s.Timeout = 500 * time.Millisecond // the time limit under test
	res, out, err := e.run(t, context.Background(), s)
	if err != nil {
		t.Fatal(err, out)
	}
	// Killed (137) by the time limit, not left to sleep its 30 s (it would exit 0): the
	// proof is the result, not how long the run took, which depends on the machine.
	if !res.TimedOut || res.ExitCode != 137 {
		t.Fatalf("result %+v after %s", res, res.Duration)
	}
	if res.Explain() != "the job exceeded its time limit of 500ms and was killed" {
		t.Errorf("Explain: %q", res.Explain())
	}
}

func TestCancel(t *testing.T) {
	e := setup(t)
	s := e.spec(t, "/bin/workload", "sleep", "30s")
	ctx, cancel := context.WithCancel(context.Background())
	// Cancel once the container runs (runc consumed its config): the event, not a delay.
	testHookRunning = func(string) { cancel() }
	defer func() { testHookRunning = nil }()
	res, _, err := e.run(t, ctx, s)
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("err %v, result %+v", err, res)
	}
	// Killed (137), not left to sleep its 30 s (it would exit 0).
	if res.ExitCode != 137 {
		t.Fatalf("result %+v after %s", res, res.Duration)
	}
	// Cancelled before the start: nothing runs, nothing is left.
	s = e.spec(t, "/bin/workload", "true")
	if _, _, err := e.run(t, ctx, s); !errors.Is(err, context.Canceled) {
		t.Fatalf("err %v", err)
	}
}

func TestPanicCleansUp(t *testing.T) {
	e := setup(t)
	s := e.spec(t, "/bin/workload", "sleep", "30s")
	testHookRunning = func(string) { panic("boom") }
	defer func() { testHookRunning = nil }()
	func() {
		defer func() {
			if r := recover(); r != "boom" {
				t.Fatalf("recovered %v", r)
			}
		}()
		_, _ = e.ex.Run(context.Background(), s)
	}()
	e.assertClean(t, s.ID)
}

func TestSignalled(t *testing.T) {
	e := setup(t)
	s := e.spec(t, "/bin/fwd", "--", "/bin/workload", "killself")
	res, out, err := e.run(t, context.Background(), s)
	if err != nil {
		t.Fatal(err, out)
	}
	if res.ExitCode != 143 {
		t.Fatalf("result %+v %q", res, out)
	}
	if res.Explain() != "the job was killed by SIGTERM (exit code 143)" {
		t.Errorf("Explain: %q", res.Explain())
	}
	// fwd as PID 1 reaps orphans.
	s = e.spec(t, "/bin/fwd", "--", "/bin/workload", "orphans")
	res, out, err = e.run(t, context.Background(), s)
	if err != nil || res.ExitCode != 0 || strings.TrimSpace(out) != "true" {
		t.Fatalf("%+v %v %q", res, err, out)
	}
}

func TestRuncFailureIsAnError(t *testing.T) {
	e := setup(t)
	s := e.spec(t, "/bin/nonexistent")
	_, out, err := e.run(t, context.Background(), s)
	if err == nil || !strings.Contains(err.Error(), "no such file") {
		t.Fatalf("err %v, output %q", err, out)
	}
}

func TestRootfsContract(t *testing.T) {
	e := setup(t)
	// /tmp without 1777
	bad := filepath.Join(t.TempDir(), "rootfs")
	if err := PrepareRootfs(bad, nil); err != nil {
		t.Fatal(err)
	}
	st, err := os.Stat(filepath.Join(bad, "tmp"))
	if err != nil || st.Mode().Perm() != 0o777 || st.Mode()&os.ModeSticky == 0 {
		t.Fatalf("PrepareRootfs /tmp: %v %v", st.Mode(), err)
	}
	os.Chmod(filepath.Join(bad, "tmp"), 0o755)
	s := e.spec(t, "/bin/workload", "true")
	s.Rootfs = bad
	if _, _, err := e.run(t, context.Background(), s); err == nil || !strings.Contains(err.Error(), "mode 1777") {
		t.Fatalf("err %v", err)
	}
	// a mount destination missing from the rootfs
	s = e.spec(t, "/bin/workload", "true")
	s.Mounts = []Mount{{Source: t.TempDir(), Destination: "/opt/x", ReadOnly: true}}
	if _, _, err := e.run(t, context.Background(), s); err == nil || !strings.Contains(err.Error(), "does not exist") {
		t.Fatalf("err %v", err)
	}
	// reserved destination, root uid, bad id
	s = e.spec(t, "/bin/workload", "true")
	s.Mounts = []Mount{{Source: t.TempDir(), Destination: "/proc/x"}}
	if _, err := e.ex.Run(context.Background(), s); err == nil || !strings.Contains(err.Error(), "reserved") {
		t.Fatalf("err %v", err)
	}
	s = e.spec(t, "/bin/workload", "true")
	s.UID = 0
	if _, err := e.ex.Run(context.Background(), s); err == nil {
		t.Fatal("uid 0 accepted")
	}
	s = e.spec(t, "/bin/workload", "true")
	s.ID = "Bad_ID"
	if _, err := e.ex.Run(context.Background(), s); err == nil {
		t.Fatal("bad id accepted")
	}
}

// TestOverhead measures the per-run cost of a trivial container (logged, not asserted).
func TestOverhead(t *testing.T) {
	e := setup(t)
	const n = 20
	var total time.Duration
	var inRun time.Duration
	for i := 0; i < n; i++ {
		s := e.spec(t, "/bin/workload", "true")
		start := time.Now()
		res, err := e.ex.Run(context.Background(), s)
		total += time.Since(start)
		inRun += res.Duration
		if err != nil || res.ExitCode != 0 {
			t.Fatalf("%+v %v", res, err)
		}
	}
	e.assertClean(t, "")
	t.Logf("trivial container: mean %s per Run (of which runc run %s; the rest is setup + cleanup) over %d runs",
		total/n, inRun/n, n)
}

// TestSweep simulates what a crashed executor leaves (a running detached container, its
// bundle and cgroups) and checks that Sweep removes it all, and only it: the container
// of another replica on the node (its own roots) is left running.
func TestSweep(t *testing.T) {
	e := setup(t)
	other := &Executor{StateRoot: filepath.Join(e.dir, "other-state"), BundleRoot: filepath.Join(e.dir, "other-bundles"),
		CgroupRoot: e.ex.CgroupRoot + "-other"}
	mine := e.startDetached(t, e.ex)
	theirs := e.startDetached(t, other)
	if err := e.ex.Sweep(context.Background()); err != nil {
		t.Fatal(err)
	}
	e.assertClean(t, mine)
	if out, _ := exec.Command("runc", "--root", other.StateRoot, "list", "-q").Output(); strings.TrimSpace(string(out)) != theirs {
		t.Fatalf("another replica's container was swept: runc list %q", out)
	}
	if err := other.Sweep(context.Background()); err != nil {
		t.Fatal(err)
	}
	if out, _ := exec.Command("runc", "--root", other.StateRoot, "list", "-q").Output(); strings.TrimSpace(string(out)) != "" {
		t.Fatalf("runc list after its own sweep: %q", out)
	}
	if cg, err := detectCgroups(); err == nil {
		for _, mnt := range cg.mounts {
			_ = syscall.Rmdir(filepath.Join(mnt, other.CgroupRoot))
		}
	}
}

// TestSweepAHalfCreatedContainer: a portal killed while runc created a container leaves a
// state directory runc cannot load (no state.json yet) and a process in the job's cgroup;
// Sweep removes both (runc list only complains of such a container on stderr).
func TestSweepAHalfCreatedContainer(t *testing.T) {
	e := setup(t)
	id := e.startDetached(t, e.ex)
	if err := os.Remove(filepath.Join(e.ex.StateRoot, id, "state.json")); err != nil {
		t.Fatal(err)
	}
	if out, _ := exec.Command("runc", "--root", e.ex.StateRoot, "list", "-q").CombinedOutput(); !strings.Contains(string(out), "load container "+id) {
		t.Fatalf("runc list %q: the test no longer simulates a container runc cannot load", out)
	}
	if err := e.ex.Sweep(context.Background()); err != nil {
		t.Fatal(err)
	}
	e.assertClean(t, id)
}

// startDetached starts a container of ex as a crashed executor leaves it: running
// detached, with its bundle and cgroups; it returns its id.
func (e *env) startDetached(t *testing.T, ex *Executor) string {
	t.Helper()
	s := e.spec(t, "/bin/workload", "sleep", "30s")
	if err := s.normalize(); err != nil {
		t.Fatal(err)
	}
	bundle := filepath.Join(ex.BundleRoot, s.ID)
	if err := os.MkdirAll(bundle, 0o700); err != nil {
		t.Fatal(err)
	}
	cg, err := detectCgroups()
	if err != nil {
		t.Fatal(err)
	}
	job, err := cg.create("/"+ex.CgroupRoot+"/"+s.ID, s.Limits)
	if err != nil {
		t.Fatal(err)
	}
	passwd, group := passwdFiles(s.UID, s.GID)
	os.WriteFile(filepath.Join(bundle, "passwd"), passwd, 0o644)
	os.WriteFile(filepath.Join(bundle, "group"), group, 0o644)
	cfg, err := buildConfig(&s, e.rootfs, filepath.Join(bundle, "passwd"), filepath.Join(bundle, "group"), job.runcPath())
	if err != nil {
		t.Fatal(err)
	}
	os.WriteFile(filepath.Join(bundle, "config.json"), cfg, 0o600)
	// Detached, with /dev/null as stdio (the container inherits it, a pipe would keep us waiting).
	cmd := exec.Command("runc", "--root", ex.StateRoot, "run", "-d", "--bundle", bundle, s.ID)
	if err := cmd.Run(); err != nil {
		t.Fatalf("runc run -d: %v", err)
	}
	if out, _ := exec.Command("runc", "--root", ex.StateRoot, "list", "-q").Output(); strings.TrimSpace(string(out)) != s.ID {
		t.Fatalf("runc list: %q", out)
	}
	return s.ID
}
