// Package chartcheck renders the Helm chart in deploy/helm/gantry with the pinned Helm and
// holds every rendered object to the pinned Kubernetes API types (strict decoding: an
// unknown or misspelt field is an error) and to the rules that matter for Gantry: probes,
// the restricted security context, a PodDisruptionBudget that selects the portal's pods,
// runner RBAC confined to one namespace with exactly the verbs the Kubernetes executor
// needs, a NetworkPolicy that closes the runner pods, and Secret keys that exist. Nothing
// is downloaded: Helm is built from tools/helm and the schemas are the Go types of
// k8s.io/api.
package chartcheck

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

	"gantry/runner/tofu"
)

// helmModule is the module tools/helm pins; its version there is the one built and accepted.
const helmModule = "helm.sh/helm/v4"

// helmBuild is the static build of the pinned Helm into out. The Taskfile's helm:build
// task runs the same command; keep the two in sync. Without the version flag the binary
// reports only "v4.3".
func helmBuild(repoRoot, version, out string) tofu.GoBuild {
	return tofu.GoBuild{Label: "Helm", Dir: filepath.Join(repoRoot, "tools", "helm"), Package: helmModule + "/cmd/helm",
		Flags: []string{"-trimpath", "-ldflags", "-s -w -X " + helmModule + "/internal/version.version=" + version, "-o", out}}
}

// PinnedHelmVersion returns the Helm version tools/helm/go.mod pins ("v4.3.2").
func PinnedHelmVersion(repoRoot string) (string, error) {
	return tofu.ModuleVersion(filepath.Join(repoRoot, "tools", "helm", "go.mod"), helmModule)
}

// EnsureHelm returns the absolute path of binDir/helm, building it first (like `go tool
// task helm:build`, a minute or two the first time, then seconds from the Go build cache)
// unless it exists and reports the pinned version. Concurrent callers serialise on a lock
// file in binDir; the binary appears by rename, so nobody runs a half-written one.
func EnsureHelm(ctx context.Context, repoRoot, binDir string, log io.Writer) (string, error) {
	want, err := PinnedHelmVersion(repoRoot)
	if err != nil {
		return "", err
	}
	if binDir, err = filepath.Abs(binDir); err != nil {
		return "", err
	}
	if repoRoot, err = filepath.Abs(repoRoot); err != nil {
		return "", err
	}
	return tofu.EnsurePinned(ctx, tofu.PinnedBuild{Path: filepath.Join(binDir, "helm"), Want: want, Version: helmVersion,
		Build: func(out string) tofu.GoBuild { return helmBuild(repoRoot, want, out) }, Note: "from tools/helm; a minute or two the first time"}, log)
}

// helmVersion is what `helm version` reports ("v4.3.2"), or "" when path is missing or
// not Helm.
func helmVersion(ctx context.Context, path string) string {
	if _, err := os.Stat(path); err != nil {
		return ""
	}
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, path, "version", "--template", "{{.Version}}")
	cmd.Env = helmEnv(os.TempDir())
	out, err := cmd.Output()
	if err != nil {
		return ""
	}
	return strings.TrimSpace(string(out))
}

// helmEnv is a closed environment for Helm: its caches, configuration and data under
// home, no kubeconfig of the caller's (rendering never talks to a cluster).
func helmEnv(home string) []string {
	return []string{"PATH=" + os.Getenv("PATH"), "HOME=" + home,
		"HELM_CACHE_HOME=" + filepath.Join(home, "cache"), "HELM_CONFIG_HOME=" + filepath.Join(home, "config"),
		"HELM_DATA_HOME=" + filepath.Join(home, "data"), "KUBECONFIG=" + os.DevNull}
}

// Render runs `helm template` on chartDir as release in namespace with the values files
// (in order; later ones win) and returns the manifest. Helm's own errors (a required value
// missing, a template that does not parse) come back with its words.
func Render(ctx context.Context, helm, chartDir, release, namespace string, valuesFiles ...string) ([]byte, error) {
	home, err := os.MkdirTemp("", "gantry-helm-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(home)
	args := []string{"template", release, chartDir, "--namespace", namespace}
	for _, v := range valuesFiles {
		args = append(args, "--values", v)
	}
	cmd := exec.CommandContext(ctx, helm, args...)
	cmd.Env = helmEnv(home)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return nil, fmt.Errorf("helm template %s: %w: %s", chartDir, err, strings.TrimSpace(stderr.String()))
	}
	return stdout.Bytes(), nil
}
