package oci

import (
	"fmt"
	"strings"
	"syscall"
)

var signalNames = map[syscall.Signal]string{
	syscall.SIGHUP: "SIGHUP", syscall.SIGINT: "SIGINT", syscall.SIGQUIT: "SIGQUIT", syscall.SIGILL: "SIGILL",
	syscall.SIGTRAP: "SIGTRAP", syscall.SIGABRT: "SIGABRT", syscall.SIGBUS: "SIGBUS", syscall.SIGFPE: "SIGFPE",
	syscall.SIGKILL: "SIGKILL", syscall.SIGUSR1: "SIGUSR1", syscall.SIGSEGV: "SIGSEGV", syscall.SIGUSR2: "SIGUSR2",
	syscall.SIGPIPE: "SIGPIPE", syscall.SIGALRM: "SIGALRM", syscall.SIGTERM: "SIGTERM", syscall.SIGXCPU: "SIGXCPU",
	syscall.SIGXFSZ: "SIGXFSZ", syscall.SIGSYS: "SIGSYS",
}

// SignalName names signal n ("SIGTERM"), or "signal n".
func SignalName(n int) string {
	if s, ok := signalNames[syscall.Signal(n)]; ok {
		return s
	}
	return fmt.Sprintf("signal %d", n)
}

func formatBytes(n int64) string {
	switch {
	case n >= 1<<30 && n%(1<<30) == 0:
		return fmt.Sprintf("%d GiB", n>>30)
	case n >= 1<<20 && n%(1<<20) == 0:
		return fmt.Sprintf("%d MiB", n>>20)
	case n >= 1<<20:
		return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20))
	default:
		return fmt.Sprintf("%d bytes", n)
	}
}

// Explain says in one or two sentences how the run ended, naming the limit that
// ended it, e.g. "the job exceeded its memory limit of 64 MiB and was killed (exit code 137)".
func (r Result) Explain() string {
	var parts []string
	exitShown := false
	switch {
	case r.TimedOut:
		parts = append(parts, fmt.Sprintf("the job exceeded its time limit of %s and was killed", r.Timeout))
		exitShown = true
	case r.OOMKilled && r.ExitCode == 128+int(syscall.SIGKILL):
		parts = append(parts, fmt.Sprintf("the job exceeded its memory limit of %s and was killed (exit code %d)", formatBytes(r.Limits.MemoryBytes), r.ExitCode))
		exitShown = true
	case r.OOMKilled:
		parts = append(parts, fmt.Sprintf("a process of the job exceeded the memory limit of %s and was killed by the OOM killer", formatBytes(r.Limits.MemoryBytes)))
	}
	if r.PidsLimited {
		parts = append(parts, fmt.Sprintf("the job hit its pids limit of %d processes/threads: a fork or thread creation was refused", r.Limits.Pids))
	}
	if !exitShown {
		switch {
		case r.ExitCode == 0:
			parts = append(parts, "the job exited successfully (exit code 0)")
		case r.ExitCode > 128 && r.ExitCode < 128+65:
			parts = append(parts, fmt.Sprintf("the job was killed by %s (exit code %d)", SignalName(r.ExitCode-128), r.ExitCode))
		default:
			parts = append(parts, fmt.Sprintf("the job exited with code %d", r.ExitCode))
		}
	}
	s := strings.Join(parts, "; ")
	return s
}
