package oci

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"time"
)

// Health and Sweep: what the portal checks and cleans around the jobs, not a job.

// Health checks that the executor can run jobs: root, runc present and working, the
// state and bundle roots writable, the memory/pids/cpu cgroup controllers usable.
func (e *Executor) Health(ctx context.Context) error {
	if os.Geteuid() != 0 {
		return errors.New("the oci executor must run as root (runc without rootless mode)")
	}
	x, err := e.resolved()
	if err != nil {
		return err
	}
	vctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	out, err := exec.CommandContext(vctx, x.RuncPath, "--version").CombinedOutput()
	if err != nil {
		return fmt.Errorf("%s --version failed: %v: %s (install the Debian package runc)", x.RuncPath, err, bytes.TrimSpace(out))
	}
	if !bytes.HasPrefix(out, []byte("runc version")) {
		return fmt.Errorf("%s is not runc: %q", x.RuncPath, firstLine(out))
	}
	for _, d := range []string{x.StateRoot, x.BundleRoot} {
		if err := ensurePrivateDir(d); err != nil {
			return fmt.Errorf("%s is not usable: %w", d, err)
		}
		f, err := os.CreateTemp(d, ".health-*")
		if err != nil {
			return fmt.Errorf("%s is not writable: %w", d, err)
		}
		f.Close()
		os.Remove(f.Name())
	}
	cg, err := detectCgroups()
	if err != nil {
		return err
	}
	if err := cg.check(); err != nil {
		return err
	}
	probe, err := cg.create(fmt.Sprintf("/%s/health-%d", x.CgroupRoot, os.Getpid()), Limits{MemoryBytes: DefaultMemoryBytes, Pids: DefaultPids, CPUs: DefaultCPUs})
	if probe != nil {
		if rerr := probe.remove(); err == nil && rerr != nil {
			err = rerr
		}
	}
	if err != nil {
		return fmt.Errorf("cannot create a limited cgroup under /%s: %w", x.CgroupRoot, err)
	}
	return nil
}

func firstLine(b []byte) string {
	line, _, _ := bytes.Cut(b, []byte("\n"))
	return string(line)
}

// Sweep removes what crashed runs left behind: every container in StateRoot (runc
// delete --force), every bundle in BundleRoot, and every job cgroup under CgroupRoot.
// Call it only when no job of this executor runs (e.g. at startup).
func (e *Executor) Sweep(ctx context.Context) error {
	x, err := e.resolved()
	if err != nil {
		return err
	}
	var errs []error
	// The containers are the directories of the state root. Not `runc list`: it reports a
	// container it cannot load on stderr, which is no id, and skips it.
	if ents, err := os.ReadDir(x.StateRoot); err == nil {
		for _, ent := range ents {
			if !ent.IsDir() {
				continue
			}
			// A portal killed while runc created the container leaves a state directory
			// without state.json: runc delete --force removes that directory too, but not
			// the container's processes, which the cgroups' sweep below kills.
			if out, err := x.runc(ctx, "delete", "--force", ent.Name()); err != nil {
				errs = append(errs, fmt.Errorf("runc delete %s: %v: %s", ent.Name(), err, bytes.TrimSpace(out)))
			}
		}
	}
	if ents, err := os.ReadDir(x.BundleRoot); err == nil {
		for _, ent := range ents {
			if err := os.RemoveAll(filepath.Join(x.BundleRoot, ent.Name())); err != nil {
				errs = append(errs, err)
			}
		}
	}
	if cg, err := detectCgroups(); err == nil {
		ids := map[string]bool{}
		for _, m := range cg.mounts {
			ents, _ := os.ReadDir(filepath.Join(m, x.CgroupRoot))
			for _, ent := range ents {
				if ent.IsDir() {
					ids[ent.Name()] = true
				}
			}
		}
		for id := range ids {
			j := &jobCgroup{h: cg, rel: "/" + x.CgroupRoot + "/" + id}
			j.kill() // what a half-created container left running (runc init)
			if err := j.remove(); err != nil {
				errs = append(errs, err)
			}
		}
	}
	return errors.Join(errs...)
}
