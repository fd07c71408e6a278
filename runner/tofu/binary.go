// Package tofu prepares everything an OpenTofu invocation needs and nothing it should not have:
// the pinned tofu binary (built from tools/tofu), an offline provider mirror with its dependency
// lock, a CLI configuration that installs providers only from that mirror, and a closed
// environment that inherits nothing from the calling process.
package tofu

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"golang.org/x/mod/modfile"
)

const (
	// modulePath is the module tools/tofu pins; its version there is the one we build and accept.
	modulePath = "github.com/opentofu/opentofu"
	// mainPackage is the CLI inside that module.
	mainPackage = modulePath + "/cmd/tofu"
)

// tofuBuild is the release-like static build of the pinned OpenTofu into out. The flags
// come from OpenTofu's .goreleaser.yaml (without version.dev=no the binary calls itself
// "-dev"). The Taskfile's tofu:build task runs the same command; keep the two in sync.
func tofuBuild(repoRoot, out string) GoBuild {
	return GoBuild{Label: "OpenTofu", Dir: filepath.Join(repoRoot, "tools", "tofu"), Package: mainPackage,
		Flags: []string{"-trimpath", "-ldflags", "-s -w -X 'github.com/opentofu/opentofu/version.dev=no'", "-o", out}}
}

// PinnedVersion returns the OpenTofu version tools/tofu/go.mod pins, without the "v" ("1.10.10").
func PinnedVersion(repoRoot string) (string, error) {
	name := filepath.Join(repoRoot, "tools", "tofu", "go.mod")
	data, err := os.ReadFile(name)
	if err != nil {
		return "", fmt.Errorf("reading the OpenTofu pin: %w", err)
	}
	f, err := modfile.ParseLax(name, data, nil)
	if err != nil {
		return "", fmt.Errorf("parsing %s: %w", name, err)
	}
	for _, r := range f.Require {
		if r.Mod.Path == modulePath {
			return strings.TrimPrefix(r.Mod.Version, "v"), nil
		}
	}
	return "", fmt.Errorf("%s does not require %s", name, modulePath)
}

// EnsureBinary is EnsureBinaryIn repoRoot/bin, without progress.
func EnsureBinary(ctx context.Context, repoRoot string, log io.Writer) (string, error) {
	return EnsureBinaryIn(ctx, repoRoot, filepath.Join(repoRoot, "bin"), nil, log)
}

// EnsureBinaryIn returns the absolute path of binDir/tofu, building it first unless it
// exists and reports the version tools/tofu/go.mod pins. The build runs `go build` in
// repoRoot/tools/tofu exactly like `go tool task tofu:build` and takes a few minutes the
// first time (then seconds, from the Go build cache); its packages are counted in p and
// its messages go to log.
//
// Concurrent callers (parallel test binaries, a test run next to `gantry dev`) serialise on a
// lock file in binDir, so only one of them builds and the others then find the result. The binary
// appears atomically (build to a temporary name, then rename), so nobody runs a half-written one.
func EnsureBinaryIn(ctx context.Context, repoRoot, binDir string, p *BuildProgress, log io.Writer) (string, error) {
	// Absolute paths: callers run tofu from other working directories.
	repoRoot, err := filepath.Abs(repoRoot)
	if err != nil {
		return "", fmt.Errorf("resolving %s: %w", repoRoot, err)
	}
	if binDir, err = filepath.Abs(binDir); err != nil {
		return "", err
	}
	want, err := PinnedVersion(repoRoot)
	if err != nil {
		return "", err
	}
	path := filepath.Join(binDir, "tofu")
	build := tofuBuild(repoRoot, path)
	if binaryVersion(ctx, path) == want {
		p.finish(build.Label)
		return path, nil
	}
	if err := build.Count(ctx, p); err != nil {
		return "", err
	}
	if binaryVersion(ctx, path) == want {
		return path, nil
	}

	if err := os.MkdirAll(binDir, 0o755); err != nil {
		return "", fmt.Errorf("creating %s: %w", binDir, err)
	}
	p.SetStep("waiting for another process building OpenTofu")
	unlock, err := lockFile(filepath.Join(binDir, ".tofu.lock"))
	if err != nil {
		return "", fmt.Errorf("locking the OpenTofu build: %w", err)
	}
	defer unlock()
	// Another process may have built it while we waited for the lock.
	if binaryVersion(ctx, path) == want {
		p.finish(build.Label)
		return path, nil
	}

	fmt.Fprintf(log, "building OpenTofu v%s (first time takes a few minutes)...\n", want)
	started := time.Now()
	tmp := filepath.Join(binDir, ".tofu.tmp-"+strconv.Itoa(os.Getpid()))
	defer os.Remove(tmp) // gone after the rename; cleans up after a failed build
	build = tofuBuild(repoRoot, tmp)
	if err := build.Run(ctx, p, log); err != nil {
		return "", fmt.Errorf("OpenTofu v%s: %w", want, err)
	}
	if got := binaryVersion(ctx, tmp); got != want {
		return "", fmt.Errorf("the OpenTofu just built reports version %q, want %q", got, want)
	}
	if err := os.Rename(tmp, path); err != nil {
		return "", fmt.Errorf("installing %s: %w", path, err)
	}
	fmt.Fprintf(log, "built %s in %s\n", path, time.Since(started).Round(time.Second))
	return path, nil
}

// binaryVersion runs `<path> version` in a closed environment (no CLI config, no checkpoint
// call) and returns the version from its first line, "OpenTofu v1.10.10", without the "v".
// It returns "" when the binary is missing, fails or is not OpenTofu.
func binaryVersion(ctx context.Context, path string) string {
	if _, err := os.Stat(path); err != nil {
		return ""
	}
	home, err := os.MkdirTemp("", "tofu-version-")
	if err != nil {
		return ""
	}
	defer os.RemoveAll(home)

	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, path, "version")
	cmd.Env = Env(os.DevNull, home)
	out, err := cmd.Output()
	if err != nil {
		return ""
	}
	first, _, _ := bytes.Cut(out, []byte("\n"))
	v, ok := strings.CutPrefix(strings.TrimSpace(string(first)), "OpenTofu v")
	if !ok {
		return ""
	}
	return v
}
