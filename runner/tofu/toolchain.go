package tofu

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
)

// The sandbox provider every catalog template uses.
const (
	ProviderSource   = "portal.local/sandbox/sandbox"
	ProviderVersion  = "0.1.0"
	ProviderPlatform = "linux_amd64"
	providerPackage  = "./cmd/terraform-provider-sandbox"
)

// Toolchain is everything a tofu job needs besides its configuration.
type Toolchain struct {
	Tofu      string // the pinned OpenTofu binary
	Provider  string // terraform-provider-sandbox_v0.1.0
	Mirror    string // packed filesystem mirror directory
	CLIConfig string // CLI config pointing at Mirror only
	Lock      Lock   // the provider's lock entry (its h1 hash)
}

// BuildProvider builds the sandbox provider into dir, statically and reproducibly (the
// same source and Go toolchain give the same binary, so the catalog's lock files hold).
func BuildProvider(ctx context.Context, repoRoot, dir string, log io.Writer) (string, error) {
	out := filepath.Join(dir, "terraform-provider-sandbox_v"+ProviderVersion)
	cmd := exec.CommandContext(ctx, "go", "build", "-mod=readonly", "-trimpath",
		"-ldflags", "-s -w -X main.version="+ProviderVersion, "-o", out, providerPackage)
	cmd.Dir = repoRoot
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	cmd.Stdout, cmd.Stderr = log, log
	if err := cmd.Run(); err != nil {
		return "", fmt.Errorf("building the sandbox provider: %w", err)
	}
	return out, nil
}

// PrepareToolchain makes sure the pinned tofu exists (building it on demand), builds
// the sandbox provider and lays out the offline mirror and CLI config under dir. It
// needs the source tree (development and tests); deployments use ToolchainFrom with
// prebuilt binaries.
func PrepareToolchain(ctx context.Context, repoRoot, dir string, log io.Writer) (Toolchain, error) {
	repoRoot, err := filepath.Abs(repoRoot)
	if err != nil {
		return Toolchain{}, err
	}
	tofuPath, err := EnsureBinary(ctx, repoRoot, log)
	if err != nil {
		return Toolchain{}, err
	}
	if err := os.MkdirAll(filepath.Join(dir, "provider"), 0o755); err != nil {
		return Toolchain{}, err
	}
	provider, err := BuildProvider(ctx, repoRoot, filepath.Join(dir, "provider"), log)
	if err != nil {
		return Toolchain{}, err
	}
	return ToolchainFrom(tofuPath, provider, dir)
}

// ToolchainFrom lays out the offline mirror and CLI config under dir for prebuilt tofu
// and provider binaries.
func ToolchainFrom(tofuPath, providerPath, dir string) (Toolchain, error) {
	tc := Toolchain{Tofu: tofuPath, Provider: providerPath, Mirror: filepath.Join(dir, "mirror"), CLIConfig: filepath.Join(dir, "tofurc.hcl")}
	for _, p := range []string{tofuPath, providerPath} {
		if _, err := os.Stat(p); err != nil {
			return Toolchain{}, fmt.Errorf("toolchain: %w", err)
		}
	}
	var err error
	if tc.Lock, err = BuildMirror(tc.Provider, tc.Mirror, ProviderSource, ProviderVersion, ProviderPlatform); err != nil {
		return Toolchain{}, err
	}
	if err := WriteCLIConfig(tc.CLIConfig, tc.Mirror); err != nil {
		return Toolchain{}, err
	}
	return tc, nil
}

// RepoRoot finds the source tree's root (the directory of the go.mod of module
// "gantry") from dir upwards, for development and tests.
func RepoRoot(dir string) (string, error) {
	dir, err := filepath.Abs(dir)
	if err != nil {
		return "", err
	}
	for {
		if data, err := os.ReadFile(filepath.Join(dir, "go.mod")); err == nil && strings.HasPrefix(string(data), "module gantry\n") {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", fmt.Errorf("not inside Gantry's source tree (no go.mod of module gantry above %s)", dir)
		}
		dir = parent
	}
}
