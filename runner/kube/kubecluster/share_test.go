package kubecluster

import (
	"context"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"gantry/bench"
)

// These tests need no cluster: they check how the machine's cluster orders its users, with
// real file locks in a directory of their own.

// lineWriter hands every line written to it to a channel: a test waits on a line, an event,
// instead of sleeping.
type lineWriter chan string

func (w lineWriter) Write(p []byte) (int, error) {
	for _, line := range strings.Split(strings.TrimRight(string(p), "\n"), "\n") {
		w <- line
	}
	return len(p), nil
}

// waitLine waits for a line containing want (the line is written as the writer begins to
// wait for its lock).
func waitLine(t *testing.T, lines <-chan string, want string) string {
	t.Helper()
	for {
		if line := bench.Receive(t, "a line containing "+want, time.Minute, lines); strings.Contains(line, want) {
			return line
		}
	}
}

// TestAStopWaitsForUsersAndNewUsersWaitBehindIt: a stop waits for the user holding the
// cluster and says whom it waits for; a user arriving while the stop waits queues behind it
// (else tests that keep starting would starve a stop), and gets the cluster once the stop is
// done.
func TestAStopWaitsForUsersAndNewUsersWaitBehindIt(t *testing.T) {
	dir := t.TempDir()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	first, err := LockUsers(ctx, dir, false, "TestFirst in /src/a", io.Discard)
	require.NoError(t, err)

	stopLog := make(lineWriter, 16)
	stopped := make(chan func(), 1)
	go func() {
		unlock, err := LockUsers(ctx, dir, true, "TestStop in /src/b", stopLog)
		if err != nil {
			stopLog <- "error: " + err.Error()
			return
		}
		stopped <- unlock
	}()
	line := waitLine(t, stopLog, "TestStop in /src/b waits for the test cluster")
	require.Contains(t, line, "users.lock", "the stop waits for the users, past the gate")
	require.Contains(t, line, "TestFirst in /src/a uses the cluster", "it says whom it waits for")

	laterLog := make(lineWriter, 16)
	later := make(chan func(), 1)
	go func() {
		unlock, err := LockUsers(ctx, dir, false, "TestLater in /src/c", laterLog)
		if err != nil {
			laterLog <- "error: " + err.Error()
			return
		}
		later <- unlock
	}()
	line = waitLine(t, laterLog, "TestLater in /src/c waits for the test cluster")
	require.Contains(t, line, "stop.gate", "a new user waits at the gate while a stop is pending")

	first()
	unlockStop := <-stopped
	select {
	case <-later:
		t.Fatal("a user got the cluster while it was being stopped")
	default:
	}
	// The stop starts the cluster again: what it starts must not inherit its locks.
	child := exec.Command("sleep", "600")
	require.NoError(t, child.Start())
	defer func() { _ = child.Process.Kill(); _ = child.Wait() }()
	unlockStop()
	bench.Receive(t, "the waiting user to get the cluster once the stop is done", 10*time.Second, later)()
	for _, name := range []string{"stop.gate", "users.lock"} {
		f, err := os.Open(filepath.Join(dir, name))
		require.NoError(t, err)
		require.NoError(t, syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB), "%s is free once the stop is done and the user left, whatever the stop started", name)
		f.Close()
	}
}

// TestTheLastRunToEndIsTold: of two runs, the first to leave is not the last; the second is,
// and holds the runs lock until it is done, so no run joins meanwhile.
func TestTheLastRunToEndIsTold(t *testing.T) {
	dir := t.TempDir()
	a, err := JoinTestRun(dir)
	require.NoError(t, err)
	b, err := JoinTestRun(dir)
	require.NoError(t, err)
	require.False(t, a.Leave(), "another run still goes on")
	a.Close()
	require.True(t, b.Leave(), "the last run to end")
	f, err := os.Open(filepath.Join(dir, "runs.lock"))
	require.NoError(t, err)
	defer f.Close()
	require.ErrorIs(t, syscall.Flock(int(f.Fd()), syscall.LOCK_SH|syscall.LOCK_NB), syscall.EWOULDBLOCK,
		"no run joins while the last one stops the cluster")
	b.Close()
	c, err := JoinTestRun(dir)
	require.NoError(t, err)
	require.True(t, c.Leave())
	c.Close()
}

// TestHoldersForgetTheDead: an entry of a process that has gone is dropped, not reported.
func TestHoldersForgetTheDead(t *testing.T) {
	dir := t.TempDir()
	require.NoError(t, os.MkdirAll(filepath.Join(dir, "users"), 0o755))
	entry := register(dir, "TestAlive in /src/a uses the cluster", holderEntry)
	require.NoError(t, os.WriteFile(filepath.Join(dir, "users", "1.1.1.w"), []byte("TestGone waits to use the cluster"), 0o644))
	got := holders(dir)
	require.Contains(t, got, "TestAlive in /src/a uses the cluster")
	require.NotContains(t, got, "TestGone")
	require.NoFileExists(t, filepath.Join(dir, "users", "1.1.1.w"))
	require.Zero(t, waitingUsers(dir), "a waiter that died waits for nothing")
	require.NoError(t, os.Remove(entry))
}

// TestAComponentIsKnownByItsStartTime: the PID file records the PID and its start time; a
// file whose start time is another process's names nothing (the kernel reuses PIDs), and a
// component that exits while Start waits for it is reported with its real exit status and
// the end of its log.
func TestAComponentIsKnownByItsStartTime(t *testing.T) {
	l := layout{dir: t.TempDir()}
	for _, d := range []string{"logs", "run"} {
		require.NoError(t, os.MkdirAll(l.path(d), 0o755))
	}
	s, err := l.spawn("sleeper", "sleep", "600")
	require.NoError(t, err)
	t.Cleanup(func() { _ = s.kill() })
	p, ok := l.process("sleeper")
	require.True(t, ok)
	require.Equal(t, s.proc, p)

	fields := strings.Fields(readFile(t, l.pidFile("sleeper")))
	require.Len(t, fields, 2)
	require.NoError(t, os.WriteFile(l.pidFile("sleeper"), []byte(fields[0]+" 1\n"), 0o644))
	_, ok = l.process("sleeper")
	require.False(t, ok, "a PID whose start time differs is another process")

	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	failing, err := l.spawn("binder", "sh", "-c", "echo 'listen tcp 127.0.0.1:2379: bind: address already in use'; exit 3")
	require.NoError(t, err)
	err = l.waitFor(ctx, "binder", failing, func(context.Context) error { return errors.New("not healthy yet") })
	var exited *exitedError
	require.ErrorAs(t, err, &exited)
	require.Contains(t, err.Error(), "exit status 3")
	require.Contains(t, err.Error(), "not healthy yet")
	require.True(t, exited.addressInUse())
	require.Contains(t, err.Error(), "binder exited: exit status 3", "the log's end holds how it ended")
}

func readFile(t *testing.T, name string) string {
	data, err := os.ReadFile(name)
	require.NoError(t, err)
	return string(data)
}

// TestUsersWaitingGoBeforeTheNextStop: a user waiting behind a stop gets the cluster before
// a stop that asks while it waits (a stop test run many times in a row would otherwise take
// the gate again every time before the waiting user polls it).
func TestUsersWaitingGoBeforeTheNextStop(t *testing.T) {
	dir := t.TempDir()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	first, err := LockUsers(ctx, dir, true, "TestStop#1", io.Discard)
	require.NoError(t, err)

	userLog := make(lineWriter, 16)
	user := make(chan func(), 1)
	go func() {
		unlock, err := LockUsers(ctx, dir, false, "TestUser", userLog)
		if err == nil {
			user <- unlock
		}
	}()
	waitLine(t, userLog, "TestUser waits for the test cluster")

	secondLog := make(lineWriter, 16)
	second := make(chan func(), 1)
	go func() {
		unlock, err := LockUsers(ctx, dir, true, "TestStop#2", secondLog)
		if err == nil {
			second <- unlock
		}
	}()
	line := waitLine(t, secondLog, "TestStop#2 lets the users that wait go first")
	require.Contains(t, line, "TestUser waits to use the cluster")

	first()
	unlockUser := bench.Receive(t, "the waiting user to get the cluster before the next stop", 10*time.Second, user)
	select {
	case <-second:
		t.Fatal("the next stop got the cluster while a user held it")
	default:
	}
	unlockUser()
	bench.Receive(t, "the next stop, once the user is done", 10*time.Second, second)()
}
