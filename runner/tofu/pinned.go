package tofu

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"time"

	"golang.org/x/mod/modfile"
)

// Gantry builds its pinned tools (OpenTofu, Kubernetes, Helm) the same way: `go build` in a
// tools module of the source tree, into one file, accepted only if the binary reports the
// pinned version. EnsurePinned is that routine's one home.

// ModuleVersion returns the version of module that the go.mod file name requires ("v1.10.10").
func ModuleVersion(name, module string) (string, error) {
	data, err := os.ReadFile(name)
	if err != nil {
		return "", fmt.Errorf("reading the pin of %s: %w", module, err)
	}
	f, err := modfile.ParseLax(name, data, nil)
	if err != nil {
		return "", fmt.Errorf("parsing %s: %w", name, err)
	}
	for _, r := range f.Require {
		if r.Mod.Path == module {
			return r.Mod.Version, nil
		}
	}
	return "", fmt.Errorf("%s does not require %s", name, module)
}

// PinnedBuild is one pinned tool: where its binary lives, the version it must report, how
// to ask it, and the build that makes it.
type PinnedBuild struct {
	Path string // the binary (absolute)
	Want string // the version Version must return
	// Version asks the binary at a path for its version ("" when missing or broken).
	Version func(ctx context.Context, path string) string
	// Build is the `go build` writing the binary to out.
	Build func(out string) GoBuild
	// Note is printed before a build ("the first time takes about five minutes").
	Note string
	// Progress, if set, counts the build's packages (gantry dev's progress bar).
	Progress *BuildProgress
}

// EnsurePinned returns b.Path, building it first unless it reports b.Want. Concurrent
// callers (parallel test binaries, a task beside a test run) serialise on a lock file
// beside the binary, so one builds and the others find the result; the binary appears by
// rename, so nobody runs a half-written one. Messages go to log.
func EnsurePinned(ctx context.Context, b PinnedBuild, log io.Writer) (string, error) {
	label := b.Build(b.Path).Label
	if b.Version(ctx, b.Path) == b.Want {
		b.Progress.finish(label)
		return b.Path, nil
	}
	// The build is counted even when the caller does not count it: a process waiting
	// for this one reads the count (publishProgress).
	progress := b.Progress
	if progress == nil {
		progress = &BuildProgress{}
	}
	// Minutes on a fresh machine: the module proxy serves hundreds of modules.
	progress.SetStep("downloading the modules of " + label + " and listing its packages")
	if err := b.Build(b.Path).Count(ctx, progress); err != nil {
		return "", err
	}
	dir := filepath.Dir(b.Path)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", fmt.Errorf("creating %s: %w", dir, err)
	}
	b.Progress.SetStep("waiting for another process building " + label)
	stopMirror := mirrorProgress(progressFile(b.Path), label, b.Progress)
	unlock, err := FileLock(filepath.Join(dir, "."+filepath.Base(b.Path)+".lock"))
	stopMirror()
	if err != nil {
		return "", fmt.Errorf("locking the %s build: %w", label, err)
	}
	defer unlock()
	if b.Version(ctx, b.Path) == b.Want { // built by another process while we waited
		b.Progress.finish(label)
		return b.Path, nil
	}
	fmt.Fprintf(log, "building %s %s (%s)...\n", label, b.Want, b.Note)
	started := time.Now()
	tmp := filepath.Join(dir, "."+filepath.Base(b.Path)+".tmp-"+strconv.Itoa(os.Getpid()))
	defer os.Remove(tmp) // gone after the rename; cleans up after a failed build
	stopPublish := publishProgress(progressFile(b.Path), label, progress)
	err = b.Build(tmp).Run(ctx, progress, log)
	stopPublish()
	if err != nil {
		return "", fmt.Errorf("%s %s: %w", label, b.Want, err)
	}
	if got := b.Version(ctx, tmp); got != b.Want {
		return "", fmt.Errorf("the %s just built reports version %q, want %q", label, got, b.Want)
	}
	if err := os.Rename(tmp, b.Path); err != nil {
		return "", fmt.Errorf("installing %s: %w", b.Path, err)
	}
	fmt.Fprintf(log, "built %s in %s\n", b.Path, time.Since(started).Round(time.Second))
	return b.Path, nil
}

// PinnedCacheDir is where a pinned build is kept across clones:
// <user cache dir>/gantry/<where...>/<prefix>-<key>, the key the first 12 hex digits of a
// sha256 over preamble, then each of files (paths relative to dir, slash-separated) as
// "<name> <length>\n<bytes>". Outside the source tree on purpose: a fresh clone (as CI
// makes) finds the build of an earlier one, and a changed pin or source gets a directory of
// its own.
func PinnedCacheDir(dir string, files []string, preamble, prefix string, where ...string) (string, error) {
	h := sha256.New()
	h.Write([]byte(preamble))
	for _, name := range files {
		data, err := os.ReadFile(filepath.Join(dir, filepath.FromSlash(name)))
		if err != nil {
			return "", fmt.Errorf("reading the pinned build's sources: %w", err)
		}
		fmt.Fprintf(h, "%s %d\n", name, len(data))
		h.Write(data)
	}
	cache, err := os.UserCacheDir()
	if err != nil {
		return "", fmt.Errorf("finding the user cache directory: %w", err)
	}
	return filepath.Join(append(append([]string{cache, "gantry"}, where...), prefix+"-"+hex.EncodeToString(h.Sum(nil))[:12])...), nil
}
