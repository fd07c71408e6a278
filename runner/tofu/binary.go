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
	"strings"
	"time"
)

const (
	// modulePath is the module tools/tofu pins; its version there is the one we build and accept.
	modulePath = "github.com/opentofu/opentofu"
	// mainPackage is the CLI inside that module.
	mainPackage = modulePath + "/cmd/tofu"
)

// tofuBuild is the release-like static build of the pinned OpenTofu into out. The flags
// come from OpenTofu's .goreleaser.yaml (without version.dev=no the binary calls itself
// "-dev"). The Taskfile's tofu:build task runs this very build (tools/tofubuild).
func tofuBuild(repoRoot, out string) GoBuild {
	return GoBuild{Label: "OpenTofu", Dir: filepath.Join(repoRoot, "tools", "tofu"), Package: mainPackage,
		Flags: []string{"-trimpath", "-ldflags", "-s -w -X 'github.com/opentofu/opentofu/version.dev=no'", "-o", out}}
}

// PinnedVersion returns the OpenTofu version tools/tofu/go.mod pins, without the "v" ("1.10.10").
func PinnedVersion(repoRoot string) (string, error) {
	v, err := ModuleVersion(filepath.Join(repoRoot, "tools", "tofu", "go.mod"), modulePath)
	return strings.TrimPrefix(v, "v"), err
}

// EnsureBinary is EnsureBinaryIn repoRoot/bin, without progress.
func EnsureBinary(ctx context.Context, repoRoot string, log io.Writer) (string, error) {
	return EnsureBinaryIn(ctx, repoRoot, filepath.Join(repoRoot, "bin"), nil, log)
}

// EnsureBinaryIn returns the absolute path of binDir/tofu, building it first unless it
// exists and reports the version tools/tofu/go.mod pins. The build runs `go build` in
// repoRoot/tools/tofu (`go tool task tofu:build` runs it through tools/tofubuild) and takes a few minutes the
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
	return EnsurePinned(ctx, PinnedBuild{Path: filepath.Join(binDir, "tofu"), Want: want, Version: binaryVersion,
		Build: func(out string) GoBuild { return tofuBuild(repoRoot, out) }, Note: "the first time takes a few minutes", Progress: p}, log)
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
