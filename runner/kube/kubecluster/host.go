package kubecluster

import (
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
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
