package kubecluster

import (
	"bytes"
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
// binary whose children held its stdout would keep `go test` waiting), and its PID in
// run/<component>.pid. Stop finds them by those files only.

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

// spawn starts one component and records its PID.
func (l layout) spawn(component, binary string, args ...string) error {
	logFile, err := os.OpenFile(l.logFile(component), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	defer logFile.Close()
	fmt.Fprintf(logFile, "\n==== %s %s %s\n", time.Now().Format(time.RFC3339), binary, strings.Join(args, " "))
	cmd := exec.Command(binary, args...)
	cmd.Dir = l.dir
	cmd.Stdout, cmd.Stderr = logFile, logFile
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("starting %s: %w", component, err)
	}
	// Reap it should it exit while we live, noting how it ended in its log (a component that
	// dies silently, killed, is otherwise a mystery); once we exit, it is reparented and runs on.
	go func() {
		err := cmd.Wait()
		if f, ferr := os.OpenFile(l.logFile(component), os.O_WRONLY|os.O_APPEND, 0o644); ferr == nil {
			fmt.Fprintf(f, "==== %s %s exited: %v (%s)\n", time.Now().Format(time.RFC3339), component, err, cmd.ProcessState)
			f.Close()
		}
	}()
	return os.WriteFile(l.pidFile(component), []byte(strconv.Itoa(cmd.Process.Pid)+"\n"), 0o644)
}

// pid returns the live process the component's PID file names, or 0. A process is only taken
// for ours when its command line names the state directory: a PID reused by an unrelated
// process after a reboot or a crash is never signalled.
func (l layout) pid(component string) int {
	data, err := os.ReadFile(l.pidFile(component))
	if err != nil {
		return 0
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(data)))
	if err != nil || pid <= 0 {
		return 0
	}
	if !l.owns(pid) {
		return 0
	}
	return pid
}

// owns reports whether pid is a live (not zombie) process whose command line mentions the
// state directory.
func (l layout) owns(pid int) bool {
	stat, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "stat"))
	if err != nil {
		return false
	}
	// The state letter follows the command name in parentheses, which may itself hold spaces.
	if i := bytes.LastIndexByte(stat, ')'); i < 0 || i+2 >= len(stat) || stat[i+2] == 'Z' || stat[i+2] == 'X' {
		return false
	}
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
	pid := l.pid(component)
	if pid == 0 {
		os.Remove(l.pidFile(component))
		return nil
	}
	// The group is the component's own (Setpgid at spawn): its children that stayed in it go too.
	_ = syscall.Kill(-pid, syscall.SIGTERM)
	if !l.waitGone(pid, grace) {
		_ = syscall.Kill(-pid, syscall.SIGKILL)
		if !l.waitGone(pid, 5*time.Second) {
			return fmt.Errorf("%s (pid %d) did not exit after SIGKILL", component, pid)
		}
	}
	os.Remove(l.pidFile(component))
	return nil
}

// waitGone waits up to d for pid to stop being ours (exited, or a zombie nobody reaped yet).
func (l layout) waitGone(pid int, d time.Duration) bool {
	deadline := time.Now().Add(d)
	for l.owns(pid) {
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
func (l layout) strays() []int {
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
	var out []int
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
		if len(args) > 0 && filepath.Base(string(args[0])) == "containerd-shim-runc-v2" && bytes.Contains(cmdline, []byte(l.containerdSocket())) && l.owns(pid) {
			out = append(out, pid)
		}
	}
	return out
}
