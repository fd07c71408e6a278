//go:build !fast

// Live: needs live OpenTofu (bin/tofu, built from tools/tofu).

package web_test

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"gantry/models/state"
	"gantry/models/state/statetest"
	"gantry/runner/tofu/tofutest"
)

// TestStateWithRealTofu runs the pinned OpenTofu (built on demand into bin/tofu by
// runner/tofu.EnsureBinary) against the backend; terraform_data needs no provider, so
// it runs offline.
func TestStateWithRealTofu(t *testing.T) {
	t.Parallel()
	bin := tofutest.Binary(t, "..", testLogWriter{t})
	f := statetest.New(t)
	base := stateServer(t, f)
	dir := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(dir, "main.tf"), []byte(`terraform {
  backend "http" {}
}
variable "v" {
  type = string
}
resource "terraform_data" "x" {
  input = var.v
}
output "v" {
  value = terraform_data.x.output
}
`), 0o600))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "cli.tfrc"), nil, 0o600))
	tf := func(user, pass string, args ...string) (string, error) {
		cmd := exec.Command(bin, args...)
		cmd.Dir = dir
		address, lockAddress := state.Addresses(base, f.WorkspaceID)
		cmd.Env = []string{"HOME=" + dir, "PATH=/usr/bin:/bin", "TF_IN_AUTOMATION=1", "TF_CLI_CONFIG_FILE=" + filepath.Join(dir, "cli.tfrc"),
			"TF_HTTP_ADDRESS=" + address, "TF_HTTP_LOCK_ADDRESS=" + lockAddress, "TF_HTTP_UNLOCK_ADDRESS=" + lockAddress,
			"TF_HTTP_USERNAME=" + user, "TF_HTTP_PASSWORD=" + pass, "TF_HTTP_RETRY_WAIT_MIN=0", "TF_HTTP_RETRY_MAX=0"}
		out, err := cmd.CombinedOutput()
		return string(out), err
	}
	applyUser, applyPass := f.Issue(t, f.WorkspaceID, f.RunID, state.PhaseApply)
	planUser, planPass := f.Issue(t, f.WorkspaceID, f.RunID, state.PhasePlan)
	ctx := context.Background()
	latest := func() (state.Version, string) {
		v, err := f.Service.Latest(ctx, f.OrgID, f.WorkspaceID)
		require.NoError(t, err)
		data, _, err := f.Artifacts.Get(ctx, f.OrgID, v.ArtifactID)
		require.NoError(t, err)
		return v, string(data)
	}

	out, err := tf(planUser, planPass, "init", "-input=false", "-no-color")
	require.NoError(t, err, out)
	out, err = tf(applyUser, applyPass, "apply", "-auto-approve", "-input=false", "-no-color", "-var", "v=one")
	require.NoError(t, err, out)
	v1, doc := latest()
	require.Contains(t, doc, `"one"`)

	out, err = tf(planUser, planPass, "plan", "-input=false", "-no-color", "-detailed-exitcode", "-var", "v=one")
	require.NoError(t, err, "no changes: exit 0\n"+out)

	out, err = tf(planUser, planPass, "apply", "-auto-approve", "-input=false", "-no-color", "-var", "v=two")
	require.Error(t, err, "a plan credential cannot write state\n"+out)
	require.Contains(t, out, "HTTP error: 403")
	require.NoError(t, os.Remove(filepath.Join(dir, "errored.tfstate")))

	out, err = tf(applyUser, applyPass, "apply", "-auto-approve", "-input=false", "-no-color", "-var", "v=two")
	require.NoError(t, err, out)
	v2, doc := latest()
	require.Contains(t, doc, `"two"`)
	require.Equal(t, v1.Lineage, v2.Lineage)
	require.Greater(t, v2.Serial, v1.Serial)

	// Another run holds the lock: tofu reports the holder.
	otherRun := f.Run(t, f.OrgID, f.WorkspaceID)
	u, p := f.Issue(t, f.WorkspaceID, otherRun, state.PhasePlan)
	holder, err := f.Service.Authenticate(ctx, u, p)
	require.NoError(t, err)
	require.NoError(t, f.Service.Lock(ctx, holder, f.WorkspaceID, tofuLockInfo("99999999-0000-4000-8000-000000000009", "OperationTypePlan")))
	out, err = tf(planUser, planPass, "plan", "-input=false", "-no-color", "-var", "v=two")
	require.Error(t, err, out)
	require.Contains(t, out, "HTTP remote state already locked")
	require.Contains(t, out, "99999999-0000-4000-8000-000000000009")
	require.Contains(t, out, "root@runner", "the holder's LockInfo is shown")

	// Fenced, the lock is free again.
	require.NoError(t, f.Service.FenceAndRelease(ctx, f.WorkspaceID, otherRun, "test"))
	out, err = tf(planUser, planPass, "plan", "-input=false", "-no-color", "-detailed-exitcode", "-var", "v=two")
	require.NoError(t, err, out)
}

// testLogWriter sends build progress to the test log.
type testLogWriter struct{ t testing.TB }

func (w testLogWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}
