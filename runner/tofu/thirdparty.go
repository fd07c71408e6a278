package tofu

import (
	"context"
	"debug/buildinfo"
	"fmt"
	"io"
	"io/fs"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
)

// ThirdParty is a real provider Gantry builds pinned from a tools module of its source tree,
// as it builds OpenTofu, and publishes into the offline provider mirror beside the sandbox
// provider. Nothing is downloaded at run time: the module proxy serves the provider's source
// at build time, and the build is static, -trimpath and reproducible, so the lock-file hash a
// template pins holds for every build of the same sources with the same Go toolchain.
//
// Building one takes minutes, so nothing builds it unasked: a toolchain includes it only when
// Build.Providers names it (tests that use it), and `gantry dev` publishes the ones already
// built (Built); `go tool task provider:kubernetes` builds it ahead of time.
type ThirdParty struct {
	Source  string // the provider's address: "registry.opentofu.org/hashicorp/kubernetes"
	Version string // the one version served: "1.13.4"
	Module  string // the Go module the tools module pins at "v"+Version
	Package string // the provider's main package in that module
	Tools   string // the tools module's directory under tools/
	Label   string // for people: "the Kubernetes provider"
	Note    string // printed before a build: how long and how much memory
}

// Kubernetes is terraform-provider-kubernetes v1.13.4, the only version of it the module
// proxy serves (its v2 tags are refused): terraform-plugin-sdk v1, protocol 5, which OpenTofu
// accepts. Templates require it as `source = "hashicorp/kubernetes", version = "1.13.4"`.
var Kubernetes = ThirdParty{
	Source:  "registry.opentofu.org/hashicorp/kubernetes",
	Version: "1.13.4",
	Module:  "github.com/hashicorp/terraform-provider-kubernetes",
	Package: "github.com/hashicorp/terraform-provider-kubernetes",
	Tools:   "kubernetes-provider",
	Label:   "the Kubernetes provider",
	Note:    "the first time takes about six minutes on one core and 650 MB of memory",
}

// ThirdParties are every provider Gantry builds: what `gantry dev` looks for in the cache and
// what the built-in mirror's CLI configuration installs besides the sandbox provider.
var ThirdParties = []ThirdParty{Kubernetes}

// BinaryName is the provider's executable as a mirror package holds it.
func (p ThirdParty) BinaryName() string {
	return "terraform-provider-" + p.typeName() + "_v" + p.Version
}

func (p ThirdParty) typeName() string { return p.Source[strings.LastIndex(p.Source, "/")+1:] }

func (p ThirdParty) toolsDir(repoRoot string) string {
	return filepath.Join(repoRoot, "tools", p.Tools)
}

// build is the static, reproducible build of the provider into out: no version stamp to set
// (the SDK's providers report none), so the flags are those of the recipe whose binary's hash
// the templates' lock files pin.
func (p ThirdParty) build(repoRoot, out string) GoBuild {
	return GoBuild{Label: p.Label, Dir: p.toolsDir(repoRoot), Package: p.Package,
		Flags: []string{"-trimpath", "-ldflags", "-s -w", "-o", out}}
}

// CacheDir is where Ensure keeps the provider built from the sources in repoRoot:
//
//	<user cache dir>/gantry/providers/<type>/<version>-<key>/
//
// where key is the first 12 hex digits of the sha256 over the Go toolchain's version (`go env
// GOVERSION` in the tools module: another compiler makes other bytes, and so another lock
// hash) and every file of the tools module (go.mod, go.sum, tools.go, third_party/...), each
// as "<path> <length>\n<bytes>". Outside the source tree, as the Kubernetes binary's: a fresh
// clone finds the build of an earlier one, and a changed pin gets a directory of its own.
func (p ThirdParty) CacheDir(ctx context.Context, repoRoot string) (string, error) {
	dir := p.toolsDir(repoRoot)
	cmd := exec.CommandContext(ctx, "go", "env", "GOVERSION")
	cmd.Dir = dir
	goVersion, err := cmd.Output()
	if err != nil {
		return "", fmt.Errorf("asking the Go toolchain for its version in %s: %w", dir, err)
	}
	var files []string
	err = filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err == nil && d.Type().IsRegular() {
			rel, _ := filepath.Rel(dir, path)
			files = append(files, filepath.ToSlash(rel))
		}
		return err
	})
	if err != nil {
		return "", fmt.Errorf("reading the sources of %s: %w", p.Label, err)
	}
	slices.Sort(files)
	return PinnedCacheDir(dir, files, "go "+strings.TrimSpace(string(goVersion))+"\n", p.Version, "providers", p.typeName())
}

// Ensure returns the path of the provider's binary in CacheDir, building it first unless it is
// there and is this provider at its version (EnsurePinned: concurrent callers serialise on a
// lock file, the binary appears by rename). Its packages are counted in progress.
func (p ThirdParty) Ensure(ctx context.Context, repoRoot string, progress *BuildProgress, log io.Writer) (string, error) {
	repoRoot, err := filepath.Abs(repoRoot)
	if err != nil {
		return "", err
	}
	if err := p.pinned(repoRoot); err != nil {
		return "", err
	}
	dir, err := p.CacheDir(ctx, repoRoot)
	if err != nil {
		return "", err
	}
	return EnsurePinned(ctx, PinnedBuild{Path: filepath.Join(dir, p.BinaryName()), Want: p.Version, Version: p.binaryVersion,
		Build: func(out string) GoBuild { return p.build(repoRoot, out) }, Note: "into " + dir + "; " + p.Note, Progress: progress}, log)
}

// Built returns the provider's binary if the cache already holds it for the sources in
// repoRoot, without building anything ("" when not built).
func (p ThirdParty) Built(ctx context.Context, repoRoot string) string {
	dir, err := p.CacheDir(ctx, repoRoot)
	if err != nil {
		return ""
	}
	path := filepath.Join(dir, p.BinaryName())
	if p.binaryVersion(ctx, path) != p.Version {
		return ""
	}
	return path
}

// pinned checks that the tools module pins the provider at its version: a go.mod bumped
// without this table (or the other way round) would build one version and publish it as
// another.
func (p ThirdParty) pinned(repoRoot string) error {
	v, err := ModuleVersion(filepath.Join(p.toolsDir(repoRoot), "go.mod"), p.Module)
	if err != nil {
		return err
	}
	if v != "v"+p.Version {
		return fmt.Errorf("tools/%s/go.mod pins %s %s, but Gantry publishes %s %s", p.Tools, p.Module, v, p.Source, p.Version)
	}
	return nil
}

// binaryVersion reads the version of the provider's module from the binary's Go build
// information ("1.13.4"), without running it (a provider run by hand only says it is a
// plugin). It returns "" for a missing file, another program or another version's build.
func (p ThirdParty) binaryVersion(_ context.Context, path string) string {
	info, err := buildinfo.ReadFile(path)
	if err != nil || info.Path != p.Package || info.Main.Path != p.Module {
		return ""
	}
	return strings.TrimPrefix(info.Main.Version, "v")
}

// Binary is the provider's built binary at path, as ToolchainFrom publishes it.
func (p ThirdParty) Binary(path string) ProviderBinary {
	return ProviderBinary{Source: p.Source, Version: p.Version, Path: path}
}

// ProviderBinary is a provider binary to publish into the built-in mirror.
type ProviderBinary struct {
	Source  string // "registry.opentofu.org/hashicorp/kubernetes"
	Version string // "1.13.4"
	Path    string // the executable
}
