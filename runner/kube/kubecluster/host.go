package kubecluster

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"syscall"
	"time"
)

// What the cluster needs of the machine: the Debian packages, root, free ports, the node's
// address, and a lock between processes.

// CheckTools says which of the Debian packages the cluster needs are missing.
func CheckTools() error {
	var missing []string
	for _, tool := range []struct{ file, pkg string }{
		{"etcd", "etcd-server"}, {"containerd", "containerd"}, {"ctr", "containerd"},
		{"containerd-shim-runc-v2", "containerd"}, {"runc", "runc"},
		{filepath.Join(CNIBinDir, "bridge"), "containernetworking-plugins"}, {filepath.Join(CNIBinDir, "host-local"), "containernetworking-plugins"},
		{"ip", "iproute2"},
	} {
		if _, err := exec.LookPath(tool.file); err != nil {
			missing = append(missing, tool.pkg)
		}
	}
	if len(missing) > 0 {
		return fmt.Errorf("the test cluster needs Debian packages that are not installed: %v; install them with `go tool task deps -- kubernetes` (as root: apt-get install etcd-server containerd containernetworking-plugins runc)", missing)
	}
	if os.Geteuid() != 0 {
		return errors.New("the test cluster runs containerd and the kubelet, which need root")
	}
	return nil
}

// portsFree fails when another process listens on a port the cluster needs: most likely a
// cluster started from another state directory (one runs per machine).
func portsFree(nodeIP string) error {
	for _, addr := range []string{
		net.JoinHostPort("127.0.0.1", strconv.Itoa(etcdPort)), net.JoinHostPort("127.0.0.1", strconv.Itoa(etcdPeerPort)),
		net.JoinHostPort("0.0.0.0", strconv.Itoa(apiServerPort)), net.JoinHostPort(nodeIP, strconv.Itoa(kubeletPort)),
		net.JoinHostPort("127.0.0.1", strconv.Itoa(kubeletHealthzPort)),
		net.JoinHostPort("127.0.0.1", strconv.Itoa(controllerManagerPort)), net.JoinHostPort("127.0.0.1", strconv.Itoa(schedulerPort)),
	} {
		ln, err := net.Listen("tcp", addr)
		if err != nil {
			return fmt.Errorf("port %s is taken (another Kubernetes test cluster, from another state directory? `go tool task k8s:down` in its checkout stops it): %w", addr, err)
		}
		ln.Close()
	}
	return nil
}

// detectNodeIP returns the first global unicast IPv4 address of an interface that is up,
// skipping the pod bridge and container interfaces.
func detectNodeIP() (string, error) {
	ifaces, err := net.Interfaces()
	if err != nil {
		return "", err
	}
	for _, iface := range ifaces {
		if iface.Flags&net.FlagUp == 0 || iface.Flags&net.FlagLoopback != 0 || iface.Name == BridgeName || len(iface.Name) > 3 && iface.Name[:4] == "veth" {
			continue
		}
		addrs, err := iface.Addrs()
		if err != nil {
			continue
		}
		for _, a := range addrs {
			if ipnet, ok := a.(*net.IPNet); ok && ipnet.IP.To4() != nil && ipnet.IP.IsGlobalUnicast() {
				return ipnet.IP.String(), nil
			}
		}
	}
	return "", errors.New("no global IPv4 address on any interface for the node (set Options.NodeIP)")
}

// LockUsers takes the lock on dir/users.lock that orders the cluster's users and whoever stops
// it: shared for a user (a test using the cluster), exclusive for a stop that must not pull the
// cluster from under a test in another process. It waits until it gets the lock or ctx ends;
// unlock releases it (so does the process's exit). A process holding it shared must not ask
// for it exclusively: it would wait for itself.
func LockUsers(ctx context.Context, dir string, exclusive bool) (unlock func(), err error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	f, err := os.OpenFile(filepath.Join(dir, "users.lock"), os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return nil, err
	}
	how := syscall.LOCK_SH
	if exclusive {
		how = syscall.LOCK_EX
	}
	for {
		err := syscall.Flock(int(f.Fd()), how|syscall.LOCK_NB)
		if err == nil {
			return func() { f.Close() }, nil // closing the file drops the lock
		}
		if !errors.Is(err, syscall.EWOULDBLOCK) {
			f.Close()
			return nil, fmt.Errorf("locking %s: %w", f.Name(), err)
		}
		select {
		case <-ctx.Done():
			f.Close()
			if exclusive {
				return nil, fmt.Errorf("the cluster in %s is still in use by a test: %w", dir, ctx.Err())
			}
			return nil, fmt.Errorf("the cluster in %s is being stopped: %w", dir, ctx.Err())
		case <-time.After(200 * time.Millisecond):
		}
	}
}
