package oci

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// RunnerName is the user and group name of the job's uid/gid inside the container.
const RunnerName = "runner"

// rootfsDirs is the directory skeleton of a rootfs (the rootfs contract, see doc.go).
var rootfsDirs = []struct {
	path string
	mode fs.FileMode
}{
	{"bin", 0o755},
	{"etc", 0o755},
	{"tmp", 0o777 | fs.ModeSticky},
	{"workspace", 0o755},
	{"run", 0o755},
	{"run/state", 0o755},
	{"run/secrets", 0o755},
	{"proc", 0o555},
	{"dev", 0o755},
	{"sys", 0o555},
}

// PrepareRootfs creates (or refreshes) a rootfs in dir: the directory skeleton (bin, etc,
// tmp with mode 1777, workspace, run/state, run/secrets, proc, dev, sys), /etc/passwd and
// /etc/group (root, runner, nobody; the executor bind-mounts per-run copies naming the
// run's uid as "runner" over them), and the given files, copied with their permission
// bits. files maps a path inside the rootfs (e.g. "/bin/fwd") to a host file. Files are
// replaced by rename, so refreshing a rootfs that running jobs use is safe.
func PrepareRootfs(dir string, files map[string]string) error {
	if dir == "" {
		return errors.New("PrepareRootfs: empty dir")
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	if err := os.Chmod(dir, 0o755); err != nil {
		return err
	}
	for _, d := range rootfsDirs {
		p := filepath.Join(dir, d.path)
		if err := os.MkdirAll(p, 0o755); err != nil {
			return err
		}
		// MkdirAll is subject to the umask and ignores the sticky bit: set the mode explicitly.
		if err := os.Chmod(p, d.mode); err != nil {
			return err
		}
	}
	passwd, group := passwdFiles(65533, 65533)
	if err := writeAtomic(filepath.Join(dir, "etc/passwd"), passwd, 0o644); err != nil {
		return err
	}
	if err := writeAtomic(filepath.Join(dir, "etc/group"), group, 0o644); err != nil {
		return err
	}
	for dest, src := range files {
		rel, err := rootfsRel(dest)
		if err != nil {
			return err
		}
		if err := copyInto(filepath.Join(dir, rel), src); err != nil {
			return fmt.Errorf("PrepareRootfs: %s -> %s: %w", src, dest, err)
		}
	}
	return nil
}

// rootfsRel turns an absolute container path into a clean path relative to the rootfs.
func rootfsRel(p string) (string, error) {
	if !strings.HasPrefix(p, "/") {
		return "", fmt.Errorf("container path %q must be absolute", p)
	}
	c := filepath.Clean(p)
	if c == "/" || c != p && c+"/" != p {
		return "", fmt.Errorf("container path %q must be clean and not /", p)
	}
	return strings.TrimPrefix(c, "/"), nil
}

func copyInto(dst, src string) error {
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	st, err := in.Stat()
	if err != nil {
		return err
	}
	if !st.Mode().IsRegular() {
		return fmt.Errorf("%s is not a regular file", src)
	}
	if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
		return err
	}
	tmp, err := os.CreateTemp(filepath.Dir(dst), ".tmp-"+filepath.Base(dst)+"-*")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name())
	if _, err := io.Copy(tmp, in); err != nil {
		tmp.Close()
		return err
	}
	// Only the permission bits: no setuid/setgid/sticky in the rootfs.
	if err := tmp.Chmod(st.Mode().Perm()); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	return os.Rename(tmp.Name(), dst)
}

func writeAtomic(dst string, data []byte, mode fs.FileMode) error {
	tmp, err := os.CreateTemp(filepath.Dir(dst), ".tmp-"+filepath.Base(dst)+"-*")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name())
	if _, err := tmp.Write(data); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Chmod(mode); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	return os.Rename(tmp.Name(), dst)
}

// checkRootfs verifies the parts of the rootfs contract a run depends on: /tmp is a
// directory with mode 1777 (runc 1.1 ignores mode= on a tmpfs mount and copies the
// mountpoint's mode, so a 0755 /tmp leaves the job unable to write /tmp), and every
// mountpoint exists, so that runc never has to create one in the shared rootfs.
func checkRootfs(rootfs string, mountpoints []string) error {
	st, err := os.Lstat(filepath.Join(rootfs, "tmp"))
	if err != nil {
		return fmt.Errorf("rootfs %s: /tmp: %w (prepare the rootfs with PrepareRootfs)", rootfs, err)
	}
	if !st.IsDir() || st.Mode().Perm() != 0o777 || st.Mode()&fs.ModeSticky == 0 {
		return fmt.Errorf("rootfs %s: /tmp must be a directory with mode 1777 (it is %s): runc 1.1 ignores mode=1777 on the /tmp tmpfs and copies the mountpoint's mode; run `chmod 1777 %s` or PrepareRootfs",
			rootfs, st.Mode(), filepath.Join(rootfs, "tmp"))
	}
	for _, mp := range mountpoints {
		rel, err := rootfsRel(mp)
		if err != nil {
			return err
		}
		// Walk component by component without following symlinks: a mountpoint that is
		// (or passes through) a symlink is refused.
		p := rootfs
		for _, elem := range strings.Split(rel, "/") {
			p = filepath.Join(p, elem)
			st, err := os.Lstat(p)
			if err != nil {
				return fmt.Errorf("rootfs %s: mountpoint %s does not exist (create it in the rootfs; runc would otherwise create it in the shared rootfs): %w", rootfs, mp, err)
			}
			if st.Mode()&fs.ModeSymlink != 0 {
				return fmt.Errorf("rootfs %s: mountpoint %s goes through a symlink (%s)", rootfs, mp, p)
			}
		}
	}
	return nil
}

// UnusedID returns the first id >= min that is neither a uid in /etc/passwd nor a gid in
// /etc/group, nor any real/effective/saved/fs uid or gid of a running process. Use it as
// both UID and GID of a run: a host user with the job's uid could read the job's
// /proc/<pid>/environ (its credentials). Two concurrent calls may return the same id;
// that is harmless for jobs (each has its own pid namespace and mounts), what matters is
// that no host user or host process has it.
func UnusedID(min uint32) (uint32, error) {
	used := map[uint64]bool{}
	for _, f := range []string{"/etc/passwd", "/etc/group"} {
		if err := idsFromColonFile(f, used); err != nil {
			return 0, err
		}
	}
	procs, err := os.ReadDir("/proc")
	if err != nil {
		return 0, err
	}
	for _, p := range procs {
		if _, err := strconv.Atoi(p.Name()); err != nil {
			continue
		}
		data, err := os.ReadFile(filepath.Join("/proc", p.Name(), "status"))
		if err != nil {
			continue // exited meanwhile
		}
		for _, line := range strings.Split(string(data), "\n") {
			if strings.HasPrefix(line, "Uid:") || strings.HasPrefix(line, "Gid:") {
				for _, f := range strings.Fields(line)[1:] {
					if n, err := strconv.ParseUint(f, 10, 32); err == nil {
						used[n] = true
					}
				}
			}
		}
	}
	for id := uint64(min); id < 1<<32-1; id++ { // 2^32-1 is (uid_t)-1, never valid
		if !used[id] {
			return uint32(id), nil
		}
	}
	return 0, fmt.Errorf("no unused id >= %d", min)
}

// idsFromColonFile adds field 3 (uid or gid) of every line of a passwd/group file.
func idsFromColonFile(path string, used map[uint64]bool) error {
	f, err := os.Open(path)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return nil
		}
		return err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		parts := strings.Split(sc.Text(), ":")
		if len(parts) >= 3 {
			if n, err := strconv.ParseUint(parts[2], 10, 32); err == nil {
				used[n] = true
			}
		}
	}
	return sc.Err()
}
