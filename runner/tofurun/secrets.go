package tofurun

import (
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"

	"gantry/models/environment"
	"gantry/runner"
	"gantry/runner/targets"
)

// tokenFile is the name of the cloud token's file in the job's secret directory.
const tokenFile = targets.TokenFile

// SecretDir is a job's private directory of secret files (its workload token): beside
// its working directory, never in it, so no configuration tofu reads and no file the job
// leaves holds a secret. The directory is 0700 and each file 0400, owned by whoever runs
// the job's commands: the portal's user, or, while a runc container runs, the container's
// unused uid (Lend). A file is replaced atomically (a temporary file renamed over it), so
// a reader sees the old token or the new one, never half of either; executors must make
// the DIRECTORY visible to the command (the OCI executor bind-mounts it read-only at
// /run/secrets), since a bind mount of a file would keep showing the file it replaced.
type SecretDir struct {
	path string

	mu       sync.Mutex
	env      []string // VAR=value lines the target's handout sets (SetEnv)
	uid, gid int      // the owner of the directory and its files now
	own      [2]int   // their owner when the command is not running
}

// newSecretDir creates the directory at path (which must not exist).
func newSecretDir(path string) (*SecretDir, error) {
	if err := os.Mkdir(path, 0o700); err != nil {
		return nil, fmt.Errorf("creating the job's secret directory: %w", err)
	}
	st, err := os.Lstat(path)
	if err != nil {
		return nil, err
	}
	sys, ok := st.Sys().(*syscall.Stat_t)
	if !ok {
		return nil, errors.New("the job's secret directory has no owner")
	}
	d := &SecretDir{path: path, uid: int(sys.Uid), gid: int(sys.Gid)}
	d.own = [2]int{d.uid, d.gid}
	return d, nil
}

// Dir is the directory on the host ("" for a nil SecretDir).
func (d *SecretDir) Dir() string {
	if d == nil {
		return ""
	}
	return d.path
}

// Write replaces the file name with data, atomically (write a temporary file, rename it
// over name), owned by the directory's current owner.
func (d *SecretDir) Write(name string, data []byte) error {
	if name == "" || strings.ContainsAny(name, "/\x00") || strings.HasPrefix(name, ".") {
		return fmt.Errorf("invalid secret file name %q", name)
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	f, err := os.CreateTemp(d.path, "."+name+"-*")
	if err != nil {
		return fmt.Errorf("writing the secret file %s: %w", name, err)
	}
	tmp := f.Name()
	err = errors.Join(f.Chmod(0o400), f.Chown(d.uid, d.gid))
	if err == nil {
		_, err = f.Write(data)
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp, filepath.Join(d.path, name))
	}
	if err != nil {
		os.Remove(tmp)
		return fmt.Errorf("writing the secret file %s: %w", name, err)
	}
	return nil
}

// Env is the environment the target's handout set (SetEnv), sorted: its variables name
// the files where the command sees the directory. A nil SecretDir has none.
func (d *SecretDir) Env() []string {
	if d == nil {
		return nil
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	out := slices.Clone(d.env)
	slices.Sort(out)
	return out
}

// SetEnv sets the variables (VAR=value lines) Env returns: the target's, which name files
// here by their path as the command sees it (SecretsAt). A malformed line is refused.
func (d *SecretDir) SetEnv(lines []string) error {
	for _, l := range lines {
		name, _, ok := strings.Cut(l, "=")
		if !ok || name == "" || strings.ContainsAny(l, "\x00\n") {
			return fmt.Errorf("invalid variable %q for the job", name)
		}
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	d.env = slices.Clone(lines)
	return nil
}

// Lend gives the directory and its files to uid:gid (a container's unused ids) until
// giveBack, which returns them to their owner. Files written meanwhile are the
// borrower's too.
func (d *SecretDir) Lend(uid, gid int) (giveBack func() error, err error) {
	if err := d.chown(uid, gid); err != nil {
		return nil, errors.Join(fmt.Errorf("lending the job's secret directory: %w", err), d.chown(d.own[0], d.own[1]))
	}
	return func() error { return d.chown(d.own[0], d.own[1]) }, nil
}

// chown gives the directory and every file in it to uid:gid, never following a link.
func (d *SecretDir) chown(uid, gid int) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	ents, err := os.ReadDir(d.path)
	if err != nil {
		return err
	}
	errs := []error{os.Lchown(d.path, uid, gid)}
	for _, e := range ents {
		errs = append(errs, os.Lchown(filepath.Join(d.path, e.Name()), uid, gid))
	}
	d.uid, d.gid = uid, gid
	return errors.Join(errs...)
}

// remove deletes the directory and its files.
func (d *SecretDir) remove() error { return os.RemoveAll(d.path) }

// SecretsAt is implemented by an executor that shows the job's secret directory at
// another path than the host's (a container's /run/secrets).
type SecretsAt interface {
	SecretsAt(hostDir string) string
}

// NoEgress is implemented by an executor whose jobs reach nothing but the state backend
// and the sandbox cloud (the runc executor's network namespace).
type NoEgress interface {
	NoEgress() bool
}

// secretFiles writes the cloud token into the job's secret directory with what the
// environment's target needs beside it (runner/targets: a kubeconfig, a credential
// configuration, variables naming the token file) and starts its refresher (a static
// credential is written, never refreshed). The live log masks every token minted for
// the job before the job gets it.
func (j *job) secretFiles(ctx context.Context, live io.Writer) error {
	if j.creds.CloudToken == "" {
		return nil
	}
	kind := j.creds.Wiring.Target.OrSandbox().Kind
	if ne, ok := j.r.Exec.(NoEgress); ok && ne.NoEgress() && kind != environment.TargetSandbox {
		return fmt.Errorf("the %s executor's jobs reach only the sandbox cloud, not a %s target: "+
			"run this environment's jobs with tofu/process or tofu/kube (docs/targets.md)", j.r.Exec.Name(), kind)
	}
	files, err := newSecretDir(j.dir + ".secrets")
	if err != nil {
		return err
	}
	j.files = files
	seen := files.Dir()
	if at, ok := j.r.Exec.(SecretsAt); ok {
		seen = at.SecretsAt(seen)
	}
	hand, err := j.creds.Wiring.Handout(seen)
	if err != nil {
		return err
	}
	if err := files.Write(tokenFile, []byte(j.creds.CloudToken)); err != nil {
		return err
	}
	for _, name := range slices.Sorted(maps.Keys(hand.Files)) {
		if err := files.Write(name, hand.Files[name]); err != nil {
			return err
		}
	}
	if err := files.SetEnv(hand.Env); err != nil {
		return err
	}
	if j.creds.Refresh == nil {
		return nil
	}
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	masker, _ := live.(runner.Masker)
	go func() {
		defer close(done)
		runner.Refresher{Credentials: j.creds, Log: j.out, Mask: masker,
			Write: func(token string) error { return files.Write(tokenFile, []byte(token)) }}.Run(ctx)
	}()
	j.stop = func() { cancel(); <-done }
	return nil
}
