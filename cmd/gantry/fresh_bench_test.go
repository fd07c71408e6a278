//go:build !fast

// Live: needs live OpenTofu (built from tools/tofu from nothing), runc and the network to the Go module proxy.

package main

import (
	"bufio"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"gantry/bench"
	"gantry/cmd/gantry/webtest"
	"gantry/models/idempotency"
)

// BenchmarkFreshMachineStart runs the README's first command, `go tool task dev`, exactly as
// written, in a fresh clone of this checkout's HEAD, as a newcomer's machine would find it:
// GOCACHE and GOMODCACHE point at empty directories for the command's processes only (the
// modules come from the module proxy; the module cache is removed afterwards with `go clean
// -modcache` under the same variable), and the clone has no bin/ and no .data/. It
// reports, in seconds from the command's start:
//
//   - runner_build_s: go-task built (its first line);
//   - generate_s, installs_s: the end of `generate` and of the package installs (Debian
//     packages cannot be uninstalled on a shared machine: missing ones are installed and
//     measured, present ones take no time — the figure says which it met);
//   - gantry_build_s: gantry dev's first line (Gantry compiled and linked);
//   - serve_s: /healthz answering (goal ≤ 240);
//   - opentofu_s: bin/tofu built (tools/tofubuild's "ready" line);
//   - toolchain_ready_s: the provider and gantry-fwd built too, the live executor ready;
//   - first_plan_s, first_live_run_s: a bucket requested in development through the API
//     (as soon as the portal serves) reaching its review or apply, then SUCCEEDED (goal ≤ 600);
//
// with load_at_start and cpu_s, the CPU seconds of the command's process tree; a step whose
// line a commit does not print (GANTRY_FRESH_REV=f2c7d85 has no cmd/tofubuild, now tools/tofubuild) is not
// reported. It needs the
// ports `go tool task dev` uses (8080, 5556, 8790, 9464) free. Run with -benchtime=1x: one
// start takes many minutes. Not in CI (go tool task bench).
func BenchmarkFreshMachineStart(b *testing.B) {
	requireDevPorts(b)
	f := startFresh(b, "dev")
	f.waitServing(100 * time.Millisecond)
	served := time.Now()

	// A newcomer's first live run, requested at once: it waits in QUEUED for the toolchain.
	app := &webtest.App{URL: "http://127.0.0.1:8080", Issuer: "http://127.0.0.1:5556"}
	c := app.LoggedIn(b, "operator@acme.test")
	runID := freshRequest(b, app, c)
	var planned time.Time
	var state string
	bench.Eventually(b, "the first live run to end", 60*time.Minute, func() (bool, any) {
		f.alive("the first live run")
		state = freshRunState(b, app, c, runID)
		if planned.IsZero() && state != "QUEUED" && state != "PLANNING" {
			planned = time.Now()
		}
		return state == "SUCCEEDED" || state == "FAILED" || state == "POLICY_BLOCKED", bench.Later(func() string {
			return state + "; the last lines:\n" + f.tail.String()
		})
	}, bench.Poll(100*time.Millisecond))
	require.Equal(b, "SUCCEEDED", state, "the last lines:\n%s", f.tail.String())
	ended := time.Now()
	b.StopTimer()
	f.stop()

	m := f.marks.snapshot()
	require.False(b, m["toolchain"].IsZero(), "gantry dev never said its toolchain was ready:\n%s", f.tail.String())
	f.report(m, "gantry", "opentofu", "toolchain")
	b.ReportMetric(f.since(served), "serve_s")
	b.ReportMetric(f.since(planned), "first_plan_s")
	b.ReportMetric(f.since(ended), "first_live_run_s")
}

// BenchmarkSecondCloneStart is the warm case of BenchmarkFreshMachineStart: `go tool task
// dev` in a second clone on a machine whose Go caches already hold this commit's builds
// (a first clone is started and stopped first, not measured), to /healthz answering
// (serve_s, goal ≤ 5). The Go caches are the machine's own, left as they are. Run with
// -benchtime=1x; not in CI.
func BenchmarkSecondCloneStart(b *testing.B) {
	requireDevPorts(b)
	first := startClone(b, "dev", false)
	first.waitServing(20 * time.Millisecond)
	// stop returns once the whole tree has ended: go-task waits for .ci/dev, which waits
	// for its OpenTofu build on exit, and gantry dev stops its PostgreSQL first.
	first.stop()

	second := startClone(b, "dev", false)
	second.waitServing(20 * time.Millisecond)
	served := time.Now()
	b.StopTimer()
	second.stop()
	b.ReportMetric(second.load, "load_at_start")
	b.ReportMetric(second.since(served), "serve_s")
}

// BenchmarkFreshMachineTest is BenchmarkFreshMachineStart with the README's second
// command, `go tool task test`: it reports when the first test starts (first_test_s, the
// first "run" event of the tests' JSON stream; a figure, no goal) with the steps before
// it, then stops the command (the whole suite from nothing is what `.ci/run` on a fresh
// clone measures). Run with -benchtime=1x; not in CI.
func BenchmarkFreshMachineTest(b *testing.B) {
	f := startFresh(b, "test")
	bench.Eventually(b, "the first test to start", 30*time.Minute, func() (bool, any) {
		f.alive("the first test")
		events, err := os.ReadFile(f.jsonFile)
		return err == nil && strings.Contains(string(events), `"Action":"run"`), bench.Later(f.tail.String)
	}, bench.Poll(100*time.Millisecond))
	started := time.Now()
	b.StopTimer()
	f.stop()
	f.report(f.marks.snapshot())
	b.ReportMetric(f.since(started), "first_test_s")
}

// freshStart is a README command running in a fresh clone with empty Go caches.
type freshStart struct {
	b        *testing.B
	cmd      *exec.Cmd
	start    time.Time
	load     float64
	marks    *stepMarks
	tail     *lockedTail
	exited   chan struct{}
	stopped  bool
	jsonFile string // the tests' JSON stream (GOTESTSUM_JSONFILE), for `test`
}

// startFresh clones this checkout's HEAD (or GANTRY_FRESH_REV) into a scratch directory
// and starts `go tool task <task>` in it with empty Go caches, in a process group of its
// own; the benchmark's timer runs from the start. Cleanup stops the command as Ctrl-C
// does and removes the clone and the caches.
func startFresh(b *testing.B, task string) *freshStart { return startClone(b, task, true) }

// startClone is startFresh with empty Go caches (fresh) or with this machine's own
// (a second clone on the same machine: warm).
func startClone(b *testing.B, task string, fresh bool) *freshStart {
	root, err := filepath.Abs(filepath.Join("..", ".."))
	require.NoError(b, err)
	scratch, err := os.MkdirTemp("", "gantry-fresh-")
	require.NoError(b, err)
	// Run as root, gantry dev's PostgreSQL runs as the postgres user: it must reach .data/.
	require.NoError(b, os.Chmod(scratch, 0o755))
	clone, gocache, gomodcache := filepath.Join(scratch, "gantry"), filepath.Join(scratch, "gocache"), filepath.Join(scratch, "gomodcache")
	env := freshEnv(gocache, gomodcache)
	if !fresh {
		env = newcomerEnv()
	}
	b.Cleanup(func() {
		if fresh { // never the machine's own module cache
			clean := exec.Command("go", "clean", "-modcache")
			clean.Env = env
			if out, err := clean.CombinedOutput(); err != nil {
				b.Logf("go clean -modcache: %v\n%s", err, out)
			}
		}
		_ = os.RemoveAll(scratch)
	})
	out, err := exec.Command("git", "clone", "--quiet", root, clone).CombinedOutput()
	require.NoError(b, err, "git clone: %s", out)
	// GANTRY_FRESH_REV measures another commit the same way (the figures before a change).
	if rev := os.Getenv("GANTRY_FRESH_REV"); rev != "" {
		out, err := exec.Command("git", "-C", clone, "checkout", "--quiet", rev).CombinedOutput()
		require.NoError(b, err, "git checkout %s: %s", rev, out)
	}

	f := &freshStart{b: b, load: bench.LoadAverage(), marks: newStepMarks(task), tail: &lockedTail{}, exited: make(chan struct{}),
		jsonFile: filepath.Join(scratch, "tests.json")}
	f.cmd = exec.Command("go", "tool", "task", task)
	f.cmd.Dir, f.cmd.Env = clone, append(env, "GOTESTSUM_JSONFILE="+f.jsonFile)
	f.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true} // Ctrl-C for the whole tree at the end
	r, w := io.Pipe()
	f.cmd.Stdout, f.cmd.Stderr = w, w
	go func() {
		sc := bufio.NewScanner(r)
		sc.Buffer(make([]byte, 64<<10), 1<<20)
		for sc.Scan() {
			f.tail.add(sc.Text())
			f.marks.see(sc.Text())
		}
	}()
	b.ResetTimer()
	f.start = time.Now()
	require.NoError(b, f.cmd.Start())
	go func() { _ = f.cmd.Wait(); w.Close(); close(f.exited) }()
	b.Cleanup(f.stop)
	return f
}

// requireDevPorts fails the benchmark unless the ports `go tool task dev` uses are free.
func requireDevPorts(b *testing.B) {
	for _, port := range []string{"8080", "5556", "8790", "9464"} {
		ln, err := net.Listen("tcp", "127.0.0.1:"+port)
		require.NoError(b, err, "go tool task dev needs port %s: stop what listens there", port)
		ln.Close()
	}
}

// waitServing waits for gantry dev's /healthz to answer, checking every poll. The wait is
// a budget of idle-machine time, generous: the point is to measure how long it takes.
func (f *freshStart) waitServing(poll time.Duration) {
	client := &http.Client{Timeout: 2 * time.Second}
	bench.Eventually(f.b, "/healthz to answer", 30*time.Minute, func() (bool, any) {
		f.alive("/healthz")
		resp, err := client.Get("http://127.0.0.1:8080/healthz")
		if err != nil {
			return false, err.Error()
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK, resp.Status
	}, bench.Poll(poll))
}

// alive fails the benchmark when the command has ended while it waited for what.
func (f *freshStart) alive(what string) {
	select {
	case <-f.exited:
		f.b.Fatalf("go tool task ended while waiting for %s; its last lines:\n%s", what, f.tail.String())
	default:
	}
}

// stop sends Ctrl-C to the command's process group and waits for it to end.
func (f *freshStart) stop() {
	if f.stopped {
		return
	}
	f.stopped = true
	_ = syscall.Kill(-f.cmd.Process.Pid, syscall.SIGINT)
	<-f.exited
}

func (f *freshStart) since(t time.Time) float64 { return t.Sub(f.start).Seconds() }

// report reports the load at the start, the steps every command shows (and the marks
// named), and the CPU seconds of the stopped command's process tree.
func (f *freshStart) report(m map[string]time.Time, marks ...string) {
	f.b.ReportMetric(f.load, "load_at_start")
	for _, mark := range append([]string{"runner", "generate", "installs"}, marks...) {
		if t := m[mark]; !t.IsZero() {
			f.b.ReportMetric(f.since(t), stepMetric[mark])
		}
	}
	if u := f.cmd.ProcessState.SysUsage(); u != nil {
		ru := u.(*syscall.Rusage)
		f.b.ReportMetric(time.Duration(ru.Utime.Nano()+ru.Stime.Nano()).Seconds(), "cpu_s")
	}
}

// stepMetric names each mark's metric.
var stepMetric = map[string]string{
	"runner": "runner_build_s", "generate": "generate_s", "installs": "installs_s",
	"gantry": "gantry_build_s", "opentofu": "opentofu_s", "toolchain": "toolchain_ready_s",
}

// freshEnv is this process's environment for a newcomer's command: empty Go caches, no
// Gantry settings, the local Go toolchain only.
func freshEnv(gocache, gomodcache string) []string {
	return append(newcomerEnv(), "GOCACHE="+gocache, "GOMODCACHE="+gomodcache)
}

// newcomerEnv is this process's environment without Gantry's or the tests' settings, with
// the Go caches it names (or the machine's defaults) and the local Go toolchain only.
func newcomerEnv() []string {
	var env []string
	for _, kv := range os.Environ() {
		name, _, _ := strings.Cut(kv, "=")
		switch {
		case name == "GOFLAGS", name == "GOTOOLCHAIN",
			name == "TF_CLI_CONFIG_FILE", strings.HasPrefix(name, "GANTRY_"), strings.HasPrefix(name, "TEST_"):
			continue
		}
		env = append(env, kv)
	}
	return append(env, "GOTOOLCHAIN=local")
}

// freshRequest requests a bucket in development through the API, as the signed-in
// operator's browser session would (cookie, CSRF token, idempotency key), and returns the
// run's id.
func freshRequest(b testing.TB, app *webtest.App, c *http.Client) string {
	body := `{"template":"bucket","environment":"development","workspace":"fresh-start","kind":"apply","inputs":{"name":"fresh-start-bucket"}}`
	req, err := http.NewRequest(http.MethodPost, app.URL+"/api/v1/requests", strings.NewReader(body))
	require.NoError(b, err)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("X-CSRF-Token", app.CSRF(b, c))
	req.Header.Set("Idempotency-Key", idempotency.NewKey())
	resp, err := c.Do(req)
	require.NoError(b, err)
	answer := webtest.ReadBody(b, resp)
	require.Equal(b, http.StatusCreated, resp.StatusCode, answer)
	var created struct{ ID string }
	require.NoError(b, json.Unmarshal([]byte(answer), &created))
	require.NotEmpty(b, created.ID, answer)
	return created.ID
}

// freshRunState reads the run's state through the API.
func freshRunState(b testing.TB, app *webtest.App, c *http.Client, runID string) string {
	answer := webtest.ReadBody(b, app.Get(b, c, "/api/v1/runs/"+runID))
	var r struct{ State string }
	require.NoError(b, json.Unmarshal([]byte(answer), &r), answer)
	return r.State
}

// stepMarks are the moments `go tool task <task>`'s output shows each step done.
type stepMarks struct {
	mu    sync.Mutex
	lines []stepLine
	marks map[string]time.Time
}

type stepLine struct{ mark, prefix string }

// newStepMarks watches for the first lines that end each step: go-task's first line (it
// is built), the task's install command (generate done), the command after it (installs
// done) and, for dev, gantry dev's first line (Gantry built), tools/tofubuild's "ready" and
// gantry dev's toolchain message.
func newStepMarks(task string) *stepMarks {
	lines := []stepLine{
		{"runner", "task: "},
		{"generate", "task: [" + task + "] .ci/install-packages"},
	}
	switch task {
	case "dev":
		lines = append(lines, stepLine{"installs", "task: [dev] .ci/dev"},
			stepLine{"gantry", "Starting the private PostgreSQL cluster"}, stepLine{"opentofu", "OpenTofu: ready"})
	case "test":
		lines = append(lines, stepLine{"installs", "task: [test] go run ./tools/testenv"})
	}
	return &stepMarks{lines: lines, marks: map[string]time.Time{}}
}

func (s *stepMarks) see(line string) {
	now := time.Now()
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, l := range s.lines {
		if _, ok := s.marks[l.mark]; !ok && strings.HasPrefix(line, l.prefix) {
			s.marks[l.mark] = now
		}
	}
	if _, ok := s.marks["toolchain"]; !ok && strings.Contains(line, "the OpenTofu toolchain is ready") {
		s.marks["toolchain"] = now
	}
}

func (s *stepMarks) snapshot() map[string]time.Time {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make(map[string]time.Time, len(s.marks))
	for k, v := range s.marks {
		out[k] = v
	}
	return out
}
