// Package oci runs one command in an isolated runc container: the "oci" executor of
// DESIGN.md §6, following the working recipe of
// shared/notes/opentofu-runner-feasibility.md §5 (runc 1.1; crun does not work on
// hybrid-cgroup hosts).
//
// # Isolation
//
// Every Run gets a fresh container: a read-only root (Spec.Rootfs), the process as an
// unused uid/gid (see UnusedID; never 0), noNewPrivileges, all capability sets empty,
// new pid, ipc, uts, mount and network namespaces (the network namespace has only lo:
// the host's 127.0.0.1 is unreachable; the only way out is a bind-mounted unix socket
// served by cmd/gantry-fwd), /proc, a minimal /dev, /sys and the masked/read-only paths
// exactly as `runc spec` generates them, a 256 MiB tmpfs on /tmp, Spec.Workdir
// bind-mounted read-write at /workspace (the cwd), per-run /etc/passwd and /etc/group
// naming the uid "runner", and Spec.Mounts. No seccomp profile is applied (runc spec
// has none either). The process environment is exactly Spec.Env, except that runc adds
// HOME=/tmp (the runner's home) when Spec.Env has no HOME.
//
// # Rootfs contract
//
// The rootfs is prepared once (PrepareRootfs) and shared read-only by all jobs. It must
// hold:
//   - /tmp with mode 1777: runc 1.1 ignores mode=1777 on the /tmp tmpfs and copies the
//     mountpoint's mode; with 0755 the job cannot write /tmp (tofu's go-plugin then fails
//     with "Unrecognized remote plugin message"). Run refuses a rootfs without it.
//   - every mountpoint: /proc, /dev, /sys, /tmp, /workspace, /etc/passwd, /etc/group and
//     the Destination of every Spec.Mounts entry (PrepareRootfs creates /run/state and
//     /run/secrets for the state socket and secret files). Run refuses a missing
//     mountpoint rather than let runc create it in the shared rootfs; mountpoints must
//     not be symlinks.
//   - static binaries only (no libc): /bin/fwd (cmd/gantry-fwd) and the workload (tofu).
//
// # Limits
//
// The memory (no swap on top), pids and cpu limits are set on a per-job parent cgroup
// <CgroupRoot>/<id> created by the executor; runc puts the container in <id>/c
// (cgroupsPath). runc runs with --keep so that the child cgroup survives the container's
// exit until `runc delete`: on cgroup v1 the OOM kill counter (memory.oom_control
// oom_kill) and the refused-fork counter (pids.events max) are only counted in the
// child, not in the parent that holds the limit. Result.OOMKilled and
// Result.PidsLimited come from these counters; Result.Explain names the limit. cgroup v1
// (and hybrid) is what runs here; cgroup v2-only hosts are supported through
// memory.max/memory.swap.max/pids.max/cpu.max and memory.events/pids.events, but that path
// is only unit-tested against a fake cgroupfs.
//
// # Cleanup
//
// Whatever happens (success, failure, timeout, ctx cancellation, a panic while the
// container runs), Run kills the container (runc kill KILL) when it still runs, then runs
// `runc delete --force`, removes the job's cgroups in every hierarchy (runc also creates
// <id>/c under freezer, devices, the unified hierarchy ...) and the bundle directory, and
// gives the workdir back to its previous owner (recursively, never following symlinks).
// If the executor's process dies mid-run, call Executor.Sweep at startup.
//
// # Secrets
//
// Never put secrets in Args (argv is world-readable in /proc). Env reaches runc through
// config.json, which is a FIFO in the 0700 bundle directory: runc reads the config from
// the pipe and the FIFO is removed at once, so the environment never touches the disk
// (runc's state.json does not hold the process environment). While the job runs, the
// environment is readable by root and by the job's own uid (/proc/<pid>/environ), which
// is why the uid must be unused on the host. Alternatively mount a secrets directory
// (readable by the job's uid or gid) at /run/secrets and let fwd export a file with
// -secret-env NAME=/run/secrets/file: then the value is not in config.json at all.
//
// The state socket (or any unix socket mounted in) must be connectable by the job's uid:
// mode 0666 in a traversable directory, or owned by the job's uid.
package oci
