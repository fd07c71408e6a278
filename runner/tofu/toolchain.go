package tofu

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
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
	CLIConfig string // CLI config pointing at Mirror (and Operator, if set) only
	Lock      Lock   // the sandbox provider's lock entry (its h1 hash)
	// Locks are the lock entries of every provider Mirror holds, the sandbox provider's
	// first, then Mirroring.Providers': Gantry's S3 provider (built by Build always) and the
	// third-party ones the toolchain was built with (Build.Providers).
	Locks []Lock
	// Operator is the operator's mirror the CLI config also installs from (zero: none).
	Operator ProviderMirror
}

// LockOf returns the lock entry of the provider at source in the built-in mirror: what a
// template's .terraform.lock.hcl must hold for it (Lock.File, LockFile).
func (tc Toolchain) LockOf(source string) (Lock, bool) {
	for _, l := range tc.Locks {
		if l.Source == source {
			return l, true
		}
	}
	return Lock{}, false
}

// providerBuild is the sandbox provider's static, reproducible build into dir (the same
// source and Go toolchain give the same binary, so the catalog's lock files hold).
func providerBuild(repoRoot, dir string) GoBuild {
	return GoBuild{Label: "the sandbox provider", Dir: repoRoot, Package: providerPackage,
		Flags: []string{"-trimpath", "-buildvcs=false", "-ldflags", "-s -w -X main.version=" + ProviderVersion, "-o", filepath.Join(dir, "terraform-provider-sandbox_v"+ProviderVersion)}}
}

// fwdBuild is gantry-fwd's static build into dir: the PID 1 of runc jobs.
func fwdBuild(repoRoot, dir string) GoBuild {
	return GoBuild{Label: "gantry-fwd", Dir: repoRoot, Package: "./cmd/gantry-fwd",
		Flags: []string{"-trimpath", "-ldflags", "-s -w", "-o", filepath.Join(dir, "gantry-fwd")}}
}

// output is where a build writes its binary (its -o).
func (b GoBuild) output() string { return b.Flags[len(b.Flags)-1] }

// BuildProvider builds the sandbox provider into dir and returns its path.
func BuildProvider(ctx context.Context, repoRoot, dir string, log io.Writer) (string, error) {
	b := providerBuild(repoRoot, dir)
	if err := b.Run(ctx, nil, log); err != nil {
		return "", err
	}
	return b.output(), nil
}

// BuildFwd builds cmd/gantry-fwd statically from the module at repoRoot into dir and
// returns the binary's absolute path.
func BuildFwd(ctx context.Context, repoRoot, dir string) (string, error) {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return "", err
	}
	b := fwdBuild(repoRoot, abs)
	var log bytes.Buffer
	if err := b.Run(ctx, nil, &log); err != nil {
		return "", fmt.Errorf("%w: %s", err, strings.TrimSpace(log.String()))
	}
	return b.output(), nil
}

// PrepareToolchain makes sure the pinned tofu exists in repoRoot/bin (building it on
// demand), builds the sandbox provider and lays out the offline mirror and CLI config
// under dir. It needs the source tree (development and tests); deployments use
// ToolchainFrom with prebuilt binaries.
func PrepareToolchain(ctx context.Context, repoRoot, dir string, log io.Writer) (Toolchain, error) {
	tc, _, err := Build{Root: repoRoot, Dir: dir, Log: log}.Run(ctx)
	return tc, err
}

// Build is the whole toolchain built from the source tree, with its progress counted:
// OpenTofu (kept in BinDir between starts: the one long build), the sandbox and S3
// providers and, for runc jobs, gantry-fwd, then the mirror and CLI configuration.
type Build struct {
	Root   string // the source tree
	BinDir string // where tofu is kept (default Root/bin)
	Dir    string // where the provider, gantry-fwd, the mirror and the CLI config go
	Fwd    bool   // build gantry-fwd too
	// Providers are the third-party providers to publish into the mirror, built into
	// their cache first unless there (minutes each: only callers that use them ask).
	Providers []ThirdParty
	// Operator is the operator's provider mirror for the CLI config (zero: none).
	Operator ProviderMirror
	Progress *BuildProgress // nil: not counted
	Log      io.Writer
}

// Run builds and returns the toolchain and gantry-fwd's path ("" unless b.Fwd). Every
// build's packages are listed first, so the progress counts against the whole.
func (b Build) Run(ctx context.Context) (Toolchain, string, error) {
	root, err := filepath.Abs(b.Root)
	if err != nil {
		return Toolchain{}, "", err
	}
	if b.BinDir == "" {
		b.BinDir = filepath.Join(root, "bin")
	}
	if b.Dir, err = filepath.Abs(b.Dir); err != nil {
		return Toolchain{}, "", err
	}
	if b.Log == nil {
		b.Log = io.Discard
	}
	providerDir := filepath.Join(b.Dir, "provider")
	if err := os.MkdirAll(providerDir, 0o755); err != nil {
		return Toolchain{}, "", err
	}
	// The S3 provider is small and in the source tree: always built, a link step once the
	// Go build cache holds its packages.
	builds := []GoBuild{providerBuild(root, providerDir), s3ProviderBuild(root, providerDir)}
	if b.Fwd {
		builds = append(builds, fwdBuild(root, b.Dir))
	}
	b.Progress.SetStep("listing the packages to build")
	for _, gb := range builds {
		if err := gb.Count(ctx, b.Progress); err != nil {
			return Toolchain{}, "", err
		}
	}
	tofuPath, err := EnsureBinaryIn(ctx, root, b.BinDir, b.Progress, b.Log)
	if err != nil {
		return Toolchain{}, "", err
	}
	for _, gb := range builds {
		if err := gb.Run(ctx, b.Progress, b.Log); err != nil {
			return Toolchain{}, "", err
		}
	}
	m := Mirroring{Operator: b.Operator, Providers: []ProviderBinary{S3Provider(builds[1].output())}}
	for _, p := range b.Providers {
		path, err := p.Ensure(ctx, root, b.Progress, b.Log)
		if err != nil {
			return Toolchain{}, "", err
		}
		m.Providers = append(m.Providers, p.Binary(path))
	}
	b.Progress.SetStep("laying out the provider mirror")
	tc, err := m.Toolchain(tofuPath, builds[0].output(), b.Dir)
	if err != nil {
		return Toolchain{}, "", err
	}
	fwd := ""
	if b.Fwd {
		fwd = builds[2].output()
	}
	return tc, fwd, nil
}

// ToolchainFrom lays out the offline mirror and CLI config under dir for prebuilt tofu
// and sandbox provider binaries (Mirroring.Toolchain with nothing more).
func ToolchainFrom(tofuPath, providerPath, dir string) (Toolchain, error) {
	return Mirroring{}.Toolchain(tofuPath, providerPath, dir)
}

// Mirroring is what a toolchain's mirror and CLI configuration hold besides the sandbox
// provider.
type Mirroring struct {
	// Providers are published into the built-in mirror beside the sandbox provider: Gantry's
	// S3 provider (S3Provider, prebuilt for gantry serve) and third-party ones.
	Providers []ProviderBinary
	Operator  ProviderMirror // the operator's mirror, for every provider but Gantry's own (portal.local)
}

// Toolchain lays out the built-in mirror under dir (the sandbox provider and m.Providers,
// each with its lock entry) and the CLI config installing from it and from m.Operator.
func (m Mirroring) Toolchain(tofuPath, providerPath, dir string) (Toolchain, error) {
	tc := Toolchain{Tofu: tofuPath, Provider: providerPath, Mirror: filepath.Join(dir, "mirror"), CLIConfig: filepath.Join(dir, "tofurc.hcl"),
		Operator: m.Operator}
	bins := append([]ProviderBinary{{Source: ProviderSource, Version: ProviderVersion, Path: providerPath}}, m.Providers...)
	if _, err := os.Stat(tofuPath); err != nil {
		return Toolchain{}, fmt.Errorf("toolchain: %w", err)
	}
	for _, b := range bins {
		if _, err := os.Stat(b.Path); err != nil {
			return Toolchain{}, fmt.Errorf("toolchain: %w", err)
		}
		lock, err := BuildMirror(b.Path, tc.Mirror, b.Source, b.Version, ProviderPlatform)
		if err != nil {
			return Toolchain{}, err
		}
		tc.Locks = append(tc.Locks, lock)
	}
	tc.Lock = tc.Locks[0]
	if err := (CLIConfig{Mirror: tc.Mirror, Operator: m.Operator}).Write(tc.CLIConfig); err != nil {
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
