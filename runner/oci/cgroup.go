package oci

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// Cgroups. Every job gets a parent cgroup <root>/<id> that the executor creates and on
// which it sets the memory, pids and cpu limits; the container itself lives in the child
// <root>/<id>/c that runc creates (cgroupsPath in config.json). Limits are hierarchical,
// so the child is bound by them, and the parent's counters survive whatever runc does
// with the child. On cgroup v1 some events are only counted in the cgroup of the task
// that hit them (pids.events "max" is counted where the fork was attempted, i.e. in the
// child), which is why runc runs with --keep: the child stays until `runc delete`, after
// the executor has read both the child's and the parent's counters.

// cgroupHost describes the cgroup hierarchies mounted on the host.
type cgroupHost struct {
	unified string            // cgroup v2-only host: the cgroup2 mountpoint ("" on v1/hybrid)
	v1      map[string]string // v1 controller (or "name=x") -> mountpoint
	mounts  []string          // every cgroup mountpoint (v1 and v2, also hybrid's unified), for cleanup
}

// required v1 controllers / v2 controllers.
var requiredControllers = []string{"memory", "pids", "cpu"}

func detectCgroups() (*cgroupHost, error) {
	data, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		return nil, fmt.Errorf("read mountinfo: %w", err)
	}
	return parseCgroupMounts(data)
}

// parseCgroupMounts reads /proc/self/mountinfo content.
func parseCgroupMounts(mountinfo []byte) (*cgroupHost, error) {
	h := &cgroupHost{v1: map[string]string{}}
	var v2 string
	seen := map[string]bool{}
	sc := bufio.NewScanner(bytes.NewReader(mountinfo))
	sc.Buffer(make([]byte, 64*1024), 1024*1024)
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		sep := -1
		for i, x := range f {
			if x == "-" {
				sep = i
				break
			}
		}
		if sep < 5 || len(f) < sep+4 {
			continue
		}
		mnt, fstype, super := UnescapeMount(f[4]), f[sep+1], f[sep+3]
		switch fstype {
		case "cgroup":
			for _, o := range strings.Split(super, ",") {
				switch o {
				case "rw", "ro", "relatime", "noatime", "nosuid", "nodev", "noexec", "clone_children", "xattr", "noprefix", "cpuset_v2_mode", "favordynmods":
					continue
				}
				if strings.HasPrefix(o, "release_agent=") {
					continue
				}
				if _, ok := h.v1[o]; !ok {
					h.v1[o] = mnt
				}
			}
		case "cgroup2":
			if v2 == "" {
				v2 = mnt
			}
		default:
			continue
		}
		if !seen[mnt] {
			seen[mnt] = true
			h.mounts = append(h.mounts, mnt)
		}
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	hasV1 := false
	for k := range h.v1 {
		if !strings.HasPrefix(k, "name=") {
			hasV1 = true
		}
	}
	if !hasV1 {
		h.v1 = map[string]string{}
		h.unified = v2
	}
	if !hasV1 && v2 == "" {
		return nil, errors.New("no cgroup hierarchy is mounted (neither cgroup v1 controllers nor cgroup2)")
	}
	return h, nil
}

// UnescapeMount undoes /proc/self/mountinfo's octal escapes (\040 for a space, ...).
func UnescapeMount(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+3 < len(s) {
			if n, err := strconv.ParseUint(s[i+1:i+4], 8, 8); err == nil {
				b.WriteByte(byte(n))
				i += 3
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

// check verifies that the memory, pids and cpu controllers are usable.
func (h *cgroupHost) check() error {
	if h.unified != "" {
		data, err := os.ReadFile(filepath.Join(h.unified, "cgroup.controllers"))
		if err != nil {
			return fmt.Errorf("cgroup v2 at %s: %w", h.unified, err)
		}
		have := strings.Fields(string(data))
		for _, c := range requiredControllers {
			if !contains(have, c) {
				return fmt.Errorf("cgroup v2 at %s: the %q controller is not available (cgroup.controllers: %q)", h.unified, c, strings.TrimSpace(string(data)))
			}
		}
		return nil
	}
	for _, c := range requiredControllers {
		mnt, ok := h.v1[c]
		if !ok {
			return fmt.Errorf("cgroup v1: the %q controller is not mounted (expected e.g. /sys/fs/cgroup/%s)", c, c)
		}
		if _, err := os.Stat(filepath.Join(mnt, "cgroup.procs")); err != nil {
			return fmt.Errorf("cgroup v1 %s hierarchy at %s: %w", c, mnt, err)
		}
	}
	return nil
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// jobCgroup is the per-job parent cgroup, rel like "/gantry/<id>".
type jobCgroup struct {
	h   *cgroupHost
	rel string
}

// childName is the cgroup runc creates (and removes) under the job's parent.
const childName = "c"

func (j *jobCgroup) runcPath() string { return j.rel + "/" + childName }

// create makes the parent cgroup(s) and sets the limits on them.
func (h *cgroupHost) create(rel string, l Limits) (*jobCgroup, error) {
	j := &jobCgroup{h: h, rel: rel}
	quota := int64(l.CPUs * 100000)
	if quota < 1000 {
		quota = 1000
	}
	if h.unified != "" {
		dir := filepath.Join(h.unified, rel)
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return j, err
		}
		// Enable the controllers from the root down to the job's parent, so that the
		// parent has the interface files and runc's child gets them too.
		ctl := "+memory +pids +cpu"
		p := h.unified
		for _, elem := range strings.Split(strings.Trim(rel, "/"), "/") {
			if err := writeFile(filepath.Join(p, "cgroup.subtree_control"), ctl); err != nil {
				return j, err
			}
			p = filepath.Join(p, elem)
		}
		if err := writeFile(filepath.Join(dir, "cgroup.subtree_control"), ctl); err != nil {
			return j, err
		}
		writes := [][2]string{
			{"memory.max", strconv.FormatInt(l.MemoryBytes, 10)},
			{"pids.max", strconv.FormatInt(l.Pids, 10)},
			{"cpu.max", fmt.Sprintf("%d 100000", quota)},
		}
		if fileExists(filepath.Join(dir, "memory.swap.max")) {
			writes = append(writes, [2]string{"memory.swap.max", "0"})
		}
		for _, w := range writes {
			if err := writeFile(filepath.Join(dir, w[0]), w[1]); err != nil {
				return j, err
			}
		}
		return j, nil
	}
	mem := filepath.Join(h.v1["memory"], rel)
	pids := filepath.Join(h.v1["pids"], rel)
	cpu := filepath.Join(h.v1["cpu"], rel)
	for _, d := range []string{mem, pids, cpu} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return j, err
		}
	}
	memStr := strconv.FormatInt(l.MemoryBytes, 10)
	writes := [][2]string{
		{filepath.Join(mem, "memory.limit_in_bytes"), memStr},
	}
	if fileExists(filepath.Join(mem, "memory.memsw.limit_in_bytes")) {
		// memory+swap = memory: the job cannot swap (must be written after the memory limit).
		writes = append(writes, [2]string{filepath.Join(mem, "memory.memsw.limit_in_bytes"), memStr})
	}
	writes = append(writes,
		[2]string{filepath.Join(pids, "pids.max"), strconv.FormatInt(l.Pids, 10)},
		[2]string{filepath.Join(cpu, "cpu.cfs_period_us"), "100000"},
		[2]string{filepath.Join(cpu, "cpu.cfs_quota_us"), strconv.FormatInt(quota, 10)},
	)
	for _, w := range writes {
		if err := writeFile(w[0], w[1]); err != nil {
			return j, err
		}
	}
	return j, nil
}

// cgroupCounters are the limit events seen by a job.
type cgroupCounters struct {
	OOMKills   int64 // processes killed by the OOM killer inside the job's cgroup
	MemFailcnt int64 // v1 only: times the memory limit was hit (reclaim may have saved it)
	PidsMax    int64 // forks refused by the pids limit
}

// counters reads the parent's and the child's counters (whichever exist).
func (j *jobCgroup) counters() cgroupCounters {
	var c cgroupCounters
	if j.h.unified != "" {
		for _, d := range []string{filepath.Join(j.h.unified, j.rel), filepath.Join(j.h.unified, j.rel, childName)} {
			c.OOMKills = max(c.OOMKills, readKey(filepath.Join(d, "memory.events"), "oom_kill"))
			c.PidsMax = max(c.PidsMax, readKey(filepath.Join(d, "pids.events"), "max"))
		}
		return c
	}
	for _, d := range []string{filepath.Join(j.h.v1["memory"], j.rel), filepath.Join(j.h.v1["memory"], j.rel, childName)} {
		c.OOMKills = max(c.OOMKills, readKey(filepath.Join(d, "memory.oom_control"), "oom_kill"))
		c.MemFailcnt = max(c.MemFailcnt, readInt(filepath.Join(d, "memory.failcnt")), readInt(filepath.Join(d, "memory.memsw.failcnt")))
	}
	for _, d := range []string{filepath.Join(j.h.v1["pids"], j.rel), filepath.Join(j.h.v1["pids"], j.rel, childName)} {
		c.PidsMax = max(c.PidsMax, readKey(filepath.Join(d, "pids.events"), "max"))
	}
	return c
}

// dirs lists every cgroup directory the job may have left, deepest first: runc creates
// <root>/<id>/c in every hierarchy it knows (also freezer, devices, the unified one in
// hybrid mode ...), and removes only c.
func (j *jobCgroup) dirs() []string {
	var out []string
	for _, m := range j.h.mounts {
		out = append(out, filepath.Join(m, j.rel, childName), filepath.Join(m, j.rel))
	}
	return out
}

// remove deletes the job's cgroups (the child if still there, then the parent) in every
// hierarchy. A cgroup can only be removed once its last task is gone; killed tasks
// may take a moment to exit, hence the retries.
// kill sends SIGKILL to every process left in the job's cgroup directories: a cgroup
// with processes cannot be removed.
func (j *jobCgroup) kill() {
	for _, d := range j.dirs() {
		procs, err := os.ReadFile(filepath.Join(d, "cgroup.procs"))
		if err != nil {
			continue
		}
		for _, f := range strings.Fields(string(procs)) {
			if pid, err := strconv.Atoi(f); err == nil && pid > 1 {
				_ = syscall.Kill(pid, syscall.SIGKILL)
			}
		}
	}
}

func (j *jobCgroup) remove() error {
	var errs []error
	for _, d := range j.dirs() {
		if err := rmdirRetry(d, 3*time.Second); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

func rmdirRetry(dir string, wait time.Duration) error {
	deadline := time.Now().Add(wait)
	for {
		err := syscall.Rmdir(dir)
		if err == nil || errors.Is(err, syscall.ENOENT) {
			return nil
		}
		if !errors.Is(err, syscall.EBUSY) || time.Now().After(deadline) {
			return fmt.Errorf("remove cgroup %s: %w", dir, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func writeFile(path, value string) error {
	f, err := os.OpenFile(path, os.O_WRONLY, 0)
	if err != nil {
		return err
	}
	_, err = f.WriteString(value)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("write %q to %s: %w", value, path, err)
	}
	return nil
}

func fileExists(path string) bool {
	_, err := os.Stat(path)
	return err == nil
}

// readKey returns the value of "key N" in a flat-keyed cgroup file, 0 if absent.
func readKey(path, key string) int64 {
	data, err := os.ReadFile(path)
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(data), "\n") {
		f := strings.Fields(line)
		if len(f) == 2 && f[0] == key {
			n, _ := strconv.ParseInt(f[1], 10, 64)
			return n
		}
	}
	return 0
}

func readInt(path string) int64 {
	data, err := os.ReadFile(path)
	if err != nil {
		return 0
	}
	n, _ := strconv.ParseInt(strings.TrimSpace(string(data)), 10, 64)
	return n
}
