// Package seaweed runs a private SeaweedFS (an S3-compatible store with an STS service that
// exchanges OpenID Connect tokens for temporary credentials, AssumeRoleWithWebIdentity) for the
// live tests of the AWS-style web identity integration: the pinned server of tools/seaweedfs,
// built once into the user cache (EnsureBinary), started on free loopback ports in a temporary
// directory with an IAM configuration generated from Options (Start).
package seaweed

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"golang.org/x/mod/module"

	"gantry/runner/tofu"
)

// seaweedModule is the module tools/seaweedfs pins; its version there is the one built and accepted.
const seaweedModule = "github.com/seaweedfs/seaweedfs"

// PinnedVersion returns the SeaweedFS version tools/seaweedfs/go.mod pins: the module proxy
// serves SeaweedFS only as a pseudo-version ("v0.0.0-20261109003541-7506e5f91cd6", SeaweedFS 4.53).
func PinnedVersion(repoRoot string) (string, error) {
	return tofu.ModuleVersion(filepath.Join(repoRoot, "tools", "seaweedfs", "go.mod"), seaweedModule)
}

// pinnedCommit is the commit a pseudo-version names ("7506e5f91cd6"): the build stamps it into
// the binary (`weed version` prints it) so that a binary of another pin is never taken for this one.
func pinnedCommit(version string) (string, error) {
	rev, err := module.PseudoVersionRev(version)
	if err != nil {
		return "", fmt.Errorf("the SeaweedFS pin %q is not a pseudo-version: %w", version, err)
	}
	return rev, nil
}

// weedBuild is the static build of the pinned `weed` into out, stamped with the pin's commit as
// upstream's release builds stamp theirs. One package at a time and one compiler thread
// (-p 1, -c=1), at nice 19: the build peaks at 2.2 GB of memory as it is, and it shares the
// machine.
// `go tool task s3:build` runs this same build (through tools/s3target), so it has one home.
func weedBuild(repoRoot, commit, out string) tofu.GoBuild {
	return tofu.GoBuild{Label: "SeaweedFS", Dir: filepath.Join(repoRoot, "tools", "seaweedfs"),
		Package: "github.com/seaweedfs/seaweedfs/weed", Niced: true,
		Flags: []string{"-p", "1", "-gcflags", "all=-c=1", "-trimpath",
			"-ldflags", "-s -w -X github.com/seaweedfs/seaweedfs/weed/util/version.COMMIT=" + commit, "-o", out}}
}

// CacheDir is where EnsureBinary keeps the binary built from the sources in repoRoot:
// <user cache dir>/gantry/seaweedfs/<commit>-<hash of tools/seaweedfs's go.mod, go.sum and
// tools.go>. Outside the source tree on purpose: a fresh clone (as CI makes) finds the binary of
// an earlier run instead of spending ten CPU-minutes and 2.2 GB of memory on the same build; a
// changed pin gets a directory of its own.
func CacheDir(repoRoot string) (string, error) {
	version, err := PinnedVersion(repoRoot)
	if err != nil {
		return "", err
	}
	commit, err := pinnedCommit(version)
	if err != nil {
		return "", err
	}
	return tofu.PinnedCacheDir(filepath.Join(repoRoot, "tools", "seaweedfs"), []string{"go.mod", "go.sum", "tools.go"}, "", commit, "seaweedfs")
}

// EnsureBinary returns the path of the pinned SeaweedFS binary (tools/seaweedfs), building it
// into CacheDir first unless it is there and reports the pinned commit. The first build takes
// about ten CPU-minutes and 2.2 GB of memory (20 minutes on a busy two-core machine); it runs at
// the lowest CPU priority. Concurrent callers serialise on a lock file, and the binary appears
// atomically.
func EnsureBinary(ctx context.Context, repoRoot string, log io.Writer) (string, error) {
	repoRoot, err := filepath.Abs(repoRoot)
	if err != nil {
		return "", err
	}
	version, err := PinnedVersion(repoRoot)
	if err != nil {
		return "", err
	}
	commit, err := pinnedCommit(version)
	if err != nil {
		return "", err
	}
	dir, err := CacheDir(repoRoot)
	if err != nil {
		return "", err
	}
	return tofu.EnsurePinned(ctx, tofu.PinnedBuild{Path: filepath.Join(dir, "weed"), Want: commit, Version: BinaryVersion,
		Build: func(out string) tofu.GoBuild { return weedBuild(repoRoot, commit, out) },
		Note:  "SeaweedFS " + version + ", into " + dir + "; the first time takes about ten CPU-minutes and 2.2 GB of memory"}, log)
}

// BinaryVersion runs `<path> version` and returns the commit the binary was stamped with
// ("7506e5f91cd6"; it prints "version 30GB 4.53 7506e5f91cd6 linux amd64"), or "" when the
// binary is missing, fails or carries no commit.
func BinaryVersion(ctx context.Context, path string) string {
	if _, err := os.Stat(path); err != nil {
		return ""
	}
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, path, "version").Output()
	if err != nil {
		return ""
	}
	line, _, _ := strings.Cut(string(out), "\n")
	if f := strings.Fields(line); len(f) == 6 && f[0] == "version" {
		return f[3]
	}
	return ""
}
