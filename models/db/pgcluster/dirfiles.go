package pgcluster

import (
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
)

// What a cluster's data directory says about it: the port it runs on (postmaster.pid,
// the remembered port file) and its server log; and a free port to start on.

// runningPort reports the port of a postmaster already serving dir, from
// postmaster.pid (line 1: pid, line 4: port).
func runningPort(dir string) (int, bool) {
	b, err := os.ReadFile(filepath.Join(dir, "postmaster.pid"))
	if err != nil {
		return 0, false
	}
	lines := strings.Split(string(b), "\n")
	if len(lines) < 4 {
		return 0, false
	}
	pid, err := strconv.Atoi(strings.TrimSpace(lines[0]))
	if err != nil || pid <= 0 {
		return 0, false
	}
	// Signal 0 probes for existence; EPERM means alive but not ours.
	if err := syscall.Kill(pid, 0); err != nil && !errors.Is(err, syscall.EPERM) {
		return 0, false
	}
	// After a container restart, a stale pid file's pid may belong to some
	// unrelated process; on Linux check that it really is postgres.
	if comm, err := os.ReadFile(fmt.Sprintf("/proc/%d/comm", pid)); err == nil && strings.TrimSpace(string(comm)) != "postgres" {
		return 0, false
	}
	port, err := strconv.Atoi(strings.TrimSpace(lines[3]))
	if err != nil || port <= 0 {
		return 0, false
	}
	return port, true
}

// rememberedPort returns the port this Dir last ran on, or 0 if there is
// none or something else holds it now.
func (c *Cluster) rememberedPort() int {
	b, err := os.ReadFile(filepath.Join(c.dir, portFile))
	if err != nil {
		return 0
	}
	port, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil || port <= 0 || port > 65535 {
		return 0
	}
	l, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port)))
	if err != nil {
		return 0
	}
	l.Close()
	return port
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, fmt.Errorf("picking a free port: %w", err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

func (c *Cluster) logSize() int64 {
	fi, err := os.Stat(filepath.Join(c.dir, logFile))
	if err != nil {
		return 0
	}
	return fi.Size()
}

// logTail returns the end of what the server logged since offset: that is
// where postgres explains why it did not start.
func (c *Cluster) logTail(offset int64) string {
	f, err := os.Open(filepath.Join(c.dir, logFile))
	if err != nil {
		return fmt.Sprintf("(no server log: %v)", err)
	}
	defer f.Close()
	if _, err := f.Seek(offset, io.SeekStart); err != nil {
		return fmt.Sprintf("(reading server log: %v)", err)
	}
	b, err := io.ReadAll(f)
	if err != nil {
		return fmt.Sprintf("(reading server log: %v)", err)
	}
	return tail(b)
}

// tail keeps the last few KiB of b: enough for the error, not a whole log.
func tail(b []byte) string {
	const max = 4096
	if len(b) > max {
		b = b[len(b)-max:]
	}
	return strings.TrimSpace(string(b))
}

// shellQuote single-quotes s for /bin/sh.
func shellQuote(s string) string {
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}
