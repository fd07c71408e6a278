//go:build !fast

// Live: needs etcd (Debian etcd-server) and the pinned Kubernetes binary (built on first use).

package kubecluster_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"gantry/bench"
	"gantry/runner/kube/kubecluster"
)

// TestControlPlaneIsPrivateAuditsAndDeletesNamespaces: a private control plane starts without
// root on loopback ports of its own; its admin client works; a user who is not the control
// plane (the scheduler's certificate, which RBAC lets create nothing) is refused a write and
// the audit log names it with the 403; a deleted namespace with something in it is emptied and
// removed by the controller-manager's namespace controller; Stop ends every component and
// removes the directory it made.
func TestControlPlaneIsPrivateAuditsAndDeletesNamespaces(t *testing.T) {
	t.Parallel()
	ctx, cancel := bench.Context(context.Background(), 10*time.Minute)
	defer cancel()
	cp, err := kubecluster.StartControlPlane(ctx, kubecluster.ControlPlaneOptions{Log: t.Output()})
	require.NoError(t, err)
	stopped := false
	t.Cleanup(func() {
		if !stopped {
			require.NoError(t, cp.Stop())
		}
	})
	rss, err := cp.RSS()
	require.NoError(t, err)
	t.Logf("control plane at %s ready: etcd %s, apiserver %s, controllers %s; RSS etcd %d MiB, apiserver %d MiB, controller-manager %d MiB",
		cp.URL, cp.Timings.EtcdHealthy, cp.Timings.APIServerReady, cp.Timings.ControllersReady,
		rss["etcd"]>>20, rss["kube-apiserver"]>>20, rss["kube-controller-manager"]>>20)
	require.Len(t, rss, 3)
	require.NotEqual(t, "https://127.0.0.1:6443", cp.URL, "not the shared cluster's port")

	admin, err := cp.Client()
	require.NoError(t, err)
	ns, err := admin.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "team-a"}}, metav1.CreateOptions{})
	require.NoError(t, err)
	_, err = admin.CoreV1().ConfigMaps(ns.Name).Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "inside"}}, metav1.CreateOptions{})
	require.NoError(t, err)

	// Someone the API server knows but RBAC lets write nothing here.
	scheduler := &rest.Config{Host: cp.URL, TLSClientConfig: rest.TLSClientConfig{CAData: cp.CAPEM,
		CertFile: filepath.Join(cp.Dir(), "pki", "scheduler.crt"), KeyFile: filepath.Join(cp.Dir(), "pki", "scheduler.key")}}
	other, err := kubernetes.NewForConfig(scheduler)
	require.NoError(t, err)
	_, err = other.CoreV1().ConfigMaps(ns.Name).Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "intruder"}}, metav1.CreateOptions{})
	require.True(t, apierrors.IsForbidden(err), "got %v", err)
	events, err := cp.AuditEvents()
	require.NoError(t, err)
	require.True(t, slices.ContainsFunc(events, func(e kubecluster.AuditEvent) bool {
		return e.User.Username == "system:kube-scheduler" && e.Verb == "create" && e.Code() == 403 &&
			e.ObjectRef != nil && e.ObjectRef.Resource == "configmaps" && e.ObjectRef.Namespace == ns.Name
	}), "the audit log names the refused writer: %+v", events)
	require.False(t, slices.ContainsFunc(events, func(e kubecluster.AuditEvent) bool { return e.User.Username == "gantry-admin" }),
		"the admin's own requests are not audited")

	// The namespace controller empties the namespace and removes it.
	deleting := time.Now()
	w, err := admin.CoreV1().Namespaces().Watch(ctx, metav1.ListOptions{FieldSelector: fields.OneTermEqualSelector("metadata.name", ns.Name).String(),
		ResourceVersion: ns.ResourceVersion})
	require.NoError(t, err)
	defer w.Stop()
	require.NoError(t, admin.CoreV1().Namespaces().Delete(ctx, ns.Name, metav1.DeleteOptions{}))
	for e := range w.ResultChan() {
		if e.Type == watch.Deleted {
			break
		}
	}
	_, err = admin.CoreV1().Namespaces().Get(ctx, ns.Name, metav1.GetOptions{})
	require.True(t, apierrors.IsNotFound(err), "the namespace is gone: %v", err)
	t.Logf("namespace removed %s after its delete", time.Since(deleting).Round(time.Millisecond))

	pids := map[string]int{}
	for _, c := range []string{"etcd", "kube-apiserver", "kube-controller-manager"} {
		data, err := os.ReadFile(filepath.Join(cp.Dir(), "run", c+".pid"))
		require.NoError(t, err)
		var pid int
		_, err = fmt.Sscan(string(data), &pid)
		require.NoError(t, err)
		pids[c] = pid
	}
	stopped = true
	began := time.Now()
	require.NoError(t, cp.Stop())
	t.Logf("stopped in %s", time.Since(began).Round(time.Millisecond))
	for c, pid := range pids {
		_, err := os.Stat(filepath.Join("/proc", strconv.Itoa(pid)))
		require.True(t, os.IsNotExist(err), "%s (pid %d) still runs", c, pid)
	}
	_, err = os.Stat(cp.Dir())
	require.True(t, os.IsNotExist(err), "the directory is removed")
}
