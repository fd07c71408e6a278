package pgcluster

import (
	"fmt"
	"os"
	"os/user"
	"strconv"
	"syscall"
)

// serverUser is the OS account the cluster runs as when we are root:
// initdb and postgres refuse to run as root, and Debian's `postgresql`
// package creates this account.
const serverUser = "postgres"

// owner is the OS user that runs initdb, pg_ctl and postgres. A nil *owner
// means "the current user", which is the normal case when not root.
type owner struct {
	name     string
	uid, gid uint32
}

// currentOwner returns nil unless we are root, in which case the cluster has
// to belong to the postgres system user.
func currentOwner() (*owner, error) {
	if os.Geteuid() != 0 {
		return nil, nil
	}
	u, err := user.Lookup(serverUser)
	if err != nil {
		return nil, fmt.Errorf("running as root, so the cluster must run as the %q system user, but looking it up failed "+
			"(install the Debian package `postgresql` (apt-get install postgresql)): %w", serverUser, err)
	}
	uid, err := strconv.ParseUint(u.Uid, 10, 32)
	if err != nil {
		return nil, fmt.Errorf("parsing uid of %q: %w", serverUser, err)
	}
	gid, err := strconv.ParseUint(u.Gid, 10, 32)
	if err != nil {
		return nil, fmt.Errorf("parsing gid of %q: %w", serverUser, err)
	}
	return &owner{name: serverUser, uid: uint32(uid), gid: uint32(gid)}, nil
}

// chown hands path to the owner; a no-op for the current user.
func (o *owner) chown(path string) error {
	if o == nil {
		return nil
	}
	if err := os.Chown(path, int(o.uid), int(o.gid)); err != nil {
		return fmt.Errorf("handing %s to the %s user: %w", path, o.name, err)
	}
	return nil
}

// sysProcAttr makes a child process run as the owner.
func (o *owner) sysProcAttr() *syscall.SysProcAttr {
	if o == nil {
		return nil
	}
	return &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: o.uid, Gid: o.gid}}
}

// MkdirTemp creates a new directory under os.TempDir() that the cluster's OS
// user can work in, for use as (the parent of) Options.Dir. It exists because
// os.MkdirTemp and t.TempDir make 0700 directories owned by the caller: when
// the caller is root, the postgres user could not enter them. The caller
// removes the directory (os.RemoveAll) when done.
func MkdirTemp(pattern string) (string, error) {
	dir, err := os.MkdirTemp("", pattern)
	if err != nil {
		return "", fmt.Errorf("creating temp dir: %w", err)
	}
	o, err := currentOwner()
	if err == nil {
		err = o.chown(dir)
	}
	if err != nil {
		os.RemoveAll(dir)
		return "", err
	}
	return dir, nil
}
