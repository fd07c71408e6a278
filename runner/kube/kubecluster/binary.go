package kubecluster

import (
	"context"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"gantry/runner/tofu"
)

// kubernetesModule is the module tools/k8s pins; its version there is the one built and accepted.
const kubernetesModule = "k8s.io/kubernetes"

// PinnedVersion returns the Kubernetes version tools/k8s/go.mod pins ("v1.37.2").
func PinnedVersion(repoRoot string) (string, error) {
	return tofu.ModuleVersion(filepath.Join(repoRoot, "tools", "k8s", "go.mod"), kubernetesModule)
}

// k8sBuild is the static build of tools/k8s into out, stamped with version: without the -X
// flags the kubelet and the apiserver call themselves v0.0.0 and version skew checks complain.
// `go tool task k8s:build` runs this same build (through tools/k8scluster), so it has one home.
func k8sBuild(repoRoot, version, out string) tofu.GoBuild {
	major, minor, _ := strings.Cut(strings.TrimPrefix(version, "v"), ".")
	minor, _, _ = strings.Cut(minor, ".")
	var ldflags []string
	for _, pkg := range []string{"k8s.io/component-base/version", "k8s.io/client-go/pkg/version"} {
		ldflags = append(ldflags, "-X "+pkg+".gitVersion="+version, "-X "+pkg+".gitMajor="+major, "-X "+pkg+".gitMinor="+minor,
			"-X "+pkg+".gitTreeState=clean")
	}
	return tofu.GoBuild{Label: "Kubernetes", Dir: filepath.Join(repoRoot, "tools", "k8s"), Package: ".",
		Flags: []string{"-trimpath", "-ldflags", "-s -w " + strings.Join(ldflags, " "), "-o", out}}
}

// CacheDir is where EnsureBinary keeps the binary built from the sources in repoRoot:
// <user cache dir>/gantry/k8s/<version>-<hash of tools/k8s's go.mod, go.sum and main.go>.
// Outside the source tree on purpose: a fresh clone (as CI makes) finds the binary of an earlier
// run instead of spending five minutes and 2 GB of memory on the same build; a changed pin or
// main.go gets a directory of its own.
func CacheDir(repoRoot string) (string, error) {
	version, err := PinnedVersion(repoRoot)
	if err != nil {
		return "", err
	}
	return tofu.PinnedCacheDir(filepath.Join(repoRoot, "tools", "k8s"), []string{"go.mod", "go.sum", "main.go"}, "", version, "k8s")
}

// EnsureBinary returns the path of the pinned Kubernetes binary (tools/k8s), building it into
// CacheDir first unless it is there and reports the pinned version. The first build takes
// about five minutes on two cores; concurrent callers (parallel test binaries, `task k8s:up`)
// serialise on a lock file, and the binary appears atomically.
func EnsureBinary(ctx context.Context, repoRoot string, log io.Writer) (string, error) {
	repoRoot, err := filepath.Abs(repoRoot)
	if err != nil {
		return "", err
	}
	version, err := PinnedVersion(repoRoot)
	if err != nil {
		return "", err
	}
	dir, err := CacheDir(repoRoot)
	if err != nil {
		return "", err
	}
	return tofu.EnsurePinned(ctx, tofu.PinnedBuild{Path: filepath.Join(dir, "k8s"), Want: version, Version: BinaryVersion,
		Build: func(out string) tofu.GoBuild { return k8sBuild(repoRoot, version, out) },
		Note:  "into " + dir + "; the first time takes about five minutes and 2 GB of memory"}, log)
}

// BinaryVersion runs `<path> version` and returns what it prints ("v1.37.2"), or "" when the
// binary is missing or fails.
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
	return strings.TrimSpace(string(out))
}
