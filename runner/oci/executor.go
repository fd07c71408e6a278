package oci

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"time"
)

// Executor runs Specs with runc. The zero value works: runc from PATH, state in
// /run/gantry-runc, bundles in /run/gantry-bundles, cgroups under /gantry.
type Executor struct {
	RuncPath   string // default: "runc" from PATH
	StateRoot  string // runc --root; default /run/gantry-runc
	BundleRoot string // private (0700) directory for per-job bundles; default /run/gantry-bundles
	CgroupRoot string // name of the cgroup directory holding the per-job cgroups; default "gantry"
}

var cgroupRootRe = regexp.MustCompile(`^[a-zA-Z0-9_.-]{1,64}$`)

// testHookRunning, if set, is called once config.json has been consumed by runc and
// removed, while the container runs.
var testHookRunning func(id string)

func (e *Executor) resolved() (Executor, error) {
	x := *e
	if x.RuncPath == "" {
		x.RuncPath = "runc"
	}
	p, err := exec.LookPath(x.RuncPath)
	if err != nil {
		return x, fmt.Errorf("runc not found (%s): install the Debian package runc: %w", x.RuncPath, err)
	}
	x.RuncPath = p
	if x.StateRoot == "" {
		x.StateRoot = "/run/gantry-runc"
	}
	if x.BundleRoot == "" {
		x.BundleRoot = "/run/gantry-bundles"
	}
	if x.CgroupRoot == "" {
		x.CgroupRoot = "gantry"
	}
	if !filepath.IsAbs(x.StateRoot) || !filepath.IsAbs(x.BundleRoot) {
		return x, errors.New("StateRoot and BundleRoot must be absolute")
	}
	if !cgroupRootRe.MatchString(x.CgroupRoot) {
		return x, fmt.Errorf("invalid CgroupRoot %q", x.CgroupRoot)
	}
	return x, nil
}

// ensurePrivateDir creates dir (and parents) and makes it 0700 root-only.
func ensurePrivateDir(dir string) error {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	return os.Chmod(dir, 0o700)
}

// Run runs one command in a fresh runc container and always cleans up after it (the
// container, its bundle and its cgroups), whatever happens: success, failure, timeout,
// ctx cancellation or a panic. A non-zero exit, an OOM kill, a refused fork or a timeout
// are reported in the Result with a nil error; an error means the run could not be set
// up or runc failed (or ctx was cancelled: then the Result is filled in as far as known).
func (e *Executor) Run(ctx context.Context, s Spec) (res Result, err error) {
	if err := s.normalize(); err != nil {
		return res, err
	}
	res.Limits, res.Timeout = s.Limits, s.Timeout
	x, err := e.resolved()
	if err != nil {
		return res, err
	}
	rootfs, err := filepath.Abs(s.Rootfs)
	if err == nil {
		rootfs, err = filepath.EvalSymlinks(rootfs) // runc rejects a symlinked root.path
	}
	if err != nil {
		return res, fmt.Errorf("rootfs: %w", err)
	}
	mountpoints := []string{"/proc", "/dev", "/sys", tmpDir, workspaceDir, "/etc/passwd", "/etc/group"}
	for _, m := range s.Mounts {
		mountpoints = append(mountpoints, m.Destination)
	}
	if err := checkRootfs(rootfs, mountpoints); err != nil {
		return res, err
	}
	workdir, err := filepath.Abs(s.Workdir)
	if err == nil {
		workdir, err = filepath.EvalSymlinks(workdir)
	}
	if err != nil {
		return res, fmt.Errorf("workdir: %w", err)
	}
	wst, err := os.Stat(workdir)
	if err != nil || !wst.IsDir() {
		return res, fmt.Errorf("workdir %s is not a directory", workdir)
	}
	s.Workdir = workdir
	cg, err := detectCgroups()
	if err != nil {
		return res, err
	}
	if err := cg.check(); err != nil {
		return res, err
	}
	if err := ensurePrivateDir(x.StateRoot); err != nil {
		return res, fmt.Errorf("state root: %w", err)
	}
	if err := ensurePrivateDir(x.BundleRoot); err != nil {
		return res, fmt.Errorf("bundle root: %w", err)
	}
	bundle := filepath.Join(x.BundleRoot, s.ID)
	if err := os.Mkdir(bundle, 0o700); err != nil {
		if errors.Is(err, fs.ErrExist) {
			return res, fmt.Errorf("job %s: bundle %s exists: the id is in use (or a crashed run left it: see Executor.Sweep)", s.ID, bundle)
		}
		return res, err
	}

	// From here on, everything is undone by the deferred cleanup, also when we panic.
	job := &jobCgroup{h: cg, rel: "/" + x.CgroupRoot + "/" + s.ID}
	origUID, origGID := ownerOf(wst)
	cfgPath := filepath.Join(bundle, "config.json")
	var (
		chowned bool
		cmd     *exec.Cmd
		waitCh  chan error // cmd.Wait's result, once runc is started
		ended   bool       // runc run has returned
		cfgDone chan error // the config writer's result, until received
	)
	defer func() {
		if cmd != nil && !ended {
			_ = x.stop(s.ID, cmd, waitCh) // a panic (or an early return) while runc runs
		}
		if cfgDone != nil {
			unblockFIFO(cfgPath, cfgDone)
		}
		cerr := x.cleanup(s.ID, bundle, job, cmd != nil)
		if chowned {
			if rerr := chownTree(workdir, origUID, origGID); rerr != nil {
				cerr = errors.Join(cerr, fmt.Errorf("restore workdir owner: %w", rerr))
			}
		}
		if cerr != nil {
			err = errors.Join(err, fmt.Errorf("cleanup of job %s: %w", s.ID, cerr))
		}
	}()

	if _, err := cg.create(job.rel, s.Limits); err != nil {
		return res, fmt.Errorf("create cgroup: %w", err)
	}
	passwd, group := passwdFiles(s.UID, s.GID)
	passwdPath, groupPath := filepath.Join(bundle, "passwd"), filepath.Join(bundle, "group")
	if err := os.WriteFile(passwdPath, passwd, 0o644); err != nil {
		return res, err
	}
	if err := os.WriteFile(groupPath, group, 0o644); err != nil {
		return res, err
	}
	chowned = true
	if err := chownTree(workdir, int(s.UID), int(s.GID)); err != nil {
		return res, fmt.Errorf("chown workdir: %w", err)
	}
	cfg, err := buildConfig(&s, rootfs, passwdPath, groupPath, job.runcPath())
	if err != nil {
		return res, err
	}

	// config.json is a FIFO: runc reads the config (with Env, i.e. the job's credentials)
	// from a pipe, so it never touches the disk, and the FIFO is removed right after.
	if err := syscall.Mkfifo(cfgPath, 0o600); err != nil {
		return res, fmt.Errorf("mkfifo config.json: %w", err)
	}
	logPath := filepath.Join(bundle, "runc.log")
	c := exec.Command(x.RuncPath, "--root", x.StateRoot, "--log", logPath, "--log-format", "json",
		"run", "--bundle", bundle, "--no-new-keyring", "--keep", s.ID)
	c.Env = []string{"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"}
	c.Dir = bundle
	c.Stdout, c.Stderr = s.Stdout, s.Stderr
	// No terminal signals from our process group; runc dies with the portal (the
	// container it leaves is removed by the restarted portal's Sweep).
	c.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	c.WaitDelay = 2 * time.Second // don't hang on a pipe some stray process keeps open

	if err := ctx.Err(); err != nil {
		return res, err
	}
	start := time.Now()
	if err := c.Start(); err != nil {
		return res, fmt.Errorf("start runc: %w", err)
	}
	cmd, waitCh, cfgDone = c, make(chan error, 1), make(chan error, 1)
	go func() { waitCh <- c.Wait() }()
	go func() { cfgDone <- writeFIFO(cfgPath, cfg) }()

	var timer <-chan time.Time
	if s.Timeout > 0 {
		t := time.NewTimer(s.Timeout)
		defer t.Stop()
		timer = t.C
	}
	var (
		werr     error
		canceled error
	)
	for !ended {
		select {
		case werr = <-waitCh:
			ended = true
		case cerr := <-cfgDone:
			cfgDone = nil
			if cerr != nil {
				_ = x.stop(s.ID, cmd, waitCh)
				ended = true
				return res, fmt.Errorf("pass config to runc: %w", cerr)
			}
			if testHookRunning != nil {
				testHookRunning(s.ID)
			}
		case <-timer:
			res.TimedOut = true
			werr = x.stop(s.ID, cmd, waitCh)
			ended = true
		case <-ctx.Done():
			canceled = ctx.Err()
			if s.Interrupt {
				werr = x.interrupt(s.ID, cmd, waitCh, s.StopGrace)
			} else {
				werr = x.stop(s.ID, cmd, waitCh)
			}
			ended = true
		}
	}
	res.Duration = time.Since(start)

	var exitErr *exec.ExitError
	switch {
	case werr == nil:
		res.ExitCode = 0
	case errors.As(werr, &exitErr) && exitErr.Exited():
		res.ExitCode = exitErr.ExitCode()
	default:
		// runc itself was killed (stop's last resort) or could not be waited for.
		if canceled == nil && !res.TimedOut {
			return res, fmt.Errorf("runc run: %w", werr)
		}
		res.ExitCode = 128 + int(syscall.SIGKILL)
	}
	if msg := runcErrors(logPath); msg != "" && canceled == nil && !res.TimedOut {
		return res, fmt.Errorf("runc run %s failed (exit %d): %s", s.ID, res.ExitCode, msg)
	}
	cnt := job.counters()
	res.PidsLimited = cnt.PidsMax > 0
	res.OOMKilled = cnt.OOMKills > 0 || (cnt.MemFailcnt > 0 && res.ExitCode == 128+int(syscall.SIGKILL) && !res.TimedOut && canceled == nil)
	if canceled != nil {
		return res, fmt.Errorf("job %s cancelled: %w", s.ID, canceled)
	}
	return res, nil
}

// interrupt stops a cancelled job the way OpenTofu expects: SIGINT to the container's
// init (gantry-fwd, which forwards it to tofu), then, if it has not exited within grace,
// stop's SIGKILL. A container not created yet is killed at once: nothing ran in it.
func (x *Executor) interrupt(id string, cmd *exec.Cmd, waitCh <-chan error, grace time.Duration) error {
	if grace <= 0 {
		grace = DefaultStopGrace
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	_, err := x.runc(ctx, "kill", id, "INT")
	cancel()
	if err != nil {
		return x.stop(id, cmd, waitCh)
	}
	select {
	case err := <-waitCh:
		return err
	case <-time.After(grace):
		return x.stop(id, cmd, waitCh)
	}
}

// stop kills the container (SIGKILL via runc kill, repeated until runc run returns:
// the container may not exist yet) and, as a last resort, runc itself.
func (x *Executor) stop(id string, cmd *exec.Cmd, waitCh <-chan error) error {
	deadline := time.After(5 * time.Second)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		_, _ = x.runc(ctx, "kill", id, "KILL")
		cancel()
		select {
		case err := <-waitCh:
			return err
		case <-deadline:
			_ = cmd.Process.Kill()
			return <-waitCh
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// cleanup removes the container (runc delete --force: it also kills a container that
// still runs; stop has already run `runc kill` on every abnormal path), the job's
// cgroups and the bundle directory.
func (x *Executor) cleanup(id, bundle string, job *jobCgroup, started bool) error {
	var errs []error
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if started {
		stateDir := filepath.Join(x.StateRoot, id)
		if _, err := os.Stat(stateDir); err == nil {
			if out, err := x.runc(ctx, "delete", "--force", id); err != nil {
				if _, serr := os.Stat(stateDir); serr == nil {
					errs = append(errs, fmt.Errorf("runc delete: %v: %s", err, bytes.TrimSpace(out)))
				}
			}
		}
	}
	if err := job.remove(); err != nil {
		errs = append(errs, err)
	}
	if err := os.RemoveAll(bundle); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

// runc runs a runc subcommand against the executor's state root.
func (x *Executor) runc(ctx context.Context, args ...string) ([]byte, error) {
	cmd := exec.CommandContext(ctx, x.RuncPath, append([]string{"--root", x.StateRoot}, args...)...)
	cmd.Env = []string{"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"}
	return cmd.CombinedOutput()
}

// runcErrors returns runc's error-level log messages (runc's own failures, as opposed
// to the container's exit status), "" if none.
func runcErrors(logPath string) string {
	f, err := os.Open(logPath)
	if err != nil {
		return ""
	}
	defer f.Close()
	var msgs []string
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64*1024), 1024*1024)
	for sc.Scan() {
		var entry struct{ Level, Msg string }
		if json.Unmarshal(sc.Bytes(), &entry) == nil && (entry.Level == "error" || entry.Level == "fatal") {
			msgs = append(msgs, entry.Msg)
		}
	}
	return strings.Join(msgs, "; ")
}
