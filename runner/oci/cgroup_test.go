package oci

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

const hybridMountinfo = `25 30 0:23 / /sys rw,nosuid,nodev,noexec,relatime shared:7 - sysfs sysfs rw
32 25 0:27 / /sys/fs/cgroup ro,nosuid,nodev,noexec shared:9 - tmpfs tmpfs ro,mode=755
33 32 0:28 / /sys/fs/cgroup/unified rw,nosuid,nodev,noexec,relatime shared:10 - cgroup2 cgroup2 rw,nsdelegate
34 32 0:29 / /sys/fs/cgroup/systemd rw,nosuid,nodev,noexec,relatime shared:11 - cgroup cgroup rw,xattr,name=systemd
36 32 0:31 / /sys/fs/cgroup/cpu,cpuacct rw,nosuid,nodev,noexec,relatime shared:13 - cgroup cgroup rw,cpu,cpuacct
37 32 0:32 / /sys/fs/cgroup/memory rw,nosuid,nodev,noexec,relatime shared:14 - cgroup cgroup rw,memory
38 32 0:33 / /sys/fs/cgroup/pids rw,nosuid,nodev,noexec,relatime shared:15 - cgroup cgroup rw,pids
`

const v2Mountinfo = `25 30 0:23 / /sys rw,nosuid,nodev,noexec,relatime shared:7 - sysfs sysfs rw
33 25 0:28 / /sys/fs/cgroup rw,nosuid,nodev,noexec,relatime shared:10 - cgroup2 cgroup2 rw,nsdelegate,memory_recursiveprot
`

func TestParseCgroupMounts(t *testing.T) {
	h, err := parseCgroupMounts([]byte(hybridMountinfo))
	if err != nil {
		t.Fatal(err)
	}
	if h.unified != "" || h.v1["memory"] != "/sys/fs/cgroup/memory" || h.v1["cpu"] != "/sys/fs/cgroup/cpu,cpuacct" ||
		h.v1["pids"] != "/sys/fs/cgroup/pids" || len(h.mounts) != 5 {
		t.Fatalf("hybrid: %+v", h)
	}
	h, err = parseCgroupMounts([]byte(v2Mountinfo))
	if err != nil {
		t.Fatal(err)
	}
	if h.unified != "/sys/fs/cgroup" || len(h.v1) != 0 || len(h.mounts) != 1 {
		t.Fatalf("v2: %+v", h)
	}
	if _, err := parseCgroupMounts([]byte("25 30 0:23 / /sys rw - sysfs sysfs rw\n")); err == nil {
		t.Fatal("no cgroups accepted")
	}
}

// TestCgroupV2Fake exercises the v2 path against a fake cgroupfs (this host is hybrid).
func TestCgroupV2Fake(t *testing.T) {
	root := t.TempDir()
	touch := func(rel, content string) {
		p := filepath.Join(root, rel)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	touch("cgroup.controllers", "cpuset cpu io memory pids\n")
	for _, d := range []string{"", "gantry/", "gantry/j1/"} {
		touch(d+"cgroup.subtree_control", "")
	}
	for _, f := range []string{"memory.max", "memory.swap.max", "pids.max", "cpu.max"} {
		touch("gantry/j1/"+f, "")
	}
	h := &cgroupHost{unified: root, mounts: []string{root}}
	if err := h.check(); err != nil {
		t.Fatal(err)
	}
	j, err := h.create("/gantry/j1", Limits{MemoryBytes: 64 << 20, Pids: 16, CPUs: 0.5})
	if err != nil {
		t.Fatal(err)
	}
	for rel, want := range map[string]string{
		"cgroup.subtree_control":           "+memory +pids +cpu",
		"gantry/cgroup.subtree_control":    "+memory +pids +cpu",
		"gantry/j1/cgroup.subtree_control": "+memory +pids +cpu",
		"gantry/j1/memory.max":             "67108864",
		"gantry/j1/memory.swap.max":        "0",
		"gantry/j1/pids.max":               "16",
		"gantry/j1/cpu.max":                "50000 100000",
	} {
		if b, _ := os.ReadFile(filepath.Join(root, rel)); string(b) != want {
			t.Errorf("%s = %q, want %q", rel, b, want)
		}
	}
	touch("gantry/j1/memory.events", "low 0\nhigh 0\nmax 5\noom 1\noom_kill 1\n")
	touch("gantry/j1/pids.events", "max 0\n")
	touch("gantry/j1/c/pids.events", "max 2\n")
	if c := j.counters(); c.OOMKills != 1 || c.PidsMax != 2 {
		t.Fatalf("counters %+v", c)
	}
	h2 := &cgroupHost{unified: root}
	touch("cgroup.controllers", "cpu memory\n")
	if err := h2.check(); err == nil || !strings.Contains(err.Error(), `"pids"`) {
		t.Fatalf("missing pids controller: %v", err)
	}
	if got := j.runcPath(); got != "/gantry/j1/c" {
		t.Fatal(got)
	}
}

func TestExplain(t *testing.T) {
	l := Limits{MemoryBytes: 64 << 20, Pids: 16, CPUs: 1}
	for _, tc := range []struct {
		r    Result
		want string
	}{
		{Result{ExitCode: 0, Limits: l}, "the job exited successfully (exit code 0)"},
		{Result{ExitCode: 2, Limits: l}, "the job exited with code 2"},
		{Result{ExitCode: 137, OOMKilled: true, Limits: l}, "the job exceeded its memory limit of 64 MiB and was killed (exit code 137)"},
		{Result{ExitCode: 1, OOMKilled: true, Limits: l}, "a process of the job exceeded the memory limit of 64 MiB and was killed by the OOM killer; the job exited with code 1"},
		{Result{ExitCode: 2, PidsLimited: true, Limits: l}, "the job hit its pids limit of 16 processes/threads: a fork or thread creation was refused; the job exited with code 2"},
		{Result{ExitCode: 137, TimedOut: true, Timeout: 1500e6, Limits: l}, "the job exceeded its time limit of 1.5s and was killed"},
		{Result{ExitCode: 143, Limits: l}, "the job was killed by SIGTERM (exit code 143)"},
	} {
		if got := tc.r.Explain(); got != tc.want {
			t.Errorf("%+v:\n got %q\nwant %q", tc.r, got, tc.want)
		}
	}
}
