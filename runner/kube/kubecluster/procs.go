package kubecluster

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// The components run as daemons of the state directory, not children of whoever started
// them: each in a process group of its own (a Ctrl-C, a `timeout` or a signal to the caller's
// group never takes etcd or containerd with it), stdin closed and output to a log file (a test
// binary whose children held its stdout would keep `go test` waiting), and its PID with its
// start time in run/<component>.pid. Stop finds them by those files only.

// startOrder lists the components in the order Start starts them; Stop goes the other way
// round, with pods deleted between the controllers and the kubelet.
func startOrder() []string {
	return []string{"etcd", "containerd", "kube-apiserver", "kube-controller-manager", "kube-scheduler", "kubelet"}
}

// rotateLogs keeps one earlier start's logs (<component>.previous.log) and starts afresh.
func (l layout) rotateLogs() {
	for _, c := range startOrder() {
		_ = os.Rename(l.logFile(c), strings.TrimSuffix(l.logFile(c), ".log")+".previous.log")
	}
}

// proc names one process for its whole life: a PID alone is not enough, as the kernel hands
// PIDs out again (pid_max is 32768 on the test machines, and a busy build wraps it in minutes),
// and signalling a PID that now belongs to another process — even another component of the
// cluster — kills the wrong thing. The start time, in clock ticks since boot
// (/proc/<pid>/stat, field 22), never repeats for a PID.
type proc struct {
	pid   int
	start uint64
}

// procStat reads a process's state letter and start time; ok is false when it is gone.
func procStat(pid int) (state byte, start uint64, ok bool) {
	stat, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "stat"))
	if err != nil {
		return 0, 0, false
	}
	// The fields after the command name, which sits in parentheses and may hold spaces:
	// state (field 3) first, start time (field 22) twentieth.
	i := bytes.LastIndexByte(stat, ')')
	if i < 0 {
		return 0, 0, false
	}
	fields := strings.Fields(string(stat[i+1:]))
	if len(fields) < 20 || len(fields[0]) != 1 {
		return 0, 0, false
	}
	start, err = strconv.ParseUint(fields[19], 10, 64)
	if err != nil {
		return 0, 0, false
	}
	return fields[0][0], start, true
}

// lookup returns the live process with this PID now (not a zombie), with its start time.
func lookup(pid int) (proc, bool) {
	state, start, ok := procStat(pid)
	if !ok || state == 'Z' || state == 'X' {
		return proc{}, false
	}
	return proc{pid: pid, start: start}, true
}

// alive reports whether the very process p named still runs (not a zombie).
func (p proc) alive() bool {
	now, ok := lookup(p.pid)
	return ok && now.start == p.start
}

func (p proc) String() string { return strconv.Itoa(p.pid) }

// spawned is a component this process started: exited is closed once it has exited and err
// says how (its real exit status, which a PID file cannot tell).
type spawned struct {
	proc
	exited chan struct{}
	err    error
}

// exitErr returns how the process ended, or nil while it runs.
func (s *spawned) exitErr() error {
	select {
	case <-s.exited:
		if s.err == nil {
			return errors.New("exit status 0")
		}
		return s.err
	default:
		return nil
	}
}

// spawn starts one component and records its PID and start time.
func (l layout) spawn(component, binary string, args ...string) (*spawned, error) {
	logFile, err := os.OpenFile(l.logFile(component), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, err
	}
	defer logFile.Close()
	fmt.Fprintf(logFile, "\n==== %s %s %s\n", time.Now().Format(time.RFC3339), binary, strings.Join(args, " "))
	cmd := exec.Command(binary, args...)
	cmd.Dir = l.dir
	cmd.Stdout, cmd.Stderr = logFile, logFile
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if l.tied {
		cmd.SysProcAttr.Pdeathsig = syscall.SIGKILL
	}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("starting %s: %w", component, err)
	}
	s := &spawned{exited: make(chan struct{})}
	s.pid = cmd.Process.Pid
	// The child is ours until we reap it, so its PID cannot be reused before we read its
	// start time; should it already have exited, it is a zombie whose stat still answers.
	_, s.start, _ = procStat(s.pid)
	// Reap it should it exit while we live, noting how it ended in its log (a component that
	// dies silently, killed, is otherwise a mystery); once we exit, it is reparented and runs on.
	go func() {
		s.err = cmd.Wait()
		if f, ferr := os.OpenFile(l.logFile(component), os.O_WRONLY|os.O_APPEND, 0o644); ferr == nil {
			fmt.Fprintf(f, "==== %s %s exited: %v (%s)\n", time.Now().Format(time.RFC3339), component, s.err, cmd.ProcessState)
			f.Close()
		}
		close(s.exited)
	}()
	pidLine := fmt.Sprintf("%d %d\n", s.pid, s.start)
	if err := os.WriteFile(l.pidFile(component), []byte(pidLine), 0o644); err != nil {
		return nil, err
	}
	return s, nil
}

// process returns the live process the component's PID file names. It is ours only when its
// start time is the one recorded at spawn (a PID file written before start times were
// recorded falls back to the command line naming the state directory), so a PID the kernel
// gave to another process since is never signalled.
func (l layout) process(component string) (proc, bool) {
	data, err := os.ReadFile(l.pidFile(component))
	if err != nil {
		return proc{}, false
	}
	fields := strings.Fields(string(data))
	if len(fields) == 0 {
		return proc{}, false
	}
	pid, err := strconv.Atoi(fields[0])
	if err != nil || pid <= 0 {
		return proc{}, false
	}
	p, ok := lookup(pid)
	if !ok {
		return proc{}, false
	}
	if len(fields) > 1 {
		start, err := strconv.ParseUint(fields[1], 10, 64)
		return p, err == nil && start == p.start
	}
	return p, l.names(pid)
}

// pid returns the PID of the component's live process, or 0.
func (l layout) pid(component string) int {
	if p, ok := l.process(component); ok {
		return p.pid
	}
	return 0
}

// names reports whether pid's command line mentions the state directory.
func (l layout) names(pid int) bool {
	cmdline, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "cmdline"))
	return err == nil && bytes.Contains(cmdline, []byte(l.dir))
}

// running lists the components whose PID files name live processes.
func (l layout) running() []string {
	var out []string
	for _, c := range startOrder() {
		if l.pid(c) != 0 {
			out = append(out, c)
		}
	}
	return out
}

// stopComponent sends SIGTERM to the component's process group, waits up to grace for the
// process to go, then kills the group. The PID file goes last.
func (l layout) stopComponent(component string, grace time.Duration) error {
	p, ok := l.process(component)
	if !ok {
		os.Remove(l.pidFile(component))
		return nil
	}
	// The group is the component's own (Setpgid at spawn): its children that stayed in it go too.
	_ = syscall.Kill(-p.pid, syscall.SIGTERM)
	if !waitGone(p, grace) {
		_ = syscall.Kill(-p.pid, syscall.SIGKILL)
		if !waitGone(p, 5*time.Second) {
			return fmt.Errorf("%s (pid %d) did not exit after SIGKILL", component, p.pid)
		}
	}
	os.Remove(l.pidFile(component))
	return nil
}

// waitGone waits up to d for p to exit (or become a zombie nobody reaped yet). d is how long
// a component is given to stop before it is killed, a choice of the protocol, not a guess at
// how fast the machine is.
func waitGone(p proc, d time.Duration) bool {
	deadline := time.Now().Add(d)
	for p.alive() {
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(50 * time.Millisecond)
	}
	return true
}

// strays lists the processes not started from a PID file whose command line names the state
// directory: containerd's shims (`containerd-shim-runc-v2 -address <dir>/containerd/...`), which
// put themselves in process groups of their own so that they outlive containerd.
func (l layout) strays() []proc {
	known := map[int]bool{}
	for _, c := range startOrder() {
		if pid := l.pid(c); pid != 0 {
			known[pid] = true
		}
	}
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return nil
	}
	var out []proc
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || known[pid] || pid == os.Getpid() {
			continue
		}
		cmdline, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err != nil {
			continue
		}
		// Only the shims: a shell or a test that merely names the directory is left alone.
		args := bytes.Split(cmdline, []byte{0})
		if len(args) == 0 || filepath.Base(string(args[0])) != "containerd-shim-runc-v2" || !bytes.Contains(cmdline, []byte(l.containerdSocket())) {
			continue
		}
		if p, ok := lookup(pid); ok {
			out = append(out, p)
		}
	}
	return out
}

// kill ends a process this one spawned and waits until it is reaped.
func (s *spawned) kill() error {
	err := syscall.Kill(-s.pid, syscall.SIGKILL)
	<-s.exited
	return err
}
