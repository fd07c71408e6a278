// Package kubecluster starts and stops a real single-node Kubernetes cluster on this machine
// for tests and development (shared/notes/kubernetes-single-node.md is the recipe): etcd
// (Debian etcd-server), a private containerd with runc and the CNI bridge plugin (Debian
// containerd, runc, containernetworking-plugins), and kube-apiserver, kube-controller-manager,
// kube-scheduler and the kubelet from the pinned tools/k8s binary. Everything lives under one
// state directory (`.data/k8s` for the tasks): PKI, configuration, logs, PID files, etcd's data
// and containerd's root. Start is idempotent (a healthy cluster in the directory is reused) and
// Stop works from the PID files alone, so a cluster started by one process is stopped by
// another. Images are never pulled: they are built locally (runner/ociimage) and imported.
//
// The cluster takes machine-wide resources (ports 2379, 6443, 10250, the kubepods cgroups, the
// pod bridge), so one runs per machine at a time; Start says so when another holds them.
package kubecluster

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"time"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"gantry/runner/tofu"
)

// The cluster's fixed addresses. Service IPs do not route (there is no kube-proxy): pods reach
// services on the host through the bridge's Gateway.
const (
	APIServerURL = "https://127.0.0.1:6443"
	PodCIDR      = "10.244.0.0/24"
	Gateway      = "10.244.0.1"
	ServiceCIDR  = "10.0.0.0/24"
	serviceIP    = "10.0.0.1" // the kubernetes Service, in the apiserver's certificate
	BridgeName   = "gantry-k8s0"
	NodeName     = "gantry-node"
	CNIBinDir    = "/usr/lib/cni"
	cniNetwork   = "gantry-k8s"
	// PauseImage is the pod sandbox image Start builds and imports (bump the tag when
	// tools/k8scluster/pause changes: an image already imported under this name is kept).
	PauseImage = "gantry.local/kubecluster/pause:1"

	etcdPort                = 2379
	etcdPeerPort            = 2380
	apiServerPort           = 6443
	kubeletPort             = 10250
	kubeletHealthzPort      = 10248
	controllerManagerPort   = 10257
	schedulerPort           = 10259
	startTimeout            = 3 * time.Minute
	componentStopGrace      = 10 * time.Second
	maxUnixSocketPathLength = 100 // sun_path is 108 bytes; containerd adds ".ttrpc"
)

// Options says where and how to start a cluster.
type Options struct {
	// Dir is the state directory (created when missing).
	Dir string
	// RepoRoot is Gantry's source tree: the pinned binary is built from its tools/k8s and
	// the pause image from tools/k8scluster/pause. Default: found from the working directory.
	RepoRoot string
	// Binary is a prebuilt tools/k8s binary; default EnsureBinary's.
	Binary string
	// NodeIP is the node's address (the apiserver dials the kubelet there); default the first
	// global IPv4 address of an interface that is up.
	NodeIP string
	// Log receives progress; nil discards it.
	Log io.Writer
	// Owner says who starts the cluster, should Start have to: OwnerTests (the tests; the
	// last test run to end stops it) or OwnerDeveloper (task k8s:up; it runs until k8s:down).
	// Reusing a cluster the tests started for a developer hands it over. Default OwnerTests.
	Owner Owner
}

// Cluster is a running cluster.
type Cluster struct {
	l      layout
	nodeIP string
	// Reused tells that Start found the cluster already running.
	Reused bool
	// Timings of the start, from the first component's launch; zero when reused.
	Timings Timings
}

// Timings measures a start.
type Timings struct {
	EtcdHealthy, ContainerdReady, APIServerReady, NodeReady, PodsAdmissible time.Duration
}

// Dir returns the state directory.
func (c *Cluster) Dir() string { return c.l.dir }

// Kubeconfig returns the path of the admin kubeconfig (system:masters; certificates embedded).
func (c *Cluster) Kubeconfig() string { return c.l.kubeconfigPath("admin") }

// RESTConfig returns the admin client configuration.
func (c *Cluster) RESTConfig() (*rest.Config, error) {
	return clientcmd.BuildConfigFromFlags("", c.Kubeconfig())
}

// Client returns an admin clientset.
func (c *Cluster) Client() (*kubernetes.Clientset, error) {
	cfg, err := c.RESTConfig()
	if err != nil {
		return nil, err
	}
	return kubernetes.NewForConfig(cfg)
}

// Gateway returns the pod bridge's address on the host: where pods reach host services. Start
// puts it on the bridge, so a host service can listen on it before the first pod runs.
func (c *Cluster) Gateway() string { return Gateway }

// NodeIP returns the node's address.
func (c *Cluster) NodeIP() string { return c.nodeIP }

// ContainerdSocket returns the private containerd's socket (for ctr --address).
func (c *Cluster) ContainerdSocket() string { return c.l.containerdSocket() }

// Start starts the cluster in o.Dir, or returns the one already running there when it is
// healthy (a partial or broken one is stopped and started afresh). Callers in several
// processes at once serialise on a lock file in the directory: one starts, the others reuse.
func Start(ctx context.Context, o Options) (*Cluster, error) {
	if o.Log == nil {
		o.Log = io.Discard
	}
	dir, err := filepath.Abs(o.Dir)
	if err != nil {
		return nil, err
	}
	l := layout{dir: dir}
	if n := len(l.containerdSocket()); n > maxUnixSocketPathLength {
		return nil, fmt.Errorf("state directory %s is too deep: containerd's socket path would be %d bytes (at most %d)", dir, n, maxUnixSocketPathLength)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("creating %s: %w", dir, err)
	}
	unlock, err := tofu.FileLock(l.path("cluster.lock"))
	if err != nil {
		return nil, fmt.Errorf("locking %s: %w", dir, err)
	}
	defer unlock()

	if o.RepoRoot == "" {
		if o.RepoRoot, err = tofu.RepoRoot("."); err != nil {
			return nil, err
		}
	}
	if c, err := l.reuse(ctx, o); err == nil {
		return c, nil
	} else if len(l.running()) == len(startOrder()) {
		// Every component runs but the cluster does not answer as healthy even given time:
		// other tests, in other checkouts too, may be using it, so it is not pulled from
		// under them; the error says what is wrong.
		return nil, fmt.Errorf("the cluster in %s runs but is not healthy (`go tool task k8s:down` stops it once no test uses it): %w\n%s", dir, err, Diagnose(dir))
	}
	if err := CheckTools(); err != nil {
		return nil, err
	}
	binary := o.Binary
	if binary == "" {
		if binary, err = EnsureBinary(ctx, o.RepoRoot, o.Log); err != nil {
			return nil, err
		}
	}
	// Whatever is left of an earlier cluster in this directory (a crash, a half start) goes first.
	if err := l.stop(ctx); err != nil {
		return nil, fmt.Errorf("cleaning up the earlier cluster in %s: %w", dir, err)
	}
	nodeIP := o.NodeIP
	if nodeIP == "" {
		if nodeIP, err = detectNodeIP(); err != nil {
			return nil, err
		}
	}
	if err := portsFree(nodeIP); err != nil {
		return nil, err
	}
	c := &Cluster{l: l, nodeIP: nodeIP}
	if err := c.start(ctx, o, binary); err != nil {
		// Never leave a half-started cluster running.
		if stopErr := l.stop(context.WithoutCancel(ctx)); stopErr != nil {
			err = errors.Join(err, fmt.Errorf("stopping the half-started cluster: %w", stopErr))
		}
		return nil, err
	}
	return c, nil
}

// start runs the recipe's steps in order, each waiting for the one before.
func (c *Cluster) start(ctx context.Context, o Options, binary string) error {
	ctx, cancel := context.WithTimeout(ctx, startTimeout)
	defer cancel()
	l, ip := c.l, c.nodeIP
	if err := ensurePKI(l.dir, NodeName, net.ParseIP(ip)); err != nil {
		return err
	}
	if err := l.writeConfigs(ip); err != nil {
		return fmt.Errorf("writing the configuration: %w", err)
	}
	if err := l.record(ip, binary, o.Owner); err != nil {
		return fmt.Errorf("recording the start: %w", err)
	}
	l.rotateLogs()
	// The bridge with the gateway address before any pod: host services can listen on it now.
	if err := ensureBridge(); err != nil {
		return err
	}
	began := time.Now()
	since := func() time.Duration { return time.Since(began).Round(time.Millisecond) }

	if err := l.startEtcd(ctx); err != nil {
		return err
	}
	c.Timings.EtcdHealthy = since()

	containerd, err := l.spawn("containerd", "containerd", "--config", l.path("containerd", "config.toml"))
	if err != nil {
		return err
	}
	if err := l.waitFor(ctx, "containerd", containerd, func(ctx context.Context) error { return l.ctr(ctx, nil, "version") }); err != nil {
		return err
	}
	if err := c.ensurePauseImage(ctx, o.RepoRoot, o.Log); err != nil {
		return err
	}
	c.Timings.ContainerdReady = since()

	apiserver, err := l.spawn("kube-apiserver", binary, "kube-apiserver",
		"--etcd-servers", "http://127.0.0.1:"+strconv.Itoa(etcdPort),
		"--secure-port", strconv.Itoa(apiServerPort), "--advertise-address", ip,
		"--tls-cert-file", l.pki("apiserver.crt"), "--tls-private-key-file", l.pki("apiserver.key"),
		"--client-ca-file", l.pki("ca.crt"),
		"--kubelet-client-certificate", l.pki("apiserver-kubelet-client.crt"), "--kubelet-client-key", l.pki("apiserver-kubelet-client.key"),
		"--kubelet-certificate-authority", l.pki("ca.crt"),
		// The node name does not resolve: the apiserver dials the kubelet by its address.
		"--kubelet-preferred-address-types", "InternalIP,Hostname",
		"--service-account-issuer", "https://kubernetes.default.svc.cluster.local",
		"--service-account-key-file", l.pki("sa.pub"), "--service-account-signing-key-file", l.pki("sa.key"),
		"--service-cluster-ip-range", ServiceCIDR,
		"--authorization-mode", "Node,RBAC",
		"--enable-priority-and-fairness=false", "--profiling=false")
	if err != nil {
		return err
	}
	clientset, err := c.Client()
	if err != nil {
		return err
	}
	if err := l.waitFor(ctx, "kube-apiserver", apiserver, func(ctx context.Context) error { return apiServerReady(ctx, clientset) }); err != nil {
		return err
	}
	c.Timings.APIServerReady = since()

	serving := []string{"--tls-cert-file", l.pki("loopback-serving.crt"), "--tls-private-key-file", l.pki("loopback-serving.key"), "--bind-address", "127.0.0.1"}
	cm := l.kubeconfigPath("controller-manager")
	controllerManager, err := l.spawn("kube-controller-manager", binary, append([]string{"kube-controller-manager",
		"--kubeconfig", cm, "--authentication-kubeconfig", cm, "--authorization-kubeconfig", cm,
		"--use-service-account-credentials", "--root-ca-file", l.pki("ca.crt"),
		"--service-account-private-key-file", l.pki("sa.key"), "--leader-elect=false",
		"--secure-port", strconv.Itoa(controllerManagerPort)}, serving...)...)
	if err != nil {
		return err
	}
	sched := l.kubeconfigPath("scheduler")
	scheduler, err := l.spawn("kube-scheduler", binary, append([]string{"kube-scheduler",
		"--kubeconfig", sched, "--authentication-kubeconfig", sched, "--authorization-kubeconfig", sched,
		"--leader-elect=false", "--secure-port", strconv.Itoa(schedulerPort)}, serving...)...)
	if err != nil {
		return err
	}
	kubelet, err := l.spawn("kubelet", binary, "kubelet",
		"--config", l.path("kubelet", "config.yaml"), "--kubeconfig", l.kubeconfigPath("kubelet"),
		"--root-dir", l.path("kubelet"), "--hostname-override", NodeName, "--node-ip", ip)
	if err != nil {
		return err
	}
	if err := l.waitFor(ctx, "kubelet", kubelet, func(ctx context.Context) error { return nodeReady(ctx, clientset) }); err != nil {
		return err
	}
	c.Timings.NodeReady = since()
	if err := l.waitFor(ctx, "kube-controller-manager", controllerManager, func(ctx context.Context) error { return podsAdmissible(ctx, clientset) }); err != nil {
		return err
	}
	if err := l.waitFor(ctx, "kube-scheduler", scheduler, func(ctx context.Context) error { return l.healthz(ctx, schedulerPort) }); err != nil {
		return err
	}
	c.Timings.PodsAdmissible = since()
	fmt.Fprintf(o.Log, "kubernetes cluster up in %s: etcd %s, containerd %s, apiserver %s, node Ready %s, pods admissible %s\n",
		l.dir, c.Timings.EtcdHealthy, c.Timings.ContainerdReady, c.Timings.APIServerReady, c.Timings.NodeReady, c.Timings.PodsAdmissible)
	return nil
}

// startEtcd starts etcd and waits until it is healthy. Should it exit because a port was taken
// (a process of the cluster stopped just before may not have been reaped yet; anything else
// binding 2379 or 2380 in the moment between the port check and etcd's bind), it waits for the
// ports and tries once more; any other exit is reported with etcd's real exit status.
func (l layout) startEtcd(ctx context.Context) error {
	peer := "http://127.0.0.1:" + strconv.Itoa(etcdPeerPort)
	client := "http://127.0.0.1:" + strconv.Itoa(etcdPort)
	for attempt := 1; ; attempt++ {
		etcd, err := l.spawn("etcd", "etcd", "--name", "gantry", "--data-dir", l.path("etcd"),
			"--listen-client-urls", client, "--advertise-client-urls", client,
			"--listen-peer-urls", peer, "--initial-advertise-peer-urls", peer, "--initial-cluster", "gantry="+peer,
			// A test cluster: its data is thrown away at every Stop, so durability buys nothing.
			"--unsafe-no-fsync", "--logger", "zap", "--log-outputs", "stderr")
		if err != nil {
			return err
		}
		err = l.waitFor(ctx, "etcd", etcd, func(ctx context.Context) error { return etcdHealthy(ctx) })
		var exited *exitedError
		if attempt == 1 && errors.As(err, &exited) && exited.addressInUse() {
			if err := l.waitPortsFree(ctx); err != nil {
				return errors.Join(exited, err)
			}
			continue
		}
		return err
	}
}
