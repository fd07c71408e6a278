// Package kubetest gives tests the real single-node Kubernetes cluster of this machine.
//
// One cluster per machine, shared by every test package of every checkout, in the machine-wide
// state directory kubecluster.DefaultDir (/var/lib/gantry/k8s, the one `go tool task k8s:up`
// uses), started by whichever test asks first. Why this and not a cluster per checkout, or one
// that tools/testenv starts up front, the way it starts PostgreSQL:
//   - the cluster holds machine-wide resources (ports 2379/6443/10250, the kubepods cgroups, the
//     pod bridge), so there can only be one at a time anyway: two checkouts each with its own
//     directory fought over the ports; one directory lets them share the cluster and count its
//     users in one place;
//   - most packages never need it: started lazily, it costs nothing to a run (or a `go test` of
//     a few packages) that reaches no Kubernetes test, and the first run's binary build (five
//     minutes) happens only when a test needs it;
//   - `go test` runs packages as separate processes at once: kubecluster.Start takes a file lock
//     in the directory, so one process starts the cluster and the others wait and reuse it.
//
// A test that stops the cluster (kubecluster's own) calls Exclusive: every Cluster caller holds
// a shared lock on the directory's users.lock until its test ends; Exclusive takes it
// exclusively (and shuts a gate in front of it so that new users wait behind the stop), so no
// test anywhere loses the cluster while it uses it. Whoever waits says whom for.
//
// A test process that uses the cluster joins the machine's test runs (kubecluster.JoinTestRun)
// until it exits, as tools/testenv does for a whole `go tool task test`; the last run to end
// stops a cluster the tests started (never one a developer started with k8s:up). A plain
// `go test` leaves it running for the next run (`go tool task k8s:down` stops it).
//
// When a test that used the cluster fails, the end of every component's log is printed into
// its output.
//
// Tests share the cluster: each works in a namespace of its own (Namespace).
package kubetest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"

	"gantry/runner/kube/kubecluster"
	"gantry/runner/tofu"
)

// startTimeout covers a first run's binary build (about five minutes on two cores, longer on a
// busy machine) and the start itself (seconds).
const startTimeout = 30 * time.Minute

// Cluster starts (or reuses) the machine's test cluster. It fails the test, saying what to
// install, when the machine lacks what the cluster needs; it never skips.
func Cluster(t testing.TB) *kubecluster.Cluster {
	t.Helper()
	root, err := tofu.RepoRoot(".")
	if err != nil {
		t.Fatalf("kubetest: %v", err)
	}
	if err := kubecluster.CheckTools(); err != nil {
		t.Fatalf("kubetest: %v", err)
	}
	dir := kubecluster.DefaultDir()
	joinTestRun(t, dir)
	// Held until the test ends: an Exclusive test in another package waits for it.
	useShared(t, dir, root)
	diagnoseOnFailure(t, dir)
	ctx, cancel := context.WithTimeout(context.Background(), startTimeout)
	defer cancel()
	c, err := kubecluster.Start(ctx, kubecluster.Options{Dir: dir, RepoRoot: root, Log: t.Output(), Owner: kubecluster.OwnerTests})
	if err != nil {
		t.Fatalf("kubetest: starting the test cluster: %v", err)
	}
	if !c.Reused {
		tm := c.Timings
		t.Logf("kubetest: started the test cluster in %s: node Ready after %s, pods admissible after %s (KUBECONFIG=%s)",
			c.Dir(), tm.NodeReady, tm.PodsAdmissible, c.Kubeconfig())
	}
	return c
}

// Exclusive waits until no test (in any package of any checkout) uses the cluster and keeps
// others from starting to until the test ends; the test may then stop and start the cluster
// in the returned state directory. It returns that directory and the source tree's root. A
// test that called Cluster must not call Exclusive (it would wait for itself).
func Exclusive(t testing.TB) (dir, repoRoot string) {
	t.Helper()
	root, err := tofu.RepoRoot(".")
	if err != nil {
		t.Fatalf("kubetest: %v", err)
	}
	if err := kubecluster.CheckTools(); err != nil {
		t.Fatalf("kubetest: %v", err)
	}
	dir = kubecluster.DefaultDir()
	joinTestRun(t, dir)
	ctx, cancel := context.WithTimeout(context.Background(), startTimeout)
	defer cancel()
	unlock, err := kubecluster.LockUsers(ctx, dir, true, who(t, root), t.Output())
	if err != nil {
		t.Fatalf("kubetest: %v", err)
	}
	t.Cleanup(unlock)
	diagnoseOnFailure(t, dir)
	return dir, root
}

func who(t testing.TB, root string) string { return t.Name() + " in " + root }

// The process's shared hold on the users lock: the first test to need it takes it (waiting
// behind a pending stop), tests that overlap it in the same process share it, and the last to
// end lets it go. A second hold from the same process must not queue behind a stop that is
// waiting for the first: it would wait for itself.
var shared struct {
	sync.Mutex
	n      int
	unlock func()
}

func useShared(t testing.TB, dir, root string) {
	t.Helper()
	shared.Lock()
	defer shared.Unlock()
	if shared.n == 0 {
		ctx, cancel := context.WithTimeout(context.Background(), startTimeout)
		defer cancel()
		unlock, err := kubecluster.LockUsers(ctx, dir, false, who(t, root), t.Output())
		if err != nil {
			t.Fatalf("kubetest: %v", err)
		}
		shared.unlock = unlock
	}
	shared.n++
	t.Cleanup(func() {
		shared.Lock()
		defer shared.Unlock()
		if shared.n--; shared.n == 0 {
			shared.unlock()
		}
	})
}

// The process's place among the machine's test runs, held until it exits.
var run struct {
	sync.Once
	err error
}

func joinTestRun(t testing.TB, dir string) {
	t.Helper()
	run.Do(func() { _, run.err = kubecluster.JoinTestRun(dir) })
	if run.err != nil {
		t.Fatalf("kubetest: %v", run.err)
	}
}

// diagnoseOnFailure prints the state of every component and the end of its log into the
// test's output should the test fail: a cluster that misbehaved explains itself where the
// failure is read, not in files a CI machine throws away.
func diagnoseOnFailure(t testing.TB, dir string) {
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("kubetest: the test cluster after this failure:\n%s", kubecluster.Diagnose(dir))
		}
	})
}

// Namespace creates a namespace of the test's own in c, deleted (with everything in it) when
// the test ends, and returns its name.
func Namespace(t testing.TB, c *kubecluster.Cluster) string {
	t.Helper()
	clientset, err := c.Client()
	if err != nil {
		t.Fatalf("kubetest: %v", err)
	}
	suffix := make([]byte, 3)
	_, _ = rand.Read(suffix)
	name := namespaceName(t.Name()) + "-" + hex.EncodeToString(suffix)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{"gantry.test/kubetest": "true"}}}
	if _, err := clientset.CoreV1().Namespaces().Create(ctx, ns, metav1.CreateOptions{}); err != nil {
		t.Fatalf("kubetest: creating namespace %s: %v", name, err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		background := metav1.DeletePropagationBackground
		if err := clientset.CoreV1().Namespaces().Delete(ctx, name, metav1.DeleteOptions{PropagationPolicy: &background}); err != nil {
			t.Errorf("kubetest: deleting namespace %s: %v", name, err)
		}
	})
	return name
}

// namespaceName makes a DNS label prefix from a test name: "TestJob/sub case" → "testjob-sub-case".
func namespaceName(test string) string {
	name := strings.Trim(regexp.MustCompile(`[^a-z0-9]+`).ReplaceAllString(strings.ToLower(test), "-"), "-")
	if len(name) > 40 {
		name = strings.TrimRight(name[:40], "-")
	}
	if name == "" {
		name = "test"
	}
	return name
}

// Changes signals at every change to a Job, pod or Secret in namespace ns for the rest of
// the test: the event a wait on what the namespace holds wakes on, instead of listing it
// over and over. The watches start before the caller's first List, so no change goes
// unseen; a watch the API server ends is not renewed, and the wait's slow safety-net poll
// covers the rest.
func Changes(t testing.TB, client kubernetes.Interface, ns string) <-chan struct{} {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	wake := make(chan struct{}, 1)
	var wg sync.WaitGroup
	t.Cleanup(func() { cancel(); wg.Wait() })
	jobs, err := client.BatchV1().Jobs(ns).Watch(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatalf("kubetest: watching the Jobs of %s: %v", ns, err)
	}
	pods, err := client.CoreV1().Pods(ns).Watch(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatalf("kubetest: watching the pods of %s: %v", ns, err)
	}
	secrets, err := client.CoreV1().Secrets(ns).Watch(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatalf("kubetest: watching the Secrets of %s: %v", ns, err)
	}
	for _, w := range []watch.Interface{jobs, pods, secrets} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer w.Stop()
			for {
				select {
				case <-ctx.Done():
					return
				case _, ok := <-w.ResultChan():
					if !ok {
						return
					}
					select {
					case wake <- struct{}{}:
					default:
					}
				}
			}
		}()
	}
	return wake
}
