package kubecluster

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"gantry/runner/oci"
	"gantry/runner/tofu"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"syscall"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Stop stops the cluster in dir by its PID files and cleans up after it (see layout.stop).
// A directory without a running cluster is cleaned up all the same, so Stop is idempotent.
func Stop(ctx context.Context, dir string) error {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return err
	}
	l := layout{dir: abs}
	if _, err := os.Stat(abs); errors.Is(err, os.ErrNotExist) {
		return nil
	}
	unlock, err := tofu.FileLock(l.path("cluster.lock"))
	if err != nil {
		return fmt.Errorf("locking %s: %w", abs, err)
	}
	defer unlock()
	return l.stop(ctx)
}

// stop follows the recipe: the controllers first (nothing recreates pods), then the pods
// deleted while the kubelet still runs (it stops their containers and tears their networks
// down), the kubelet, whatever containers are left (killed through containerd, then their
// shims), containerd, the apiserver and etcd. Then what the pods left on the machine: mounts
// under the directory, the kubepods cgroups, the bridge. The cluster's objects go with etcd's
// data (the next Start begins empty); the PKI and containerd's images stay for the next Start.
func (l layout) stop(ctx context.Context) error {
	ran := len(l.running()) > 0
	var errs []error
	for _, c := range []string{"kube-controller-manager", "kube-scheduler"} {
		errs = append(errs, l.stopComponent(c, componentStopGrace))
	}
	if l.pid("kube-apiserver") != 0 && l.pid("kubelet") != 0 {
		if err := l.deletePods(ctx); err != nil {
			errs = append(errs, fmt.Errorf("deleting pods: %w", err))
		}
	}
	errs = append(errs, l.stopComponent("kubelet", componentStopGrace))
	if l.pid("containerd") != 0 {
		l.killTasks(ctx)
	}
	for _, p := range l.strays() {
		_ = syscall.Kill(p.pid, syscall.SIGKILL)
		waitGone(p, 5*time.Second)
	}
	for _, c := range []string{"containerd", "kube-apiserver", "etcd"} {
		errs = append(errs, l.stopComponent(c, componentStopGrace))
	}
	if left := l.strays(); len(left) > 0 {
		errs = append(errs, fmt.Errorf("containerd shims still running: %v", left))
	}
	if err := l.unmountAll(); err != nil {
		errs = append(errs, err)
	} else {
		// Only with nothing mounted below: RemoveAll must never reach through a mount.
		for _, d := range []string{l.path("etcd"), l.path("kubelet"), l.path("pod-logs"), l.path("cni", "networks"), l.path("containerd", "runc")} {
			if err := os.RemoveAll(d); err != nil {
				errs = append(errs, err)
			}
		}
	}
	errs = append(errs, removeCgroups("kubepods"), deleteBridge(), removeCNIResults())
	if ran {
		// A process that has exited may hold its ports a moment longer (the kernel closes
		// its sockets as it reaps it): Stop returns only once they bind again, so a Start
		// right after it never finds them taken.
		errs = append(errs, l.waitPortsFree(ctx))
	}
	return errors.Join(errs...)
}

// portsFreeWait bounds how long Stop waits for the cluster's ports to bind again after its
// processes have gone: seconds at most on any machine; longer means another process holds one.
const portsFreeWait = time.Minute

// waitPortsFree waits until every port of the cluster binds again.
func (l layout) waitPortsFree(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, portsFreeWait)
	defer cancel()
	nodeIP := l.nodeIP()
	for {
		err := portsFree(nodeIP)
		if err == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("after stopping the cluster: %w", err)
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// deletePods deletes every pod with a one-second grace period and waits (up to half a minute)
// for the kubelet to have stopped them.
func (l layout) deletePods(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	clientset, err := (&Cluster{l: l}).Client()
	if err != nil {
		return err
	}
	grace := int64(1)
	namespaces, err := clientset.CoreV1().Namespaces().List(ctx, metav1.ListOptions{})
	if err != nil {
		return err
	}
	for _, ns := range namespaces.Items {
		err := clientset.CoreV1().Pods(ns.Name).DeleteCollection(ctx, metav1.DeleteOptions{GracePeriodSeconds: &grace}, metav1.ListOptions{})
		if err != nil {
			return err
		}
	}
	for {
		pods, err := clientset.CoreV1().Pods("").List(ctx, metav1.ListOptions{})
		if err != nil {
			return err
		}
		if len(pods.Items) == 0 {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%d pods still there: %w", len(pods.Items), ctx.Err())
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// killTasks kills every container task containerd still runs (best effort: the shims are
// killed afterwards anyway).
func (l layout) killTasks(ctx context.Context) {
	ctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	var out bytes.Buffer
	if err := l.ctr(ctx, &out, "tasks", "list", "--quiet"); err != nil {
		return
	}
	for _, id := range strings.Fields(out.String()) {
		_ = l.ctr(ctx, nil, "tasks", "kill", "--signal", "SIGKILL", id)
	}
}

// unmountAll unmounts everything mounted under the state directory, deepest first (overlay
// root filesystems, shm, secret volumes, pod network namespaces).
func (l layout) unmountAll() error {
	for range 3 {
		mounts, err := mountsUnder(l.dir)
		if err != nil {
			return err
		}
		if len(mounts) == 0 {
			return nil
		}
		for _, m := range mounts {
			_ = syscall.Unmount(m, syscall.MNT_DETACH)
		}
	}
	if mounts, err := mountsUnder(l.dir); err != nil || len(mounts) > 0 {
		return fmt.Errorf("still mounted under %s: %v (%v)", l.dir, mounts, err)
	}
	return nil
}

// mountsUnder lists the mount points below dir, deepest first.
func mountsUnder(dir string) ([]string, error) {
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var out []string
	lines := bufio.NewScanner(f)
	lines.Buffer(make([]byte, 64<<10), 1<<20)
	for lines.Scan() {
		fields := strings.Fields(lines.Text())
		if len(fields) < 5 {
			continue
		}
		point := oci.UnescapeMount(fields[4])
		if strings.HasPrefix(point, dir+"/") {
			out = append(out, point)
		}
	}
	sort.Slice(out, func(i, j int) bool { return strings.Count(out[i], "/") > strings.Count(out[j], "/") })
	return out, lines.Err()
}

// removeCgroups removes the kubelet's cgroup tree (cgroupfs driver: /<name> in every v1
// hierarchy) deepest first. A cgroup that still holds a process stays, and is reported.
func removeCgroups(name string) error {
	roots, err := filepath.Glob("/sys/fs/cgroup/*/" + name)
	if err != nil {
		return err
	}
	if unified := "/sys/fs/cgroup/" + name; isDir(unified) {
		roots = append(roots, unified)
	}
	var errs []error
	for _, root := range roots {
		var dirs []string
		_ = filepath.WalkDir(root, func(path string, d os.DirEntry, err error) error {
			if err == nil && d.IsDir() {
				dirs = append(dirs, path)
			}
			return nil
		})
		for i := len(dirs) - 1; i >= 0; i-- { // children after their parents in a walk
			if err := syscall.Rmdir(dirs[i]); err != nil && !errors.Is(err, syscall.ENOENT) {
				errs = append(errs, fmt.Errorf("removing cgroup %s: %w", dirs[i], err))
			}
		}
	}
	return errors.Join(errs...)
}

func isDir(name string) bool {
	info, err := os.Stat(name)
	return err == nil && info.IsDir()
}

// ensureBridge creates the pod bridge with the gateway address (the CNI bridge plugin takes an
// existing bridge as it is and adds the address only when missing).
func ensureBridge() error {
	if _, err := os.Stat("/sys/class/net/" + BridgeName); err != nil {
		if err := ipCommand("link", "add", BridgeName, "type", "bridge"); err != nil {
			return err
		}
	}
	if out, err := exec.Command("ip", "-4", "-o", "addr", "show", "dev", BridgeName).Output(); err != nil || !strings.Contains(string(out), " "+Gateway+"/") {
		if err := ipCommand("addr", "add", Gateway+"/24", "dev", BridgeName); err != nil {
			return err
		}
	}
	return ipCommand("link", "set", BridgeName, "up")
}

// deleteBridge deletes the pod bridge (its veths went with the pods' namespaces).
func deleteBridge() error {
	if _, err := os.Stat("/sys/class/net/" + BridgeName); err != nil {
		return nil
	}
	return ipCommand("link", "delete", BridgeName)
}

func ipCommand(args ...string) error {
	if out, err := exec.Command("ip", args...).CombinedOutput(); err != nil {
		return fmt.Errorf("ip %s: %w: %s", strings.Join(args, " "), err, bytes.TrimSpace(out))
	}
	return nil
}

// removeCNIResults removes the cached results libcni keeps for the cluster's network in
// /var/lib/cni/results (containerd 1.6 does not let the cache move).
func removeCNIResults() error {
	names, err := filepath.Glob("/var/lib/cni/results/" + cniNetwork + "-*")
	if err != nil {
		return err
	}
	var errs []error
	for _, n := range names {
		errs = append(errs, os.Remove(n))
	}
	return errors.Join(errs...)
}
