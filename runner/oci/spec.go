// What a run is given (Spec, checked and defaulted by normalize) and what it
// gives back (Result).

package oci

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"time"
)

// Mount is an extra bind mount. Source is a host path (file or directory) that the
// run's uid must be able to read; Destination must exist in the rootfs.
type Mount struct {
	Source, Destination string
	ReadOnly            bool
}

// Limits of one run. Zero values take the defaults (512 MiB, 128, 1.0).
type Limits struct {
	MemoryBytes int64   // memory limit; swap is not allowed on top of it
	Pids        int64   // processes + threads
	CPUs        float64 // CPU bandwidth, in CPUs
}

// Default limits.
const (
	DefaultMemoryBytes = 512 << 20
	DefaultPids        = 128
	DefaultCPUs        = 1.0
)

// Network is the network mode of a run.
type Network int

const (
	// NetworkIsolated gives the run its own network namespace with only lo. The only
	// way out is what a mounted unix socket offers (see cmd/gantry-fwd).
	NetworkIsolated Network = iota
)

// Spec is one command to run in an isolated container.
type Spec struct {
	ID      string   // unique per job, [a-z0-9-]; the container id and cgroup name
	Rootfs  string   // prepared rootfs directory (see PrepareRootfs), mounted read-only as /
	Args    []string // argv inside the container; never put secrets here
	Env     []string // the ONLY environment of the process (nothing is inherited)
	Workdir string   // host directory bind-mounted read-write at /workspace (the cwd); chowned to UID:GID for the run
	Mounts  []Mount  // extra bind mounts (the state socket directory, a secrets directory ...)
	UID     uint32   // an id unused on the host (see UnusedID); 0 is refused
	GID     uint32
	Limits  Limits
	Network Network
	Timeout time.Duration // 0: none (ctx still applies)
	// Interrupt: when ctx ends (a cancel), the container's process gets SIGINT and
	// StopGrace (0: DefaultStopGrace) to exit before it is killed; otherwise it is killed
	// at once. The time limit always kills.
	Interrupt bool
	StopGrace time.Duration
	Stdout    io.Writer // live output; nil discards
	Stderr    io.Writer
}

// Result of a run that ran (a run that could not be started returns an error instead).
type Result struct {
	ExitCode    int  // the process's exit code; 128+signal when killed by a signal
	OOMKilled   bool // the memory limit killed (a process of) the job
	PidsLimited bool // the pids limit refused a fork or a thread
	TimedOut    bool // Spec.Timeout expired and the job was killed
	Duration    time.Duration
	Limits      Limits        // the limits in force (defaults applied), for Explain
	Timeout     time.Duration // Spec.Timeout, for Explain
}

// DefaultStopGrace is Spec.StopGrace's default: OpenTofu, interrupted, finishes the
// provider calls under way and stores the state it wrote within it.
const DefaultStopGrace = 20 * time.Second

var idRe = regexp.MustCompile(`^[a-z0-9][a-z0-9-]{0,62}$`)

// reserved container paths (their mounts are the executor's).
var reservedDests = []string{"/", "/proc", "/dev", "/sys", tmpDir, workspaceDir, "/etc/passwd", "/etc/group"}

func (s *Spec) normalize() error {
	if !idRe.MatchString(s.ID) {
		return fmt.Errorf("invalid job id %q: want [a-z0-9][a-z0-9-]{0,62}", s.ID)
	}
	if len(s.Args) == 0 || !strings.HasPrefix(s.Args[0], "/") {
		return errors.New("Args must name an absolute program path inside the rootfs")
	}
	if s.UID == 0 || s.GID == 0 {
		return errors.New("UID and GID must be non-zero ids unused on the host (see UnusedID)")
	}
	for _, kv := range s.Env {
		if !strings.Contains(kv, "=") {
			return fmt.Errorf("Env entry without '=' (%d bytes)", len(kv)) // never echo: it may be a secret
		}
	}
	if s.Limits.MemoryBytes <= 0 {
		s.Limits.MemoryBytes = DefaultMemoryBytes
	}
	if s.Limits.Pids <= 0 {
		s.Limits.Pids = DefaultPids
	}
	if s.Limits.CPUs <= 0 {
		s.Limits.CPUs = DefaultCPUs
	}
	if s.Network != NetworkIsolated {
		return fmt.Errorf("unknown network mode %d", s.Network)
	}
	if s.Stdout == nil {
		s.Stdout = io.Discard
	}
	if s.Stderr == nil {
		s.Stderr = io.Discard
	}
	for i, m := range s.Mounts {
		if !filepath.IsAbs(m.Source) {
			return fmt.Errorf("mount %d: source %q must be absolute", i, m.Source)
		}
		if _, err := os.Stat(m.Source); err != nil {
			return fmt.Errorf("mount %d: %w", i, err)
		}
		if _, err := rootfsRel(m.Destination); err != nil {
			return fmt.Errorf("mount %d: %w", i, err)
		}
		for _, r := range reservedDests {
			if m.Destination == r || r != "/" && strings.HasPrefix(m.Destination, r+"/") && !strings.HasPrefix(r, "/etc/") {
				return fmt.Errorf("mount %d: destination %s is reserved", i, m.Destination)
			}
		}
	}
	return nil
}
