//go:build !fast

// Live: needs live OpenTofu (bin/tofu, built from tools/tofu): a cold gantry dev builds it.

package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"gantry/bench"
	"gantry/models/db/pgcluster"
)

// BenchmarkColdDevStart starts `gantry dev` as a newcomer's first `go tool task dev` would
// find the machine: the gantry binary built, but no .data/, no bin/tofu and an empty Go
// build cache (the module cache stays: downloading is the network's time, not Gantry's).
// It reports the seconds from the process start to /healthz answering (goal ≤ 30) and to
// the first live run possible (the live executor ready: OpenTofu, the sandbox provider and
// gantry-fwd compiled from source, the runc rootfs laid out). Waits that outlast their
// machine-scaled deadline are reported as timeouts, with the deadline as the figure.
// Run with -benchtime=1x: one cold start takes minutes.
func BenchmarkColdDevStart(b *testing.B) {
	dataDir, err := pgcluster.MkdirTemp("gantry-cold-bench-")
	require.NoError(b, err)
	b.Cleanup(func() { os.RemoveAll(dataDir) })
	port := freePort(b)
	args, err := json.Marshal([]string{"dev", "--data-dir", dataDir, "--metrics-addr", "127.0.0.1:0", "--addr", fmt.Sprintf("127.0.0.1:%d", port),
		"--idp-addr", "127.0.0.1:0", "--sandbox-addr", "127.0.0.1:0"})
	require.NoError(b, err)
	cmd := exec.Command(os.Args[0], "-test.run=^$", "-test.bench=^$")
	cmd.Env = append(os.Environ(), "GANTRY_TEST_MAIN=1", "GANTRY_TEST_ARGS="+string(args), "GANTRY_KEYS=",
		"GANTRY_BIN_DIR="+b.TempDir(), "GOCACHE="+b.TempDir())
	cmd.Stdout = io.Discard
	logs, err := cmd.StderrPipe()
	require.NoError(b, err)
	ready := make(chan struct{})
	var tail lockedTail
	go func() {
		sc := bufio.NewScanner(logs)
		sc.Buffer(make([]byte, 64<<10), 1<<20)
		for sc.Scan() {
			tail.add(sc.Text())
			if strings.Contains(sc.Text(), "the OpenTofu toolchain is ready") {
				close(ready)
			}
		}
		_, _ = io.Copy(io.Discard, logs)
	}()

	b.ResetTimer()
	start := time.Now()
	require.NoError(b, cmd.Start())
	b.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGINT)
		_ = cmd.Wait()
	})
	timeouts := 0
	healthz := fmt.Sprintf("http://127.0.0.1:%d/healthz", port)
	client := &http.Client{Timeout: time.Second}
	served := bench.Until(nil, 20*time.Millisecond, bench.Deadline(30*time.Second), func() bool {
		resp, err := client.Get(healthz)
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK
	})
	if served.TimedOut {
		timeouts++
	}
	b.ReportMetric(served.Took.Seconds(), "healthz_s")

	live := bench.Until(ready, time.Second, bench.Deadline(5*time.Minute), func() bool {
		select {
		case <-ready:
			return true
		default:
			return false
		}
	})
	if live.TimedOut {
		timeouts++
		b.Logf("the toolchain was not ready in time; the last lines of its log:\n%s", tail.String())
	}
	b.ReportMetric(time.Since(start).Seconds(), "first_live_run_s")
	b.StopTimer()
	bench.ReportTimeouts(b, timeouts)
}

// freePort returns a loopback port nothing listens on now.
func freePort(b testing.TB) int {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(b, err)
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port
}

// lockedTail keeps the last lines of a log.
type lockedTail struct {
	mu    sync.Mutex
	lines []string
}

func (t *lockedTail) add(line string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.lines = append(t.lines, line)
	if len(t.lines) > 40 {
		t.lines = t.lines[1:]
	}
}

func (t *lockedTail) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return strings.Join(t.lines, "\n")
}
