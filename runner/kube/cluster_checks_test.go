//go:build !fast

// Live: needs the machine's Kubernetes test cluster (as root) and live OpenTofu (bin/tofu, built from tools/tofu).

package kube_test

// The checks the runc executor passes, on the real cluster: a pod's isolation (what it
// sees from inside, and what its Job, pod and Secret say), a stale plan never applied,
// secrets in no object but their Secret and in no log, the memory limit, the executor's
// health and the sweep of a dead portal's Jobs.

import (
	"bytes"
	"context"
	"encoding/json"
	"net"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"gantry/bench"
	"gantry/cmd/gantry/webtest"
	"gantry/models/idempotency"
	"gantry/models/run"
	"gantry/runner/kube"
	"gantry/runner/kube/kubecluster/kubetest"
	"gantry/runner/oci"
	"gantry/runner/tofu"
	"gantry/runner/tofu/tofutest"
	"gantry/syncio"
)

// probeEnv is the cluster, a namespace, the runner image and a phase endpoint on the
// gateway, without Gantry: for pods launched by hand.
type probeEnv struct {
	ce     *clusterEnv
	portal *kube.Portal
	url    string
}

func startProbe(t *testing.T) probeEnv {
	t.Helper()
	c := kubetest.Cluster(t)
	client, err := c.Client()
	require.NoError(t, err)
	root, err := tofu.RepoRoot(".")
	require.NoError(t, err)
	tc := tofutest.Toolchain(t, root, t.TempDir(), logWriter{t})
	ce := &clusterEnv{cluster: c, client: client, ns: kubetest.Namespace(t, c), image: importRunnerImage(t, c, tc, root)}
	ce.launcher, err = kube.NewJobLauncher(kube.JobConfig{Client: client, Namespace: ce.ns, Image: ce.image, Replica: "probe",
		Limits: oci.Limits{MemoryBytes: 256 << 20, CPUs: 1}})
	require.NoError(t, err)
	ln, err := net.Listen("tcp", net.JoinHostPort(c.Gateway(), "0"))
	require.NoError(t, err)
	p := probeEnv{ce: ce, portal: kube.NewPortal(), url: "http://" + ln.Addr().String()}
	mux := http.NewServeMux()
	mux.Handle(kube.PathPrefix, p.portal)
	serve(t, ln, mux)
	return p
}

// open opens a session for a made-up phase of run runID.
func (p probeEnv) open(t *testing.T, runID string) (kube.Inputs, string) {
	t.Helper()
	in := kube.Inputs{Description: kube.Description{Job: "gantry-plan-" + strings.ToLower(strings.ReplaceAll(runID, "_", "-")), Phase: kube.PhasePlan,
		RunID: runID, WorkspaceID: "ws-" + runID}, Config: []byte("the config of " + runID)}
	s, token, err := p.portal.Open(in)
	require.NoError(t, err)
	t.Cleanup(func() { p.portal.Close(s) })
	return in, token
}

// TestPodIsolation: a pod of the runner image runs as the runner uid with no capability,
// no privilege escalation, seccomp filtering, a read-only root and no service-account
// token; it sees its own Secret's files and nothing else of any run: another run's phase
// refuses its token (403), and the apiserver knows it as nobody. Its Job, pod and Secret
// say the same: the Secret is owned by the Job, immutable, and the only place the
// secrets are.
func TestPodIsolation(t *testing.T) {
	p := startProbe(t)
	mine, token := p.open(t, "run-mine")
	theirs, _ := p.open(t, "run-theirs")
	secrets := map[string][]byte{kube.SecretEndpointToken: []byte(token), kube.SecretStateUsername: []byte("job-cred-1"),
		kube.SecretStatePassword: []byte("canary-STATE-password"), kube.SecretCloudToken: []byte("canary-CLOUD-token"),
		"var.note": []byte("canary-VARIABLE-value")}
	var log syncio.Buffer // written by the pod's follower, read by the test
	apiserver := "https://" + net.JoinHostPort(p.ce.cluster.NodeIP(), "6443") + "/api/v1/namespaces/" + p.ce.ns + "/secrets"
	spec := kube.PodSpec{Job: mine.Job, Phase: kube.PhasePlan, RunID: mine.RunID, Log: &log, Timeout: 5 * time.Minute,
		Env:     map[string]string{kube.EnvPhaseURL: p.url + kube.PathPrefix + mine.Job, kube.EnvCloudEndpoint: "http://cloud.invalid"},
		Secrets: secrets,
		Args:    []string{"-probe", p.url + kube.PathPrefix + theirs.Job + "/config", p.url + kube.PathPrefix + mine.Job + "/config", apiserver}}
	pod, err := p.ce.launcher.Launch(t.Context(), spec)
	require.NoError(t, err)
	exit, err := pod.Wait(t.Context())
	require.NoError(t, err)
	require.Equal(t, 0, exit.ExitCode, "%+v\n%s", exit, log.String())

	// What the pod saw.
	var seen struct {
		UID                    int `json:"uid"`
		GID                    int `json:"gid"`
		EUID                   int `json:"euid"`
		CapEff, CapPrm, CapBnd string
		NoNewPrivs, Seccomp    string
		WriteRoot              string            `json:"write_root"`
		WriteBin               string            `json:"write_bin"`
		WriteSecrets           string            `json:"write_secrets"`
		WriteWork              string            `json:"write_work"`
		ServiceAccountToken    bool              `json:"service_account_token"`
		SecretFiles            []string          `json:"secret_files"`
		Env                    []string          `json:"env"`
		Own                    string            `json:"own"`
		Others                 map[string]string `json:"others"`
	}
	require.NoError(t, json.Unmarshal([]byte(strings.TrimSpace(log.String())), &seen), log.String())
	t.Logf("inside: %s", log.String())
	require.Equal(t, kube.RunnerUID, seen.UID)
	require.Equal(t, kube.RunnerUID, seen.EUID)
	require.Equal(t, kube.RunnerUID, seen.GID)
	require.Equal(t, "0000000000000000", seen.CapEff, "no effective capability")
	require.Equal(t, "0000000000000000", seen.CapPrm, "no permitted capability")
	require.Equal(t, "0000000000000000", seen.CapBnd, "an empty bounding set")
	require.Equal(t, "1", seen.NoNewPrivs)
	require.Equal(t, "2", seen.Seccomp, "a seccomp filter (RuntimeDefault)")
	require.Contains(t, seen.WriteRoot, "read-only file system")
	require.Contains(t, seen.WriteBin, "read-only file system")
	require.Contains(t, seen.WriteSecrets, "read-only file system")
	require.Empty(t, seen.WriteWork, "/work is the pod's writable place")
	require.False(t, seen.ServiceAccountToken, "no service-account token")
	require.Equal(t, []string{kube.SecretCloudToken, kube.SecretEndpointToken, kube.SecretStatePassword, kube.SecretStateUsername, "var.note"}, seen.SecretFiles)
	for _, name := range seen.Env {
		require.False(t, strings.HasPrefix(name, "TF_") || strings.Contains(name, "TOKEN") || strings.Contains(name, "PASSWORD"), "environment variable %s", name)
	}
	require.Equal(t, "200 OK", seen.Own)
	require.Equal(t, "403 Forbidden", seen.Others[p.url+kube.PathPrefix+theirs.Job+"/config"], "another run's phase refuses this pod's token")
	require.Equal(t, "200 OK", seen.Others[p.url+kube.PathPrefix+mine.Job+"/config"])
	require.Contains(t, []string{"401 Unauthorized", "403 Forbidden"}, seen.Others[apiserver], "the apiserver knows the pod as nobody")

	// What its Job, pod and Secret say.
	ctx := t.Context()
	job, err := p.ce.client.BatchV1().Jobs(p.ce.ns).Get(ctx, spec.Job, metav1.GetOptions{})
	require.NoError(t, err)
	requireJobSpec(t, job, p.ce.image)
	sec, err := p.ce.client.CoreV1().Secrets(p.ce.ns).Get(ctx, spec.Job, metav1.GetOptions{})
	require.NoError(t, err)
	require.Len(t, sec.OwnerReferences, 1)
	require.Equal(t, job.UID, sec.OwnerReferences[0].UID, "the Secret is owned by its Job")
	require.True(t, *sec.OwnerReferences[0].BlockOwnerDeletion)
	require.True(t, *sec.Immutable)
	require.Equal(t, secrets, sec.Data)
	objects := p.ce.objectsJSON(t, false)
	for name, v := range secrets {
		if name != kube.SecretStateUsername {
			require.False(t, bytes.Contains(objects, v), "%s is in a Job or pod object", name)
		}
	}
	require.NoError(t, pod.Delete(context.WithoutCancel(ctx), false))
	p.ce.requireNothingLeft(t, time.Minute)
}

// requireJobSpec checks the security settings of a phase's Job.
func requireJobSpec(t *testing.T, job *batchv1.Job, image string) {
	t.Helper()
	require.Equal(t, int32(0), *job.Spec.BackoffLimit)
	require.NotNil(t, job.Spec.TTLSecondsAfterFinished)
	require.NotNil(t, job.Spec.ActiveDeadlineSeconds)
	ps := job.Spec.Template.Spec
	require.Equal(t, corev1.RestartPolicyNever, ps.RestartPolicy)
	require.False(t, *ps.AutomountServiceAccountToken)
	require.False(t, *ps.EnableServiceLinks)
	require.True(t, *ps.SecurityContext.RunAsNonRoot)
	require.Equal(t, int64(kube.RunnerUID), *ps.SecurityContext.RunAsUser)
	require.Equal(t, corev1.SeccompProfileTypeRuntimeDefault, ps.SecurityContext.SeccompProfile.Type)
	require.Len(t, ps.Containers, 1)
	c := ps.Containers[0]
	require.Equal(t, image, c.Image)
	require.Equal(t, corev1.PullNever, c.ImagePullPolicy)
	require.False(t, *c.SecurityContext.AllowPrivilegeEscalation)
	require.True(t, *c.SecurityContext.ReadOnlyRootFilesystem)
	require.Equal(t, []corev1.Capability{"ALL"}, c.SecurityContext.Capabilities.Drop)
	require.False(t, c.Resources.Limits.Memory().IsZero())
	require.False(t, c.Resources.Limits.Cpu().IsZero())
}

// TestHealthAndSweep: the executor is healthy with its image imported, and says why not
// with an image no node has or a namespace that does not exist; a restarted replica's
// sweep deletes its own Jobs and Secrets and leaves another replica's alone.
func TestHealthAndSweep(t *testing.T) {
	p := startProbe(t)
	ctx := t.Context()
	require.NoError(t, p.ce.launcher.Health(ctx))
	for _, tc := range []struct {
		ns, image, want string
	}{
		{p.ce.ns, kube.ImageRepository + ":not-imported", "is on no Ready node"},
		{"no-such-namespace", p.ce.image, "namespace no-such-namespace does not exist"},
	} {
		l, err := kube.NewJobLauncher(kube.JobConfig{Client: p.ce.client, Namespace: tc.ns, Image: tc.image})
		require.NoError(t, err)
		require.ErrorContains(t, l.Health(ctx), tc.want)
	}

	launch := func(replica string) string {
		in, token := p.open(t, "run-"+replica)
		l, err := kube.NewJobLauncher(kube.JobConfig{Client: p.ce.client, Namespace: p.ce.ns, Image: p.ce.image, Replica: replica})
		require.NoError(t, err)
		pod, err := l.Launch(ctx, kube.PodSpec{Job: in.Job, Phase: kube.PhasePlan, RunID: in.RunID, Log: &syncio.Buffer{},
			Env:     map[string]string{kube.EnvPhaseURL: p.url + kube.PathPrefix + in.Job},
			Secrets: map[string][]byte{kube.SecretEndpointToken: []byte(token)}, Args: []string{"-probe"}})
		require.NoError(t, err)
		_, err = pod.Wait(ctx)
		require.NoError(t, err)
		return in.Job
	}
	dead, other := launch("replica-a"), launch("replica-b")
	restarted, err := kube.NewJobLauncher(kube.JobConfig{Client: p.ce.client, Namespace: p.ce.ns, Image: p.ce.image, Replica: "replica-a"})
	require.NoError(t, err)
	changed := namespaceChanges(t, p.ce)
	n, err := restarted.Sweep(ctx)
	require.NoError(t, err)
	require.Equal(t, 1, n)
	// The deletions finish in the background (the pod goes after its Job): wait for them,
	// woken by the namespace's watch events.
	bench.Eventually(t, "replica-a's Job, pod and Secret to go while replica-b's stay", time.Minute, func() (bool, any) {
		all := p.ce.leftovers(t)
		left := strings.Join(all, " ")
		return !strings.Contains(left, dead) && strings.Contains(left, "job/"+other) && strings.Contains(left, "secret/"+other), all
	}, bench.Wake(changed))
}

// namespaceChanges signals at every change to a Job, pod or Secret in ce's namespace.
func namespaceChanges(t testing.TB, ce *clusterEnv) <-chan struct{} {
	t.Helper()
	return kubetest.Changes(t, ce.client, ce.ns)
}

// TestPodMemoryLimit: a phase over its pod's memory limit fails saying so, in the runc
// executor's words.
func TestPodMemoryLimit(t *testing.T) {
	e, ce := startOnCluster(t, envOptions{limits: oci.Limits{MemoryBytes: 16 << 20, CPUs: 1}})
	operator := e.LoggedIn(t, "operator@acme.test")
	dev := e.OrgEnvironmentID(t, "acme", "development")
	id := e.App.RequestRun(t, operator, bucketInputs(dev, "logs", "30"))
	var r run.Run
	require.NoError(t, e.DB.Where("id = ?", id).Take(&r).Error)
	// Any end will do (the assertions below say which one it must be): woken by the run's
	// change notifications.
	wake, stop := e.App.Server.Changes.Subscribe(r.OrganizationID, id)
	defer stop()
	bench.Eventually(t, "run "+id+" to end", phaseWait, func() (bool, any) {
		require.NoError(t, e.DB.Where("id = ?", id).Take(&r).Error)
		return r.State.Terminal(), r.State
	}, bench.Wake(wake))
	require.Equal(t, run.Failed, r.State, "%s%s", r.StateReason, e.App.RunLogs(t, r))
	require.Contains(t, r.StateReason, "exceeded its memory limit of 16 MiB", e.App.RunLogs(t, r))
	t.Logf("reason: %s", r.StateReason)
	ce.requireNothingLeft(t, time.Minute)
}

// TestLiveStalePlanAsJobs: two runs planned from the same state as Jobs; the first is
// approved and applied; the state it writes makes the second STALE, approving it is
// refused (409) and it never applies.
func TestLiveStalePlanAsJobs(t *testing.T) {
	e, ce := startOnCluster(t, envOptions{})
	operator := e.LoggedIn(t, "operator@acme.test")
	admin := e.LoggedIn(t, "admin@acme.test")
	staging := e.OrgEnvironmentID(t, "acme", "staging")
	base := e.App.WaitForRun(t, e.App.RequestRun(t, operator, bucketInputs(staging, "logs", "30")), run.PendingApproval, phaseWait)
	approve(t, e.App, admin, base)
	e.App.WaitForRun(t, base.ID, run.Succeeded, phaseWait)

	first := e.App.WaitForRun(t, e.App.RequestRun(t, operator, bucketInputs(staging, "logs", "60")), run.PendingApproval, phaseWait)
	second := e.App.WaitForRun(t, e.App.RequestRun(t, operator, bucketInputs(staging, "logs", "90")), run.PendingApproval, phaseWait)
	require.Equal(t, first.PriorSerial, second.PriorSerial, "both planned from the same state")
	approve(t, e.App, admin, first)
	e.App.WaitForRun(t, first.ID, run.Succeeded, phaseWait)
	second = e.App.WaitForRun(t, second.ID, run.Stale, time.Minute)
	require.Contains(t, second.StateReason, "the workspace state moved to serial")
	v := url.Values{"_csrf": {e.CSRF(t, admin)}, "idempotency_key": {idempotency.NewKey()}}
	for field, value := range run.EvidenceOf(second).Fields() {
		v.Set(field, value)
	}
	resp := e.PostForm(t, admin, "/runs/"+second.ID+"/approve", v)
	body := webtest.ReadBody(t, resp)
	require.Equal(t, http.StatusConflict, resp.StatusCode, body)
	require.Contains(t, body, "This run is stale", "the refusal says the state in words")
	var versions int64
	require.NoError(t, e.DB.Table("state_versions").Where("workspace_id = ? AND run_id = ?", second.WorkspaceID, second.ID).Count(&versions).Error)
	require.Zero(t, versions, "the stale run wrote no state")
	require.Empty(t, e.applies(t, second), "the stale plan was never applied")
	for _, s := range ce.rec.launched() {
		require.False(t, s.RunID == second.ID && s.Phase == kube.PhaseApply, "no apply Job for the stale run")
	}
	ce.requireNothingLeft(t, 30*time.Second)
}
