package tofu

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestWriteCLIConfig(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	name := filepath.Join(dir, "tofurc.hcl")
	// A path with a quote and a template sequence must come out escaped.
	mirror := filepath.Join(dir, `mir"ror${x}`)
	require.NoError(t, WriteCLIConfig(name, mirror))

	got, err := os.ReadFile(name)
	require.NoError(t, err)
	escaped := strings.NewReplacer(`"`, `\"`, "${", "$${").Replace(mirror)
	require.Equal(t, `# Written by gantry: providers come only from the local mirror.
provider_installation {
  filesystem_mirror {
    path    = "`+escaped+`"
    include = ["portal.local/*/*", "registry.opentofu.org/hashicorp/kubernetes"]
  }
}
disable_checkpoint = true
`, string(got))
}

// TestCLIConfigWithOperatorMirror: the operator's mirror comes after the built-in one and
// never serves the sandbox provider; each kind is written as tofu reads it.
func TestCLIConfigWithOperatorMirror(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	for _, tc := range []struct {
		op    ProviderMirror
		block string
	}{
		{ProviderMirror{Dir: "/srv/providers"}, `  filesystem_mirror {
    path    = "/srv/providers"
    exclude = ["portal.local/*/*"]
  }
`},
		{ProviderMirror{URL: "https://mirror.example/providers/"}, `  network_mirror {
    url     = "https://mirror.example/providers/"
    exclude = ["portal.local/*/*"]
  }
`},
		{ProviderMirror{Registry: true}, `  direct {
    exclude = ["portal.local/*/*"]
  }
`},
	} {
		name := filepath.Join(dir, "tofurc.hcl")
		require.NoError(t, CLIConfig{Mirror: "/var/lib/gantry/mirror", Operator: tc.op}.Write(name))
		got, err := os.ReadFile(name)
		require.NoError(t, err)
		require.Equal(t, `# Written by gantry: providers come only from the local mirror and the operator's.
provider_installation {
  filesystem_mirror {
    path    = "/var/lib/gantry/mirror"
    include = ["portal.local/*/*", "registry.opentofu.org/hashicorp/kubernetes"]
  }
`+tc.block+`}
disable_checkpoint = true
`, string(got))
	}
}

func TestWriteCLIConfigMakesTheMirrorPathAbsolute(t *testing.T) {
	name := filepath.Join(t.TempDir(), "tofurc.hcl")
	t.Chdir(t.TempDir())
	require.NoError(t, WriteCLIConfig(name, "mirror"))
	got, err := os.ReadFile(name)
	require.NoError(t, err)
	wd, err := os.Getwd()
	require.NoError(t, err)
	require.Contains(t, string(got), `path    = "`+filepath.Join(wd, "mirror")+`"`)
}

func TestEnvInheritsNothing(t *testing.T) {
	// What this environment really exports, plus things that must never reach tofu.
	t.Setenv("TF_CLI_CONFIG_FILE", "/root/.terraformrc")
	t.Setenv("TF_LOG", "trace")
	t.Setenv("TF_VAR_token", "sbx-SECRET")
	t.Setenv("AWS_SECRET_ACCESS_KEY", "secret")
	t.Setenv("HTTPS_PROXY", "http://proxy.example:3128")

	env := Env("/etc/gantry/tofurc.hcl", "/var/tmp/run-1")
	require.Equal(t, []string{
		"PATH=/usr/local/bin:/usr/bin:/bin",
		"HOME=/var/tmp/run-1",
		"TMPDIR=/var/tmp/run-1",
		"TF_CLI_CONFIG_FILE=/etc/gantry/tofurc.hcl",
		"TF_IN_AUTOMATION=1",
		"TF_INPUT=0",
		"CHECKPOINT_DISABLE=1",
		"TF_HTTP_RETRY_MAX=10",
		"TF_HTTP_RETRY_WAIT_MAX=5",
	}, env)
}

func TestPinnedVersion(t *testing.T) {
	t.Parallel()
	v, err := PinnedVersion(filepath.Join("..", ".."))
	require.NoError(t, err)
	require.True(t, strings.HasPrefix(v, "1.10."), "tools/tofu pins OpenTofu %s, want 1.10.x", v)

	_, err = PinnedVersion(t.TempDir())
	require.Error(t, err)
}
