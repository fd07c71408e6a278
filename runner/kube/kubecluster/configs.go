package kubecluster

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// The configuration files each component reads, written under the state directory at every
// Start (they are derived from the directory, the node address and the binary, so writing them
// again is always right).

// kubeconfig writes a kubeconfig for the user whose certificate is pki/<user>.crt, talking to
// the apiserver on loopback, with the certificates embedded so the file stands alone.
func (l layout) kubeconfig(user string) error {
	var data [3]string
	for i, name := range []string{"ca.crt", user + ".crt", user + ".key"} {
		b, err := os.ReadFile(filepath.Join(l.dir, "pki", name))
		if err != nil {
			return err
		}
		data[i] = base64.StdEncoding.EncodeToString(b)
	}
	text := fmt.Sprintf(`apiVersion: v1
kind: Config
clusters:
- name: gantry-test
  cluster:
    server: %s
    certificate-authority-data: %s
users:
- name: %s
  user:
    client-certificate-data: %s
    client-key-data: %s
contexts:
- name: gantry-test
  context: {cluster: gantry-test, user: %s}
current-context: gantry-test
`, APIServerURL, data[0], user, data[1], data[2], user)
	return os.WriteFile(l.kubeconfigPath(user), []byte(text), 0o600)
}

// containerdConfig is containerd's own configuration: everything private to the state
// directory (root, state, socket, runc's state, pod network namespaces), the CRI plugin on the
// pause image Start imports, and the recipe's fixes for this kind of machine.
func (l layout) containerdConfig() string {
	return fmt.Sprintf(`version = 2
root = %[1]q
state = %[2]q
# Snapshotters this machine cannot use only log errors at every start.
disabled_plugins = ["io.containerd.snapshotter.v1.btrfs", "io.containerd.snapshotter.v1.zfs", "io.containerd.snapshotter.v1.devmapper", "io.containerd.snapshotter.v1.aufs"]

[grpc]
  address = %[3]q

[plugins."io.containerd.internal.v1.opt"]
  path = %[4]q

[plugins."io.containerd.grpc.v1.cri"]
  # The kubelet's --pod-infra-container-image does not choose the sandbox image; this does.
  sandbox_image = %[5]q
  # Without CAP_SYS_RESOURCE runc cannot lower oom_score_adj to -998 and fails with "can't get
  # final child's PID from pipe: EOF".
  restrict_oom_score_adj = true
  # Pod network namespaces under the state directory, not /run/netns, so Stop finds its own.
  netns_mounts_under_state_dir = true
  stream_server_address = "127.0.0.1"
  stream_server_port = "0"
  [plugins."io.containerd.grpc.v1.cri".containerd]
    snapshotter = "overlayfs"
    default_runtime_name = "runc"
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
      [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
        BinaryName = "runc"
        Root = %[6]q
        SystemdCgroup = false
  [plugins."io.containerd.grpc.v1.cri".cni]
    bin_dir = %[7]q
    conf_dir = %[8]q
    max_conf_num = 1
`, l.path("containerd", "root"), l.path("containerd", "state"), l.containerdSocket(), l.path("containerd", "opt"),
		PauseImage, l.path("containerd", "runc"), CNIBinDir, l.path("cni", "net.d"))
}

// cniConfig is the pod network: a bridge of its own with the host as gateway (pods reach host
// services at Gateway) and host-local addresses kept under the state directory. No masquerading
// and no port maps: pods need nothing beyond the host.
func (l layout) cniConfig() ([]byte, error) {
	return json.MarshalIndent(map[string]any{
		"cniVersion": "0.4.0",
		"name":       cniNetwork,
		"plugins": []any{map[string]any{
			"type":        "bridge",
			"bridge":      BridgeName,
			"isGateway":   true,
			"ipMasq":      false,
			"hairpinMode": true,
			"ipam": map[string]any{
				"type":    "host-local",
				"ranges":  [][]map[string]string{{{"subnet": PodCIDR, "gateway": Gateway}}},
				"routes":  []map[string]string{{"dst": "0.0.0.0/0"}},
				"dataDir": l.path("cni", "networks"),
			},
		}},
	}, "", "  ")
}

// kubeletConfig is the KubeletConfiguration: webhook authentication and authorization against
// the apiserver, the private containerd, cgroupfs on this machine's cgroup v1 (refused from
// 1.35 unless failCgroupV1 is false), and eviction and image GC thresholds a small test disk
// never reaches.
func (l layout) kubeletConfig(nodeIP string) string {
	return fmt.Sprintf(`apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
authentication:
  anonymous: {enabled: false}
  webhook: {enabled: true}
  x509: {clientCAFile: %[1]q}
authorization: {mode: Webhook}
tlsCertFile: %[2]q
tlsPrivateKeyFile: %[3]q
address: %[4]q
port: %[5]d
readOnlyPort: 0
healthzBindAddress: 127.0.0.1
healthzPort: %[6]d
containerRuntimeEndpoint: %[7]q
cgroupDriver: cgroupfs
failCgroupV1: false
failSwapOn: false
podLogsDir: %[8]q
clusterDomain: cluster.local
imageGCHighThresholdPercent: 100
imageGCLowThresholdPercent: 99
evictionHard:
  memory.available: "1Mi"
  nodefs.available: "1Mi"
  nodefs.inodesFree: "1"
  imagefs.available: "1Mi"
`, l.pki("ca.crt"), l.pki("kubelet.crt"), l.pki("kubelet.key"), nodeIP, kubeletPort, kubeletHealthzPort,
		"unix://"+l.containerdSocket(), l.path("pod-logs"))
}

// writeConfigs writes every configuration file of the cluster.
func (l layout) writeConfigs(nodeIP string) error {
	for _, dir := range []string{l.path("cni", "net.d"), l.path("containerd"), l.path("kubelet"), l.path("pod-logs"), l.path("logs"), l.path("run")} {
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return err
		}
	}
	for _, user := range []string{"admin", "controller-manager", "scheduler", "kubelet"} {
		if err := l.kubeconfig(user); err != nil {
			return fmt.Errorf("writing the %s kubeconfig: %w", user, err)
		}
	}
	cni, err := l.cniConfig()
	if err != nil {
		return err
	}
	files := map[string]string{
		l.path("containerd", "config.toml"):          l.containerdConfig(),
		l.path("cni", "net.d", "10-gantry.conflist"): string(cni),
		l.path("kubelet", "config.yaml"):             l.kubeletConfig(nodeIP),
	}
	for name, text := range files {
		if err := os.WriteFile(name, []byte(text), 0o644); err != nil {
			return err
		}
	}
	return nil
}

// layout names the files under a cluster's state directory. tied components die with the
// process that spawned them (a private control plane's, which nobody else uses).
type layout struct {
	dir  string
	tied bool
}

func (l layout) path(elem ...string) string {
	return filepath.Join(append([]string{l.dir}, elem...)...)
}
func (l layout) pki(name string) string   { return l.path("pki", name) }
func (l layout) containerdSocket() string { return l.path("containerd", "containerd.sock") }
func (l layout) kubeconfigPath(user string) string {
	return l.path(strings.ReplaceAll(user, "/", "-") + ".kubeconfig")
}
func (l layout) pidFile(component string) string { return l.path("run", component+".pid") }
func (l layout) logFile(component string) string { return l.path("logs", component+".log") }
