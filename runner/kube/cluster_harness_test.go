//go:build !fast

// Live: needs the machine's Kubernetes test cluster (as root) and live OpenTofu (bin/tofu, built from tools/tofu).

package kube_test

// The harness of the tests on the real single-node cluster (kubetest): Gantry, its runner
// listener and the sandbox cloud listen on the pod bridge's gateway, the runner image is
// built and imported once per test process, and each test has a namespace of its own.

import (
	"bytes"
	"context"
	"fmt"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"gantry/bench"
	catalogfiles "gantry/catalog"
	"gantry/runner/kube"
	"gantry/runner/kube/kubecluster"
	"gantry/runner/kube/kubecluster/kubetest"
	"gantry/runner/oci"
	"gantry/runner/tofu"
)

// runnerImage is built and imported once per test process (the tests share the cluster).
var runnerImage struct {
	once sync.Once
	name string
	err  error
}

// importRunnerImage builds gantry-phase and the runner image from tc and imports it
// into the cluster, once.
func importRunnerImage(t testing.TB, c *kubecluster.Cluster, tc tofu.Toolchain, root string) string {
	t.Helper()
	runnerImage.once.Do(func() {
		ctx, cancel := bench.Context(context.Background(), 15*time.Minute)
		defer cancel()
		dir := t.TempDir()
		bin, err := kube.BuildPhase(ctx, root, dir)
		if err != nil {
			runnerImage.err = err
			return
		}
		locks, err := kube.CatalogLocks(catalogfiles.FS)
		if err != nil {
			runnerImage.err = err
			return
		}
		img, err := kube.RunnerImage(tc, bin, locks)
		if err != nil {
			runnerImage.err = err
			return
		}
		if runnerImage.err = c.ImportImage(ctx, img); runnerImage.err == nil {
			runnerImage.name, runnerImage.err = img.Name, c.WaitListed(ctx, img.Name) // what Health looks for
		}
	})
	require.NoError(t, runnerImage.err, "building and importing the runner image")
	return runnerImage.name
}

// clusterEnv is the cluster side of a test.
type clusterEnv struct {
	cluster  *kubecluster.Cluster
	client   kubernetes.Interface
	ns       string
	image    string
	launcher *kube.JobLauncher
	rec      *recorder
}

// startOnCluster starts Gantry whose tofu/kubernetes executor runs phases as Jobs in a
// namespace of the test's own.
func startOnCluster(t *testing.T, opts envOptions) (*env, *clusterEnv) {
	t.Helper()
	c := kubetest.Cluster(t)
	client, err := c.Client()
	require.NoError(t, err)
	ce := &clusterEnv{cluster: c, client: client, ns: kubetest.Namespace(t, c)}
	opts.host = c.Gateway()
	if opts.limits == (oci.Limits{}) {
		opts.limits = oci.Limits{MemoryBytes: 512 << 20, CPUs: 1}
	}
	opts.launcher = func(t testing.TB, tc tofu.Toolchain, root string) kube.Launcher {
		ce.image = importRunnerImage(t, c, tc, root)
		ce.launcher, err = kube.NewJobLauncher(kube.JobConfig{Client: client, Namespace: ce.ns, Image: ce.image,
			Replica: "test " + t.Name(), Limits: opts.limits})
		require.NoError(t, err)
		ce.rec = &recorder{Launcher: ce.launcher}
		return ce.rec
	}
	e := start(t, opts)
	hctx, cancel := bench.Context(t.Context(), time.Minute)
	defer cancel()
	require.NoError(t, e.Runner.Health(hctx))
	return e, ce
}

// leftovers lists the Jobs, pods and Secrets in the test's namespace.
func (ce *clusterEnv) leftovers(t testing.TB) []string {
	t.Helper()
	ctx := context.Background()
	var left []string
	jobs, err := ce.client.BatchV1().Jobs(ce.ns).List(ctx, metav1.ListOptions{})
	require.NoError(t, err)
	for _, j := range jobs.Items {
		left = append(left, "job/"+j.Name)
	}
	pods, err := ce.client.CoreV1().Pods(ce.ns).List(ctx, metav1.ListOptions{})
	require.NoError(t, err)
	for _, p := range pods.Items {
		left = append(left, "pod/"+p.Name)
	}
	secrets, err := ce.client.CoreV1().Secrets(ce.ns).List(ctx, metav1.ListOptions{LabelSelector: kube.LabelManagedBy + "=gantry"})
	require.NoError(t, err)
	for _, s := range secrets.Items {
		left = append(left, "secret/"+s.Name)
	}
	sort.Strings(left)
	return left
}

// requireNothingLeft waits (a background deletion takes a moment), woken by the
// namespace's watches, until it holds no Job, pod or Secret of Gantry's; within is a budget
// of idle-machine time.
func (ce *clusterEnv) requireNothingLeft(t testing.TB, within time.Duration) {
	t.Helper()
	bench.Eventually(t, "nothing left in namespace "+ce.ns, within, func() (bool, any) {
		left := ce.leftovers(t)
		return len(left) == 0, strings.Join(left, ", ")
	}, bench.Wake(namespaceChanges(t, ce)))
}

// recorder launches through a Launcher, records every spec, and acts once per phase when
// the phase's log first shows a string (the hooks).
type recorder struct {
	kube.Launcher
	mu    sync.Mutex
	specs []kube.PodSpec
	hooks map[string]hook
}

type hook struct {
	watch string
	do    func(spec kube.PodSpec)
}

func (r *recorder) on(phase, watch string, do func(spec kube.PodSpec)) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.hooks == nil {
		r.hooks = map[string]hook{}
	}
	r.hooks[phase] = hook{watch: watch, do: do}
}

func (r *recorder) Launch(ctx context.Context, spec kube.PodSpec) (kube.Pod, error) {
	r.mu.Lock()
	r.specs = append(r.specs, spec)
	h, ok := r.hooks[spec.Phase]
	delete(r.hooks, spec.Phase)
	r.mu.Unlock()
	if ok {
		var once sync.Once
		spec.Log = &killer{w: spec.Log, watch: []byte(h.watch), kill: func() { once.Do(func() { go h.do(spec) }) }}
	}
	return r.Launcher.Launch(ctx, spec)
}

func (r *recorder) launched() []kube.PodSpec {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]kube.PodSpec(nil), r.specs...)
}

// deletePod deletes the pod of spec's Job, as `kubectl delete pod` does.
func (ce *clusterEnv) deletePod(t testing.TB, spec kube.PodSpec) {
	ctx := context.Background()
	pods, err := ce.client.CoreV1().Pods(ce.ns).List(ctx, metav1.ListOptions{LabelSelector: "batch.kubernetes.io/job-name=" + spec.Job})
	if err != nil || len(pods.Items) == 0 {
		t.Errorf("finding the pod of %s to delete: %v (%d pods)", spec.Job, err, len(pods.Items))
		return
	}
	for _, p := range pods.Items {
		if err := ce.client.CoreV1().Pods(ce.ns).Delete(ctx, p.Name, metav1.DeleteOptions{}); err != nil {
			t.Errorf("deleting pod %s: %v", p.Name, err)
		}
	}
}

// objectsJSON is every Job, pod and Secret of the namespace as the apiserver serves
// them, for the canary scan (Secrets' data included: the one place secrets belong).
func (ce *clusterEnv) objectsJSON(t testing.TB, withSecrets bool) []byte {
	t.Helper()
	ctx := context.Background()
	var b bytes.Buffer
	jobs, err := ce.client.BatchV1().Jobs(ce.ns).List(ctx, metav1.ListOptions{})
	require.NoError(t, err)
	for _, j := range jobs.Items {
		fmt.Fprintf(&b, "%+v\n", j)
	}
	pods, err := ce.client.CoreV1().Pods(ce.ns).List(ctx, metav1.ListOptions{})
	require.NoError(t, err)
	for _, p := range pods.Items {
		fmt.Fprintf(&b, "%+v\n", p)
	}
	if withSecrets {
		secrets, err := ce.client.CoreV1().Secrets(ce.ns).List(ctx, metav1.ListOptions{})
		require.NoError(t, err)
		for _, s := range secrets.Items {
			fmt.Fprintf(&b, "%+v\n", s)
		}
	}
	return b.Bytes()
}
