package tofurun

import (
	"context"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"gantry/models/environment"
	"gantry/models/identity"
	"gantry/runner"
	"gantry/runner/targets"
	"gantry/syncio"
)

// fakeExec is an executor that runs nothing; container makes it show secrets at
// /run/secrets and reach no network, as the runc executor does.
type fakeExec struct{ container bool }

func (fakeExec) Name() string                 { return "fake" }
func (fakeExec) Isolated() bool               { return false }
func (fakeExec) Health(context.Context) error { return nil }
func (f fakeExec) SecretsAt(host string) string {
	return map[bool]string{true: "/run/secrets", false: host}[f.container]
}
func (f fakeExec) NoEgress() bool { return f.container }
func (fakeExec) Run(context.Context, string, Command) (int, string, error) {
	return 0, "", nil
}

func kubeWiring(scope string) targets.Wiring {
	return targets.Wiring{Scope: scope, Session: "gantry-run-1-plan", Target: environment.Target{Kind: environment.TargetKubernetes,
		Kubernetes: &environment.KubernetesTarget{Server: "https://127.0.0.1:6443", CA: "-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n"}}}
}

func jobWith(t *testing.T, exec Executor, creds runner.Credentials) (*job, error) {
	t.Helper()
	j := &job{r: &Runner{Exec: exec}, dir: filepath.Join(t.TempDir(), "job-1"), creds: creds, stop: func() {}}
	j.out = syncio.NewWriter(io.Discard)
	require.NoError(t, os.Mkdir(j.dir, 0o700))
	t.Cleanup(j.close)
	return j, j.secretFiles(t.Context(), io.Discard)
}

// A phase of a Kubernetes environment gets its token file and a kubeconfig reading it in
// the secret directory, beside (never in) the working directory, and the variables
// naming them as the command sees the directory; the token is in no variable and no
// other file.
func TestTargetWiringReachesTheJob(t *testing.T) {
	t.Parallel()
	const token = "eyJ.token.sig"
	j, err := jobWith(t, fakeExec{}, runner.Credentials{CloudToken: token, Wiring: kubeWiring(identity.ScopeRead)})
	require.NoError(t, err)
	dir := j.files.Dir()
	require.Equal(t, j.dir+".secrets", dir)
	ents, err := os.ReadDir(dir)
	require.NoError(t, err)
	var names []string
	for _, e := range ents {
		names = append(names, e.Name())
		info, err := e.Info()
		require.NoError(t, err)
		require.Equal(t, os.FileMode(0o400), info.Mode().Perm(), e.Name())
	}
	require.Equal(t, []string{"cloud-token", "kubeconfig"}, names)
	body, err := os.ReadFile(filepath.Join(dir, "kubeconfig"))
	require.NoError(t, err)
	require.Contains(t, string(body), `"tokenFile": "`+dir+`/cloud-token"`)
	require.NotContains(t, string(body), token)
	env := j.files.Env()
	require.Contains(t, env, "KUBE_CONFIG="+dir+"/kubeconfig")
	require.Contains(t, env, "KUBE_LOAD_CONFIG_FILE=true")
	require.NotContains(t, strings.Join(env, "\n"), token)
	require.NotContains(t, strings.Join(env, "\n"), "SANDBOX_TOKEN_FILE", "a Kubernetes phase has no sandbox token")

	// A zero wiring is the sandbox's, as before targets.
	j, err = jobWith(t, fakeExec{}, runner.Credentials{CloudToken: token})
	require.NoError(t, err)
	require.Equal(t, []string{"SANDBOX_TOKEN_FILE=" + j.files.Dir() + "/cloud-token"}, j.files.Env())
}

// A container sees the directory at /run/secrets, so the files name that path; and a
// runc job, whose network is only loopback, refuses a target it could never reach, in
// words, before anything runs.
func TestContainerJobsAndTargets(t *testing.T) {
	t.Parallel()
	j, err := jobWith(t, fakeExec{container: true}, runner.Credentials{CloudToken: "t", Wiring: targets.Wiring{Scope: identity.ScopeRead}})
	require.NoError(t, err)
	require.Equal(t, []string{"SANDBOX_TOKEN_FILE=/run/secrets/cloud-token"}, j.files.Env())

	_, err = jobWith(t, fakeExec{container: true}, runner.Credentials{CloudToken: "t", Wiring: kubeWiring(identity.ScopeWrite)})
	require.ErrorContains(t, err, "reach only the sandbox cloud, not a kubernetes target")
}

func TestSetEnvRefusesMalformedLines(t *testing.T) {
	t.Parallel()
	d, err := newSecretDir(filepath.Join(t.TempDir(), "s"))
	require.NoError(t, err)
	for _, bad := range []string{"NOEQUALS", "=value", "A=b\x00c", "A=b\nB=c"} {
		require.Error(t, d.SetEnv([]string{bad}), "%q", bad)
	}
	require.NoError(t, d.SetEnv([]string{"A=b=c"}))
	require.Equal(t, []string{"A=b=c"}, d.Env())
}
