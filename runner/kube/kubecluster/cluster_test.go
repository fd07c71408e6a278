//go:build !fast

// Live: needs the machine's Kubernetes test cluster (as root).

package kubecluster_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"gantry/bench"
	"gantry/runner/kube/kubecluster"
	"gantry/runner/kube/kubecluster/kubetest"
	"gantry/runner/ociimage"
	"gantry/runner/tofu"
)

// These tests run a real cluster: they need root and the Debian packages etcd-server,
// containerd, containernetworking-plugins and runc, and fail without them (kubetest says what to
// install). The first run builds the pinned Kubernetes binary (minutes; cached afterwards).

const helloLine = "hello from a Job on the gantry test cluster"

// TestJobRunsWithALocallyBuiltImage: a static Go program packed into an image with ociimage,
// imported into the cluster's containerd, runs as a batch/v1 Job (imagePullPolicy Never: no
// registry anywhere), completes, and its log read through the apiserver (which fetches it from
// the kubelet) is the program's output.
func TestJobRunsWithALocallyBuiltImage(t *testing.T) {
	c := kubetest.Cluster(t)
	ns := kubetest.Namespace(t, c)
	ctx, cancel := bench.Context(context.Background(), 5*time.Minute)
	defer cancel()

	bin := filepath.Join(t.TempDir(), "hello")
	build := tofu.GoBuild{Label: "hello", Dir: ".", Package: "./testdata/hello", Flags: []string{"-trimpath", "-ldflags", "-s -w", "-o", bin}}
	require.NoError(t, build.Run(ctx, nil, t.Output()))
	tag := randomTag(t)
	image := "gantry.local/kubecluster-test/hello:" + tag
	require.NoError(t, c.ImportImage(ctx, ociimage.Image{
		Name:       image,
		Files:      []ociimage.File{{Path: "/hello", Mode: 0o755, Source: bin}},
		Entrypoint: []string{"/hello"},
		User:       "65532:65532",
	}))
	images, err := c.Images(ctx)
	require.NoError(t, err)
	require.Contains(t, images, image)

	clientset, err := c.Client()
	require.NoError(t, err)
	no, yes := false, true
	nonRoot := int64(65532)
	job := &batchv1.Job{
		ObjectMeta: metav1.ObjectMeta{Name: "hello"},
		Spec: batchv1.JobSpec{
			BackoffLimit: new(int32),
			Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{
				RestartPolicy:                corev1.RestartPolicyNever,
				AutomountServiceAccountToken: &no,
				Containers: []corev1.Container{{
					Name: "hello", Image: image, ImagePullPolicy: corev1.PullNever,
					SecurityContext: &corev1.SecurityContext{
						RunAsNonRoot: &yes, RunAsUser: &nonRoot, ReadOnlyRootFilesystem: &yes,
						AllowPrivilegeEscalation: &no, Capabilities: &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}},
						SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault},
					},
				}},
			}},
		},
	}
	created := time.Now()
	_, err = clientset.BatchV1().Jobs(ns).Create(ctx, job, metav1.CreateOptions{})
	require.NoError(t, err)
	waitJobComplete(ctx, t, clientset, ns, "hello")
	t.Logf("job created → Complete in %s", time.Since(created).Round(time.Millisecond))

	pods, err := clientset.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: "batch.kubernetes.io/job-name=hello"})
	require.NoError(t, err)
	require.Len(t, pods.Items, 1)
	require.Equal(t, corev1.PodSucceeded, pods.Items[0].Status.Phase)
	logs, err := clientset.CoreV1().Pods(ns).GetLogs(pods.Items[0].Name, &corev1.PodLogOptions{}).DoRaw(ctx)
	require.NoError(t, err)
	require.Equal(t, helloLine+"\n", string(logs))
}

// TestStopLeavesNothingBehind stops the shared cluster (waiting until no test in any package
// uses it) while a pod runs, and checks that nothing of it is left: no process of its PID files
// or any other naming the state directory (containerd's shims), no mount under the directory,
// no pod bridge, no kubepods cgroup. A second Stop is a no-op. Then it starts the cluster
// again for the tests after it, measuring the start, and a further Start reuses it.
func TestStopLeavesNothingBehind(t *testing.T) {
	dir, root := kubetest.Exclusive(t)
	ctx, cancel := bench.Context(context.Background(), 30*time.Minute) // a first run builds the binary
	defer cancel()
	c, err := kubecluster.Start(ctx, kubecluster.Options{Dir: dir, RepoRoot: root, Log: t.Output()})
	require.NoError(t, err)

	// A running pod: a container, its shim, its mounts, its network namespace and veth.
	clientset, err := c.Client()
	require.NoError(t, err)
	no := false
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "sleeper-" + randomTag(t)},
		Spec: corev1.PodSpec{
			AutomountServiceAccountToken: &no,
			Containers:                   []corev1.Container{{Name: "pause", Image: kubecluster.PauseImage, ImagePullPolicy: corev1.PullNever}},
		},
	}
	_, err = clientset.CoreV1().Pods(metav1.NamespaceDefault).Create(ctx, pod, metav1.CreateOptions{})
	require.NoError(t, err)
	waitPodRunning(ctx, t, clientset, metav1.NamespaceDefault, pod.Name)

	pids := kubecluster.PIDs(dir)
	require.Len(t, pids, 6, "every component runs: %v", pids)
	require.NotEmpty(t, processesNaming(dir), "the processes of the cluster name its directory")
	mounts := mountsUnder(t, dir)
	require.NotEmpty(t, mounts, "a running pod has mounts under the state directory")

	require.NoError(t, kubecluster.Stop(ctx, dir))
	for name, pid := range pids {
		require.False(t, alive(pid), "%s (pid %d) still runs after Stop", name, pid)
	}
	require.Empty(t, processesNaming(dir), "processes naming the state directory after Stop")
	require.Empty(t, mountsUnder(t, dir))
	pidFiles, err := filepath.Glob(filepath.Join(dir, "run", "*.pid"))
	require.NoError(t, err)
	require.Empty(t, pidFiles)
	_, err = os.Stat("/sys/class/net/" + kubecluster.BridgeName)
	require.ErrorIs(t, err, os.ErrNotExist, "the pod bridge is deleted")
	kubepods, err := filepath.Glob("/sys/fs/cgroup/*/kubepods")
	require.NoError(t, err)
	require.Empty(t, kubepods)
	for _, port := range []string{"2379", "2380", "6443", "10248", "10257", "10259"} {
		ln, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", port))
		require.NoError(t, err, "Stop returns once the cluster's ports bind again")
		ln.Close()
	}
	require.False(t, kubecluster.Running(dir))
	require.NoError(t, kubecluster.Stop(ctx, dir), "stopping a stopped cluster")

	// Start again: the binary, PKI and pause image are there; this is the start every test
	// run pays once.
	c, err = kubecluster.Start(ctx, kubecluster.Options{Dir: dir, RepoRoot: root, Log: t.Output()})
	require.NoError(t, err)
	require.False(t, c.Reused)
	tm := c.Timings
	t.Logf("start: etcd healthy %s, containerd ready %s, apiserver ready %s, node Ready %s, pods admissible %s",
		tm.EtcdHealthy, tm.ContainerdReady, tm.APIServerReady, tm.NodeReady, tm.PodsAdmissible)
	_, err = clientset.CoreV1().Pods(metav1.NamespaceDefault).Get(ctx, pod.Name, metav1.GetOptions{})
	require.Error(t, err, "the objects of the stopped cluster are gone")
	again, err := kubecluster.Start(ctx, kubecluster.Options{Dir: dir, RepoRoot: root})
	require.NoError(t, err)
	require.True(t, again.Reused, "a healthy cluster is reused")
}

// waitJobComplete waits (a budget of two minutes of idle-machine time: a pod starts in
// seconds) until the Job completes, failing at once if it fails.
func waitJobComplete(ctx context.Context, t *testing.T, c *kubernetes.Clientset, ns, name string) {
	t.Helper()
	bench.Eventually(t, "job "+ns+"/"+name+" to complete", 2*time.Minute, func() (bool, any) {
		job, err := c.BatchV1().Jobs(ns).Get(ctx, name, metav1.GetOptions{})
		require.NoError(t, err)
		for _, cond := range job.Status.Conditions {
			if cond.Status == corev1.ConditionTrue {
				require.NotEqual(t, batchv1.JobFailed, cond.Type, "job failed: %s", cond.Message)
				if cond.Type == batchv1.JobComplete {
					return true, nil
				}
			}
		}
		return false, job.Status
	}, bench.Poll(100*time.Millisecond))
}

// waitPodRunning waits until the pod runs.
func waitPodRunning(ctx context.Context, t *testing.T, c *kubernetes.Clientset, ns, name string) {
	t.Helper()
	bench.Eventually(t, "pod "+ns+"/"+name+" to run", 2*time.Minute, func() (bool, any) {
		pod, err := c.CoreV1().Pods(ns).Get(ctx, name, metav1.GetOptions{})
		require.NoError(t, err)
		return pod.Status.Phase == corev1.PodRunning, pod.Status
	}, bench.Poll(100*time.Millisecond))
}

// processesNaming lists the live processes (other than this one) whose command line names dir.
func processesNaming(dir string) []string {
	entries, _ := os.ReadDir("/proc")
	var out []string
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == os.Getpid() || !alive(pid) {
			continue
		}
		cmdline, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err == nil && bytes.Contains(cmdline, []byte(dir)) {
			out = append(out, e.Name()+": "+strings.ReplaceAll(string(cmdline), "\x00", " "))
		}
	}
	return out
}

// alive: the process exists and is not a zombie.
func alive(pid int) bool {
	stat, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "stat"))
	if err != nil {
		return false
	}
	i := bytes.LastIndexByte(stat, ')')
	return i > 0 && i+2 < len(stat) && stat[i+2] != 'Z' && stat[i+2] != 'X'
}

func mountsUnder(t *testing.T, dir string) []string {
	data, err := os.ReadFile("/proc/self/mountinfo")
	require.NoError(t, err)
	var out []string
	for _, line := range strings.Split(string(data), "\n") {
		if f := strings.Fields(line); len(f) > 4 && strings.HasPrefix(f[4], dir+"/") {
			out = append(out, f[4])
		}
	}
	return out
}

func randomTag(t *testing.T) string {
	b := make([]byte, 4)
	_, err := rand.Read(b)
	require.NoError(t, err)
	return hex.EncodeToString(b)
}
