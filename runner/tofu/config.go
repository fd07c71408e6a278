package tofu

import (
	"fmt"
	"os"
	"path/filepath"

	"github.com/hashicorp/hcl/v2/hclsyntax"
	"github.com/hashicorp/hcl/v2/hclwrite"
	"github.com/zclconf/go-cty/cty"
)

// MirrorInclude is the provider address pattern the CLI configuration installs from the mirror.
// With no `direct` installation method, any other provider simply cannot be installed.
const MirrorInclude = "portal.local/*/*"

// WriteCLIConfig writes a tofu CLI configuration to path that installs providers only from the
// filesystem mirror at mirrorDir (made absolute: tofu would resolve a relative path against its
// working directory). There is no `direct` block, so `tofu init` never asks a registry for
// anything, and the update checkpoint is off.
func WriteCLIConfig(path, mirrorDir string) error {
	abs, err := filepath.Abs(mirrorDir)
	if err != nil {
		return fmt.Errorf("resolving the mirror directory: %w", err)
	}

	f := hclwrite.NewEmptyFile()
	root := f.Body()
	root.AppendUnstructuredTokens(hclwrite.Tokens{{
		Type:  hclsyntax.TokenComment,
		Bytes: []byte("# Written by gantry: providers come only from the local mirror.\n"),
	}})
	mirror := root.AppendNewBlock("provider_installation", nil).Body().
		AppendNewBlock("filesystem_mirror", nil).Body()
	mirror.SetAttributeValue("path", cty.StringVal(abs))
	mirror.SetAttributeValue("include", cty.ListVal([]cty.Value{cty.StringVal(MirrorInclude)}))
	root.SetAttributeValue("disable_checkpoint", cty.True)

	if err := os.WriteFile(path, f.Bytes(), 0o644); err != nil {
		return fmt.Errorf("writing the tofu CLI configuration: %w", err)
	}
	return nil
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
