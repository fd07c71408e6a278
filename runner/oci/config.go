package oci

import (
	"encoding/json"
	"strconv"
)

// The subset of the OCI runtime spec (1.0.2, as runc 1.1 reads it) that the executor
// writes. Field names and shapes follow opencontainers/runtime-spec specs-go.

type ociSpec struct {
	OCIVersion string     `json:"ociVersion"`
	Process    ociProcess `json:"process"`
	Root       ociRoot    `json:"root"`
	Hostname   string     `json:"hostname"`
	Mounts     []ociMount `json:"mounts"`
	Linux      ociLinux   `json:"linux"`
}

type ociProcess struct {
	Terminal        bool            `json:"terminal"`
	User            ociUser         `json:"user"`
	Args            []string        `json:"args"`
	Env             []string        `json:"env"`
	Cwd             string          `json:"cwd"`
	Capabilities    ociCapabilities `json:"capabilities"`
	Rlimits         []ociRlimit     `json:"rlimits"`
	NoNewPrivileges bool            `json:"noNewPrivileges"`
}

type ociUser struct {
	UID uint32 `json:"uid"`
	GID uint32 `json:"gid"`
}

// ociCapabilities uses non-nil empty slices so that every set is written as [] (an
// absent set would mean "runc's default" to some runtimes).
type ociCapabilities struct {
	Bounding    []string `json:"bounding"`
	Effective   []string `json:"effective"`
	Inheritable []string `json:"inheritable"`
	Permitted   []string `json:"permitted"`
	Ambient     []string `json:"ambient"`
}

type ociRlimit struct {
	Type string `json:"type"`
	Hard uint64 `json:"hard"`
	Soft uint64 `json:"soft"`
}

type ociRoot struct {
	Path     string `json:"path"`
	Readonly bool   `json:"readonly"`
}

type ociMount struct {
	Destination string   `json:"destination"`
	Type        string   `json:"type,omitempty"`
	Source      string   `json:"source,omitempty"`
	Options     []string `json:"options,omitempty"`
}

type ociLinux struct {
	Resources     ociResources   `json:"resources"`
	CgroupsPath   string         `json:"cgroupsPath"`
	Namespaces    []ociNamespace `json:"namespaces"`
	MaskedPaths   []string       `json:"maskedPaths"`
	ReadonlyPaths []string       `json:"readonlyPaths"`
}

// ociResources holds only the device rules: the memory, pids and cpu limits are set on
// the per-job parent cgroup (see cgroup.go), so that their counters survive runc.
type ociResources struct {
	Devices []ociDeviceRule `json:"devices"`
}

type ociDeviceRule struct {
	Allow  bool   `json:"allow"`
	Access string `json:"access"`
}

type ociNamespace struct {
	Type string `json:"type"`
}

// Container paths fixed by the executor (the rootfs contract, see doc.go).
const (
	workspaceDir = "/workspace"
	tmpDir       = "/tmp"
	tmpfsSize    = "256m"
	hostname     = "sandbox"
)

// buildConfig renders config.json for one run. rootfs must be absolute and free of
// symlinks (runc rejects a symlinked root.path); passwd and group are the per-run
// files bind-mounted over /etc/passwd and /etc/group.
func buildConfig(s *Spec, rootfs, passwd, group, cgroupsPath string) ([]byte, error) {
	env := s.Env
	if env == nil {
		env = []string{}
	}
	mounts := []ociMount{
		// The first seven are exactly what `runc spec` (1.1) generates.
		{Destination: "/proc", Type: "proc", Source: "proc"},
		{Destination: "/dev", Type: "tmpfs", Source: "tmpfs", Options: []string{"nosuid", "strictatime", "mode=755", "size=65536k"}},
		{Destination: "/dev/pts", Type: "devpts", Source: "devpts", Options: []string{"nosuid", "noexec", "newinstance", "ptmxmode=0666", "mode=0620", "gid=5"}},
		{Destination: "/dev/shm", Type: "tmpfs", Source: "shm", Options: []string{"nosuid", "noexec", "nodev", "mode=1777", "size=65536k"}},
		{Destination: "/dev/mqueue", Type: "mqueue", Source: "mqueue", Options: []string{"nosuid", "noexec", "nodev"}},
		{Destination: "/sys", Type: "sysfs", Source: "sysfs", Options: []string{"nosuid", "noexec", "nodev", "ro"}},
		{Destination: "/sys/fs/cgroup", Type: "cgroup", Source: "cgroup", Options: []string{"nosuid", "noexec", "nodev", "relatime", "ro"}},
		// runc 1.1 ignores mode= here and copies the mode of the rootfs's /tmp (must be 1777).
		{Destination: tmpDir, Type: "tmpfs", Source: "tmpfs", Options: []string{"nosuid", "nodev", "mode=1777", "size=" + tmpfsSize}},
		{Destination: workspaceDir, Type: "bind", Source: s.Workdir, Options: []string{"rbind", "rw", "nosuid", "nodev"}},
		{Destination: "/etc/passwd", Type: "bind", Source: passwd, Options: []string{"bind", "ro", "nosuid", "nodev", "noexec"}},
		{Destination: "/etc/group", Type: "bind", Source: group, Options: []string{"bind", "ro", "nosuid", "nodev", "noexec"}},
	}
	for _, m := range s.Mounts {
		opts := []string{"rbind", "nosuid", "nodev"}
		if m.ReadOnly {
			opts = append(opts, "ro")
		} else {
			opts = append(opts, "rw")
		}
		mounts = append(mounts, ociMount{Destination: m.Destination, Type: "bind", Source: m.Source, Options: opts})
	}
	// NetworkIsolated (the only mode): a new netns, in which runc brings up lo only.
	nss := []ociNamespace{{"pid"}, {"ipc"}, {"uts"}, {"mount"}, {"network"}}
	cfg := ociSpec{
		OCIVersion: "1.0.2-dev",
		Process: ociProcess{
			User:            ociUser{UID: s.UID, GID: s.GID},
			Args:            s.Args,
			Env:             env,
			Cwd:             workspaceDir,
			Capabilities:    ociCapabilities{Bounding: []string{}, Effective: []string{}, Inheritable: []string{}, Permitted: []string{}, Ambient: []string{}},
			Rlimits:         []ociRlimit{{Type: "RLIMIT_NOFILE", Hard: 1024, Soft: 1024}},
			NoNewPrivileges: true,
		},
		Root:     ociRoot{Path: rootfs, Readonly: true},
		Hostname: hostname,
		Mounts:   mounts,
		Linux: ociLinux{
			Resources:   ociResources{Devices: []ociDeviceRule{{Allow: false, Access: "rwm"}}},
			CgroupsPath: cgroupsPath,
			Namespaces:  nss,
			MaskedPaths: []string{
				"/proc/acpi", "/proc/asound", "/proc/kcore", "/proc/keys", "/proc/latency_stats",
				"/proc/timer_list", "/proc/timer_stats", "/proc/sched_debug", "/sys/firmware", "/proc/scsi",
			},
			ReadonlyPaths: []string{"/proc/bus", "/proc/fs", "/proc/irq", "/proc/sys", "/proc/sysrq-trigger"},
		},
	}
	return json.Marshal(cfg)
}

// passwdFiles renders the per-run /etc/passwd and /etc/group: root, the runner (the
// run's unused uid/gid, named "runner") and nobody.
func passwdFiles(uid, gid uint32) (passwd, group []byte) {
	u, g := strconv.FormatUint(uint64(uid), 10), strconv.FormatUint(uint64(gid), 10)
	passwd = []byte("root:x:0:0:root:/root:/bin/false\n" +
		RunnerName + ":x:" + u + ":" + g + ":" + RunnerName + ":/tmp:/bin/false\n" +
		"nobody:x:65534:65534:nobody:/nonexistent:/bin/false\n")
	group = []byte("root:x:0:\n" + RunnerName + ":x:" + g + ":\n" + "nogroup:x:65534:\n")
	return passwd, group
}
