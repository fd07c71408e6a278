package main

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"time"

	"gantry/runner"
	"gantry/runner/kube"
	"gantry/runner/oci"
	"gantry/runner/tofu"
	"gantry/runner/tofurun"
)

// The live executors: ready ones for gantry serve (which never builds and refuses a
// missing binary), deferred ones for gantry dev (offered at once, prepared in the
// background while the portal serves).

// readyRunners are serve's live runners, from prebuilt binaries: gantry serve never
// builds (a production host has no Go toolchain), so a binary that is missing is an
// error saying where it comes from. Without --tofu no live runner is offered.
func (s systemFlags) readyRunners(ctx context.Context, logger *slog.Logger, wrap func(runner.Runner) runner.Runner) ([]runner.Runner, error) {
	if s.tofuPath == "" && s.providerPath == "" {
		return nil, errors.New("no --tofu and --sandbox-provider given (gantry serve never builds them: build them with `go tool task tofu:build build` where Go is installed and copy bin/ here)")
	}
	for _, b := range []struct{ flag, path string }{{"--tofu", s.tofuPath}, {"--sandbox-provider", s.providerPath}} {
		if err := binaryPresent(b.flag, b.path); err != nil {
			return nil, err
		}
	}
	if s.cloudEndpoint == "" {
		return nil, errors.New("no --cloud-endpoint: jobs would have no cloud to reach")
	}
	workDir, toolDir, err := s.liveDirs()
	if err != nil {
		return nil, err
	}
	mirror, err := s.operatorMirror()
	if err != nil {
		return nil, err
	}
	m := tofu.Mirroring{Operator: mirror}
	if s.s3ProviderPath != "" {
		if err := binaryPresent("--s3-provider", s.s3ProviderPath); err != nil {
			return nil, err
		}
		m.Providers = append(m.Providers, tofu.S3Provider(s.s3ProviderPath))
	}
	tc, err := m.Toolchain(s.tofuPath, s.providerPath, toolDir)
	if err != nil {
		return nil, err
	}
	dirs := s.replicaDirs(workDir)
	if err := dirs.sweepScratch(logger); err != nil {
		return nil, err
	}
	plugins := &tofu.PluginCache{Mirror: tc.Mirror, Root: filepath.Join(workDir, "plugins")}
	process := &tofurun.Process{Tofu: tc.Tofu, CLIConfig: tc.CLIConfig, CloudEndpoint: s.cloudEndpoint}
	runners := []runner.Runner{wrap(tofurun.New(process, dirs.Jobs, plugins))}
	if err := s.ociPossible(); err != nil {
		logger.Warn("isolated (runc) jobs are not available", "error", err)
		return runners, nil
	}
	if err := binaryPresent("--fwd", s.fwdPath); err != nil {
		logger.Warn("isolated (runc) jobs are not available", "error", err)
		return runners, nil
	}
	isolated, err := s.ociRunner(ctx, tc, s.fwdPath, plugins, workDir)
	if err != nil {
		logger.Warn("isolated (runc) jobs are not available", "error", err)
		return runners, nil
	}
	return append(runners, wrap(isolated)), nil
}

// checkPrebuilt refuses, before anything starts, what serve cannot do without building:
// a binary given but missing, or a live default runner without its binaries.
func (s systemFlags) checkPrebuilt() error {
	for _, b := range []struct{ flag, path string }{{"--tofu", s.tofuPath}, {"--sandbox-provider", s.providerPath}, {"--fwd", s.fwdPath}} {
		if b.path != "" {
			if err := binaryPresent(b.flag, b.path); err != nil {
				return err
			}
		}
	}
	if s.runnerName == kube.Name && !s.kube.enabled() {
		return fmt.Errorf("--runner %s: --kube-image is not set", s.runnerName)
	}
	if strings.HasPrefix(s.runnerName, "tofu/") && s.runnerName != kube.Name {
		need := []struct{ flag, path string }{{"--tofu", s.tofuPath}, {"--sandbox-provider", s.providerPath}}
		if s.runnerName == "tofu/oci" {
			need = append(need, struct{ flag, path string }{"--fwd", s.fwdPath})
		}
		for _, b := range need {
			if err := binaryPresent(b.flag, b.path); err != nil {
				return fmt.Errorf("--runner %s: %w", s.runnerName, err)
			}
		}
	}
	return nil
}

// binaryPresent refuses a binary flag that is unset or names no executable file.
func binaryPresent(flag, path string) error {
	const why = "gantry serve never builds (a production host has no Go toolchain): build it with `go tool task tofu:build build` where Go is installed and copy it here"
	if path == "" {
		return fmt.Errorf("%s is not set; %s", flag, why)
	}
	st, err := os.Stat(path)
	if err != nil {
		return fmt.Errorf("%s %s: %w; %s", flag, path, err, why)
	}
	if !st.Mode().IsRegular() || st.Mode().Perm()&0o111 == 0 {
		return fmt.Errorf("%s %s is not an executable file", flag, path)
	}
	return nil
}

// deferredRunners are dev's live runners, offered at once and prepared by the returned
// function, which builds the toolchain from the source tree (the first build of OpenTofu
// takes minutes) while the portal already serves. Their jobs wait meanwhile, and the
// executors page and the run pages show how far the build has come.
func (s systemFlags) deferredRunners(logger *slog.Logger, wrap func(runner.Runner) runner.Runner) ([]runner.Runner, func(context.Context), error) {
	if s.cloudEndpoint == "" {
		return nil, nil, errors.New("no --cloud-endpoint: jobs would have no cloud to reach")
	}
	root, err := tofu.RepoRoot(".")
	if err != nil {
		return nil, nil, fmt.Errorf("gantry dev builds OpenTofu from the source tree; run it there: %w", err)
	}
	progress := &tofu.BuildProgress{}
	status := func() runner.Preparation {
		step, done, total := progress.Counts()
		return runner.Preparation{What: "the OpenTofu build", Step: step, Done: done, Total: total}
	}
	process := runner.NewDeferred("tofu/process", false, status)
	var isolated *runner.Deferred
	ociErr := s.ociPossible()
	if ociErr == nil {
		isolated = runner.NewDeferred("tofu/oci", true, status)
	} else {
		logger.Warn("isolated (runc) jobs are not available", "error", ociErr)
	}
	prepare := func(ctx context.Context) {
		started := time.Now()
		stop := logProgress(ctx, logger, status)
		defer stop()
		fail := func(err error) {
			logger.Error("the OpenTofu toolchain could not be prepared; live runs fail until Gantry restarts", "error", err)
			process.Fail(err)
			if isolated != nil {
				isolated.Fail(err)
			}
		}
		workDir, toolDir, err := s.liveDirs()
		if err != nil {
			fail(err)
			return
		}
		mirror, err := s.operatorMirror()
		if err != nil {
			fail(err)
			return
		}
		tc, fwd, err := tofu.Build{Root: root, BinDir: s.binDir, Dir: toolDir, Fwd: isolated != nil, Providers: builtThirdParties(ctx, root, logger),
			Operator: mirror, Progress: progress, Log: logWriter{logger}}.Run(ctx)
		if err != nil {
			fail(err)
			return
		}
		dirs := s.replicaDirs(workDir)
		if err := dirs.sweepScratch(logger); err != nil {
			fail(err)
			return
		}
		plugins := &tofu.PluginCache{Mirror: tc.Mirror, Root: filepath.Join(workDir, "plugins")}
		p := &tofurun.Process{Tofu: tc.Tofu, CLIConfig: tc.CLIConfig, CloudEndpoint: s.cloudEndpoint}
		if err := process.Resolve(wrap(tofurun.New(p, dirs.Jobs, plugins))); err != nil {
			fail(err)
			return
		}
		if isolated != nil {
			progress.SetStep("preparing the runc rootfs")
			r, err := s.ociRunner(ctx, tc, fwd, plugins, workDir)
			if err != nil {
				logger.Error("isolated (runc) jobs are not available", "error", err)
				isolated.Fail(err)
				return
			}
			if err := isolated.Resolve(wrap(r)); err != nil {
				isolated.Fail(err)
				return
			}
		}
		logger.Info("the OpenTofu toolchain is ready: live runs start now", "took", time.Since(started).Round(time.Second).String())
	}
	runners := []runner.Runner{process}
	if isolated != nil {
		runners = append(runners, isolated)
	}
	return runners, prepare, nil
}

// logProgress logs the build's progress every 15 seconds until stopped.
func logProgress(ctx context.Context, logger *slog.Logger, status func() runner.Preparation) (stop func()) {
	ctx, cancel := context.WithCancel(ctx)
	go func() {
		tick := time.NewTicker(15 * time.Second)
		defer tick.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
				p := status()
				logger.Info(p.Waiting(), "step", p.Step)
			}
		}
	}()
	return cancel
}

// ociPossible says why runc jobs cannot run here, or nil.
func (s systemFlags) ociPossible() error {
	if s.stateSocket == "" || s.cloudSocket == "" {
		return errors.New("--state-socket and --cloud-socket are not set")
	}
	if os.Geteuid() != 0 {
		return errors.New("runc jobs need Gantry to run as root")
	}
	if _, err := exec.LookPath("runc"); err != nil {
		return errors.New("runc is not installed (Debian package runc)")
	}
	return nil
}

// ociRunner builds the runc executor: a read-only rootfs with tofu, fwd and the mirror,
// and the state and cloud sockets bind-mounted into every job.
func (s systemFlags) ociRunner(ctx context.Context, tc tofu.Toolchain, fwd string, plugins *tofu.PluginCache, workDir string) (runner.Runner, error) {
	if err := s.ociPossible(); err != nil {
		return nil, err
	}
	// Containers a crashed portal left behind are ended before new jobs start. The runc
	// roots and cgroup name belong to this replica in this work directory, so two
	// replicas on one node (or a test run next to `gantry dev`) never sweep each other's.
	dirs := s.replicaDirs(workDir)
	ex := &oci.Executor{StateRoot: dirs.Runc, BundleRoot: dirs.Bundles, CgroupRoot: dirs.Cgroup}
	if err := ex.Sweep(ctx); err != nil {
		return nil, fmt.Errorf("cleaning up after an earlier run: %w", err)
	}
	o, err := tofurun.NewOCI(ctx, tofurun.OCIConfig{Toolchain: tc, Fwd: fwd, RootfsDir: filepath.Join(workDir, "rootfs"),
		StateSocket: s.stateSocket, StatePort: s.containerStatePort, CloudSocket: s.cloudSocket,
		// Longer than the state lock timeout, so a command waiting for the lock is not
		// killed at the moment it would have got it.
		Timeout: 30 * time.Minute, Executor: ex})
	if err != nil {
		return nil, err
	}
	return tofurun.New(o, dirs.Jobs, plugins), nil
}

// replicaDirs are where this replica's jobs leave things on its node: scratch
// directories, runc state and bundles, and a cgroup. Each carries the replica id, so a
// restarted portal removes what its own dead jobs left (sweepScratch, oci.Sweep) and
// never what another replica's live jobs use.
type replicaDirs struct {
	Jobs, Runc, Bundles, Cgroup string
}

// replicaTagRe is what a replica id may keep in a path and a runc id.
var replicaTagRe = regexp.MustCompile(`[^A-Za-z0-9_.-]+`)

func (s systemFlags) replicaDirs(workDir string) replicaDirs {
	tag := replicaTagRe.ReplaceAllString(s.leases.Holder, "_")
	if tag == "" || tag == "." || tag == ".." {
		tag = "_"
	}
	sum := sha256.Sum256([]byte(workDir + "\x00" + tag))
	return replicaDirs{Jobs: filepath.Join(workDir, "jobs", tag), Runc: filepath.Join(workDir, "replicas", tag, "runc"),
		Bundles: filepath.Join(workDir, "replicas", tag, "bundles"), Cgroup: "gantry-" + hex.EncodeToString(sum[:4])}
}

// sweepScratch removes the scratch directories this replica's jobs left behind when
// its process died (a job removes its own when it ends). Called before any job starts.
func (d replicaDirs) sweepScratch(logger *slog.Logger) error {
	ents, err := os.ReadDir(d.Jobs)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("reading %s: %w", d.Jobs, err)
	}
	for _, ent := range ents {
		if err := os.RemoveAll(filepath.Join(d.Jobs, ent.Name())); err != nil {
			return fmt.Errorf("removing an orphaned job directory: %w", err)
		}
	}
	if len(ents) > 0 {
		logger.Warn("removed the scratch directories of jobs this replica's last process left behind", "count", len(ents), "dir", d.Jobs)
	}
	return nil
}
