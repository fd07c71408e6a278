package tofu

import (
	"fmt"
	"os"
	"path/filepath"

	"github.com/hashicorp/hcl/v2/hclsyntax"
	"github.com/hashicorp/hcl/v2/hclwrite"
	"github.com/zclconf/go-cty/cty"
)

// SandboxInclude is the address pattern of the providers Gantry builds from its own source
// tree (the sandbox provider, portal.local/sandbox/sandbox, and the S3 provider,
// portal.local/gantry/s3): always from the built-in mirror, never from the operator's.
const SandboxInclude = "portal.local/*/*"

// BuiltinIncludes are the provider addresses the CLI configuration installs from the built-in
// mirror: the sandbox provider's and every pinned third-party provider's (ThirdParties), which
// the mirror holds when the toolchain was built with them. With no `direct` installation
// method (unless the operator asks for the registry), no other provider can be installed.
func BuiltinIncludes() []string {
	out := []string{SandboxInclude}
	for _, p := range ThirdParties {
		out = append(out, p.Source)
	}
	return out
}

// CLIConfig is the tofu CLI configuration Gantry writes for its jobs.
type CLIConfig struct {
	Mirror   string         // the built-in mirror directory (made absolute)
	Operator ProviderMirror // the operator's mirror, for every provider but the sandbox's
}

// WriteCLIConfig writes a tofu CLI configuration to path that installs providers only from the
// built-in filesystem mirror at mirrorDir (CLIConfig without an operator mirror).
func WriteCLIConfig(path, mirrorDir string) error {
	return CLIConfig{Mirror: mirrorDir}.Write(path)
}

// Write writes the configuration to path: the built-in filesystem mirror first (made
// absolute: tofu would resolve a relative path against its working directory) for
// BuiltinIncludes, then the operator's mirror, if any, for everything but the sandbox
// provider. There is no `direct` block unless the operator chose the registry, so `tofu init`
// asks nothing else for anything, and the update checkpoint is off. Which provider versions
// and packages are accepted is the lock file's business (tofu init -lockfile=readonly).
func (c CLIConfig) Write(path string) error {
	abs, err := filepath.Abs(c.Mirror)
	if err != nil {
		return fmt.Errorf("resolving the mirror directory: %w", err)
	}

	f := hclwrite.NewEmptyFile()
	root := f.Body()
	comment := "# Written by gantry: providers come only from the local mirror.\n"
	if c.Operator != (ProviderMirror{}) {
		comment = "# Written by gantry: providers come only from the local mirror and the operator's.\n"
	}
	root.AppendUnstructuredTokens(hclwrite.Tokens{{Type: hclsyntax.TokenComment, Bytes: []byte(comment)}})
	install := root.AppendNewBlock("provider_installation", nil).Body()
	mirror := install.AppendNewBlock("filesystem_mirror", nil).Body()
	mirror.SetAttributeValue("path", cty.StringVal(abs))
	mirror.SetAttributeValue("include", stringList(BuiltinIncludes()))
	var op *hclwrite.Body
	switch {
	case c.Operator.Dir != "":
		op = install.AppendNewBlock("filesystem_mirror", nil).Body()
		op.SetAttributeValue("path", cty.StringVal(c.Operator.Dir))
	case c.Operator.URL != "":
		op = install.AppendNewBlock("network_mirror", nil).Body()
		op.SetAttributeValue("url", cty.StringVal(c.Operator.URL))
	case c.Operator.Registry:
		op = install.AppendNewBlock("direct", nil).Body()
	}
	if op != nil {
		op.SetAttributeValue("exclude", stringList([]string{SandboxInclude}))
	}
	root.SetAttributeValue("disable_checkpoint", cty.True)

	if err := os.WriteFile(path, f.Bytes(), 0o644); err != nil {
		return fmt.Errorf("writing the tofu CLI configuration: %w", err)
	}
	return nil
}

func stringList(ss []string) cty.Value {
	vals := make([]cty.Value, len(ss))
	for i, s := range ss {
		vals[i] = cty.StringVal(s)
	}
	return cty.ListVal(vals)
}

// Env is the complete environment of a tofu invocation: the CLI configuration at cliConfig, home
// as both HOME and TMPDIR (it must exist and be writable: plugins put their sockets in TMPDIR),
// automation mode, no prompts, no update checkpoint and a fixed PATH.
//
// Nothing comes from the calling process. A developer's TF_CLI_CONFIG_FILE or ~/.terraformrc
// (with a `direct` block or registry credentials), TF_LOG, TF_VAR_*, cloud credentials or proxy
// settings therefore never reach tofu or the providers it starts. Callers append what a run does
// need (SANDBOX_TOKEN, TF_HTTP_USERNAME, ...); for a key listed twice os/exec keeps the last.
func Env(cliConfig, home string) []string {
	return []string{
		"PATH=/usr/local/bin:/usr/bin:/bin",
		"HOME=" + home,
		"TMPDIR=" + home,
		"TF_CLI_CONFIG_FILE=" + cliConfig,
		"TF_IN_AUTOMATION=1",
		"TF_INPUT=0",
		"CHECKPOINT_DISABLE=1",
		// The http state backend retries a 5xx or a refused connection this often, waiting
		// up to 5 s between tries (about 40 s in all): a portal whose database restarts
		// answers 503 meanwhile, and the apply's state reaches it once it is back
		// (OpenTofu's defaults, 2 tries, give up within seconds and leave errored.tfstate).
		"TF_HTTP_RETRY_MAX=10",
		"TF_HTTP_RETRY_WAIT_MAX=5",
	}
}
