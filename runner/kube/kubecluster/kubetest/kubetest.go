// Package kubetest gives tests the real single-node Kubernetes cluster of this test run.
//
// One cluster, shared by every test package, in the checkout's well-known state directory
// `.data/k8s` (the one `go tool task k8s:up` uses), started by whichever test asks first. Why
// this and not a cluster that cmd/testenv starts up front, the way it starts PostgreSQL:
//   - the cluster holds machine-wide resources (ports 2379/6443/10250, the kubepods cgroups, the
//     pod bridge), so there can only be one at a time anyway; a fixed directory lets the tests
//     reuse a cluster a developer already runs instead of failing on its ports;
//   - most packages never need it: started lazily, it costs nothing to a run (or a `go test` of
//     a few packages) that reaches no Kubernetes test, and the first run's binary build (five
//     minutes) happens only when a test needs it;
//   - `go test` runs packages as separate processes at once: kubecluster.Start takes a file lock
//     in the directory, so one process starts the cluster and the others wait and reuse it.
//
// A test that stops the cluster (kubecluster's own) calls Exclusive: every Cluster caller holds
// a shared lock on .data/k8s/users.lock until its test ends, Exclusive takes it exclusively, so
// no test anywhere loses the cluster while it uses it.
//
// It is stopped at the end of `go tool task test`: cmd/testenv notes whether a cluster ran in
// .data/k8s before the tests and stops it afterwards if the tests started it (once no test,
// of this run or another, holds the users lock below). A plain `go test`
// leaves it running for the next run (`go tool task k8s:down` stops it).
//
// Tests share the cluster: each works in a namespace of its own (Namespace).
package kubetest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"regexp"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"gantry/runner/kube/kubecluster"
	"gantry/runner/tofu"
)

// startTimeout covers a first run's binary build (about five minutes on two cores, longer on a
// busy machine) and the start itself (seconds).
const startTimeout = 30 * time.Minute

// Cluster starts (or reuses) the cluster of this test run. It fails the test, saying what to
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
	// Held until the test ends: an Exclusive test in another package waits for it.
	lockUsers(t, kubecluster.DefaultDir(root), false)
	ctx, cancel := context.WithTimeout(context.Background(), startTimeout)
	defer cancel()
	c, err := kubecluster.Start(ctx, kubecluster.Options{Dir: kubecluster.DefaultDir(root), RepoRoot: root, Log: t.Output()})
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

// Exclusive waits until no test (in any package) uses the cluster and keeps others from
// starting to until the test ends; the test may then stop and start the cluster in the returned
// state directory. It returns that directory and the source tree's root. A test that called
// Cluster must not call Exclusive (it would wait for itself).
func Exclusive(t testing.TB) (dir, repoRoot string) {
	t.Helper()
	root, err := tofu.RepoRoot(".")
	if err != nil {
		t.Fatalf("kubetest: %v", err)
	}
	if err := kubecluster.CheckTools(); err != nil {
		t.Fatalf("kubetest: %v", err)
	}
	lockUsers(t, kubecluster.DefaultDir(root), true)
	return kubecluster.DefaultDir(root), root
}

// lockUsers takes the cluster's users lock (kubecluster.LockUsers) until the test ends.
func lockUsers(t testing.TB, dir string, exclusive bool) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), startTimeout)
	defer cancel()
	unlock, err := kubecluster.LockUsers(ctx, dir, exclusive)
	if err != nil {
		t.Fatalf("kubetest: %v", err)
	}
	t.Cleanup(unlock)
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
