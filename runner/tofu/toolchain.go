package tofu

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
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
// the sandbox provider and lays out the offline mirror and CLI config under dir.
func PrepareToolchain(ctx context.Context, repoRoot, dir string, log io.Writer) (Toolchain, error) {
	repoRoot, err := filepath.Abs(repoRoot)
	if err != nil {
		return Toolchain{}, err
	}
	var tc Toolchain
	if tc.Tofu, err = EnsureBinary(ctx, repoRoot, log); err != nil {
		return Toolchain{}, err
	}
	if err := os.MkdirAll(filepath.Join(dir, "provider"), 0o755); err != nil {
		return Toolchain{}, err
	}
	if tc.Provider, err = BuildProvider(ctx, repoRoot, filepath.Join(dir, "provider"), log); err != nil {
		return Toolchain{}, err
	}
	tc.Mirror = filepath.Join(dir, "mirror")
	if tc.Lock, err = BuildMirror(tc.Provider, tc.Mirror, ProviderSource, ProviderVersion, ProviderPlatform); err != nil {
		return Toolchain{}, err
	}
	tc.CLIConfig = filepath.Join(dir, "tofurc.hcl")
	if err := WriteCLIConfig(tc.CLIConfig, tc.Mirror); err != nil {
		return Toolchain{}, err
	}
	return tc, nil
}
