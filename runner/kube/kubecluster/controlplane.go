package kubecluster

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"gantry/runner/tofu"
)

// A private control plane: etcd, kube-apiserver and kube-controller-manager of one test, on
// free loopback ports in a directory of its own. The machine's shared cluster (Start) cannot
// serve a test that needs the API server configured for it — its own JWT issuers, its own audit
// policy — since tests of several checkouts share it and its authentication configuration is
// one. A control plane runs no pods (no kubelet, no containerd, no bridge), so it needs no root
// and changes nothing on the machine; it holds API objects, authenticates, authorizes, admits
// and audits, and the controller-manager's namespace controller empties and removes a deleted
// namespace, which is what a Kubernetes target of Gantry's templates needs.

// ControlPlaneOptions says how to start a private control plane.
type ControlPlaneOptions struct {
	// Dir is its state directory; default a new temporary directory, which Stop removes.
	Dir string
	// RepoRoot and Binary as in Options: the pinned tools/k8s binary.
	RepoRoot string
	Binary   string
	// Log receives progress; nil discards it.
	Log io.Writer
	// AuthenticationConfig is an apiserver.config.k8s.io/v1 AuthenticationConfiguration (YAML):
	// the JWT issuers the API server trusts, with their claim mappings. Empty: client
	// certificates only. runner/targets/kubetarget renders Gantry's.
	AuthenticationConfig []byte
	// AuditPolicy is an audit.k8s.io/v1 Policy; default DefaultAuditPolicy.
	AuditPolicy []byte
}

// DefaultAuditPolicy records every request of a user who is not the control plane itself
// (the admin, the controllers, the API server's loopback client) at the Metadata level: who,
// which verb on which object, and the answer — never a request or response body.
const DefaultAuditPolicy = `apiVersion: audit.k8s.io/v1
kind: Policy
omitStages: [RequestReceived]
rules:
- level: None
  userGroups: ["system:masters", "system:serviceaccounts", "system:nodes"]
- level: None
  users: ["system:kube-controller-manager", "system:apiserver"]
- level: Metadata
`

// ControlPlane is a running private control plane.
type ControlPlane struct {
	l layout
	// URL is the API server's address (https://127.0.0.1:<port>) and CAPEM the CA that signed
	// its certificate: with a bearer token, what a client of the API server needs.
	URL   string
	CAPEM []byte
	// Timings of the start, from etcd's launch.
	Timings ControlPlaneTimings

	procs   map[string]*spawned
	removal bool // Stop removes the directory: StartControlPlane made it
}

// ControlPlaneTimings measures a start.
type ControlPlaneTimings struct {
	EtcdHealthy, APIServerReady, ControllersReady time.Duration
}

// controlPlaneComponents in start order.
var controlPlaneComponents = []string{"etcd", "kube-apiserver", "kube-controller-manager"}

// controlPlaneStopGrace is how long a component is given to exit on SIGTERM before it is
// killed. Nothing of a control plane outlives it (its etcd data goes with its directory), so
// there is nothing to shut down cleanly, and kube-apiserver's graceful termination keeps it
// ten seconds and more.
const controlPlaneStopGrace = time.Second

// startAttempts bounds the starts after a port picked free was taken before its component
// bound it (another process picked it in between).
const startAttempts = 3

// StartControlPlane starts a private control plane and returns once the API server is ready
// and the controllers run. The caller stops it with Stop; its components are also killed
// should the calling process die first.
func StartControlPlane(ctx context.Context, o ControlPlaneOptions) (*ControlPlane, error) {
	if o.Log == nil {
		o.Log = io.Discard
	}
	if len(o.AuditPolicy) == 0 {
		o.AuditPolicy = []byte(DefaultAuditPolicy)
	}
	if _, err := exec.LookPath("etcd"); err != nil {
		return nil, errors.New("a control plane needs etcd: install the Debian package etcd-server (`go tool task deps -- kubernetes`)")
	}
	var err error
	if o.Binary == "" {
		if o.RepoRoot == "" {
			if o.RepoRoot, err = tofu.RepoRoot("."); err != nil {
				return nil, err
			}
		}
		if o.Binary, err = EnsureBinary(ctx, o.RepoRoot, o.Log); err != nil {
			return nil, err
		}
	}
	c := &ControlPlane{procs: map[string]*spawned{}}
	if o.Dir == "" {
		if o.Dir, err = os.MkdirTemp("", "gantry-controlplane-"); err != nil {
			return nil, err
		}
		c.removal = true
	}
	dir, err := filepath.Abs(o.Dir)
	if err != nil {
		return nil, err
	}
	c.l = layout{dir: dir, tied: true}
	if err := c.prepare(o); err != nil {
		return nil, errors.Join(err, c.Stop())
	}
	for attempt := 1; ; attempt++ {
		err = c.start(ctx, o.Binary)
		if err == nil {
			fmt.Fprintf(o.Log, "kubernetes control plane up at %s in %s: etcd %s, apiserver %s, controllers %s\n",
				c.URL, dir, c.Timings.EtcdHealthy, c.Timings.APIServerReady, c.Timings.ControllersReady)
			return c, nil
		}
		var exited *exitedError
		if attempt == startAttempts || !errors.As(err, &exited) || !exited.addressInUse() {
			return nil, errors.Join(err, c.Stop())
		}
		c.stopProcs()
	}
}

// prepare makes the directory, the PKI and the configuration files that do not depend on the
// ports.
func (c *ControlPlane) prepare(o ControlPlaneOptions) error {
	l := c.l
	for _, d := range []string{l.path("logs"), l.path("run"), l.path("audit")} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			return err
		}
	}
	if err := ensurePKI(l.dir, "gantry-controlplane", net.ParseIP("127.0.0.1")); err != nil {
		return err
	}
	var err error
	if c.CAPEM, err = os.ReadFile(l.pki("ca.crt")); err != nil {
		return err
	}
	if err := os.WriteFile(l.path("audit-policy.yaml"), o.AuditPolicy, 0o600); err != nil {
		return err
	}
	if len(o.AuthenticationConfig) > 0 {
		return os.WriteFile(l.path("authentication-config.yaml"), o.AuthenticationConfig, 0o600)
	}
	return nil
}

// controlPlanePorts are the loopback ports one start uses.
type controlPlanePorts struct{ etcd, etcdPeer, apiServer int }

// freePorts asks the kernel for ports free now; a component may still find one taken when it
// binds, which start reports as an address in use and StartControlPlane retries.
func freePorts() (controlPlanePorts, error) {
	var ports [3]int
	var listeners []net.Listener
	defer func() {
		for _, ln := range listeners {
			ln.Close()
		}
	}()
	for i := range ports {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return controlPlanePorts{}, err
		}
		listeners = append(listeners, ln)
		ports[i] = ln.Addr().(*net.TCPAddr).Port
	}
	return controlPlanePorts{etcd: ports[0], etcdPeer: ports[1], apiServer: ports[2]}, nil
}

// start starts the three components on fresh ports, each waiting for the one before.
func (c *ControlPlane) start(ctx context.Context, binary string) error {
	ctx, cancel := context.WithTimeout(ctx, startTimeout)
	defer cancel()
	l := c.l
	ports, err := freePorts()
	if err != nil {
		return err
	}
	c.URL = "https://127.0.0.1:" + strconv.Itoa(ports.apiServer)
	began := time.Now()
	since := func() time.Duration { return time.Since(began).Round(time.Millisecond) }

	// etcd's data from a start that failed on a taken port is thrown away with it.
	if err := os.RemoveAll(l.path("etcd")); err != nil {
		return err
	}
	etcdURL := "http://127.0.0.1:" + strconv.Itoa(ports.etcd)
	peer := "http://127.0.0.1:" + strconv.Itoa(ports.etcdPeer)
	if err := c.spawnAndWait(ctx, "etcd", "etcd", func(ctx context.Context) error { return etcdHealthyAt(ctx, etcdURL) },
		"--name", "controlplane", "--data-dir", l.path("etcd"),
		"--listen-client-urls", etcdURL, "--advertise-client-urls", etcdURL,
		"--listen-peer-urls", peer, "--initial-advertise-peer-urls", peer, "--initial-cluster", "controlplane="+peer,
		// A test's control plane: its data goes with it, so durability buys nothing.
		"--unsafe-no-fsync", "--logger", "zap", "--log-outputs", "stderr"); err != nil {
		return err
	}
	c.Timings.EtcdHealthy = since()

	for _, user := range []string{"admin", "controller-manager"} {
		if err := c.writeKubeconfig(user); err != nil {
			return fmt.Errorf("writing the %s kubeconfig: %w", user, err)
		}
	}
	admin, err := c.Client()
	if err != nil {
		return err
	}
	if err := c.spawnAndWait(ctx, "kube-apiserver", binary, func(ctx context.Context) error { return apiServerReady(ctx, admin) },
		c.apiServerArgs(etcdURL, ports.apiServer)...); err != nil {
		return err
	}
	c.Timings.APIServerReady = since()

	cm := l.kubeconfigPath("controller-manager")
	// Its ServiceAccount in the default namespace shows the controllers run (their informers
	// synced); the namespace controller is the one a target needs.
	if err := c.spawnAndWait(ctx, "kube-controller-manager", binary, func(ctx context.Context) error {
		_, err := admin.CoreV1().ServiceAccounts(metav1.NamespaceDefault).Get(ctx, "default", metav1.GetOptions{})
		return err
	}, "kube-controller-manager", "--kubeconfig", cm,
		// No HTTPS of its own (nobody asks it for health or metrics): one port fewer to pick.
		"--secure-port=0", "--leader-elect=false", "--use-service-account-credentials",
		"--service-account-private-key-file", l.pki("sa.key"), "--root-ca-file", l.pki("ca.crt"),
		"--controllers", "namespace,serviceaccount,clusterrole-aggregation,resourcequota"); err != nil {
		return err
	}
	c.Timings.ControllersReady = since()
	return nil
}

// apiServerArgs: the recipe's (shared/notes, FINDINGS §3) for an API server alone on loopback.
func (c *ControlPlane) apiServerArgs(etcdURL string, port int) []string {
	l := c.l
	args := []string{"kube-apiserver", "--etcd-servers", etcdURL,
		"--bind-address", "127.0.0.1", "--secure-port", strconv.Itoa(port),
		// A loopback advertise address is refused unless nothing publishes it as the
		// kubernetes Service's endpoint.
		"--advertise-address", "127.0.0.1", "--endpoint-reconciler-type", "none",
		"--tls-cert-file", l.pki("apiserver.crt"), "--tls-private-key-file", l.pki("apiserver.key"),
		"--client-ca-file", l.pki("ca.crt"),
		"--service-account-issuer", "https://kubernetes.default.svc.cluster.local",
		"--service-account-key-file", l.pki("sa.pub"), "--service-account-signing-key-file", l.pki("sa.key"),
		"--service-cluster-ip-range", "10.96.0.0/24",
		"--authorization-mode", "RBAC",
		"--audit-log-path", c.AuditLog(), "--audit-policy-file", l.path("audit-policy.yaml"),
		// Written as each request ends, so a test reads what it just did.
		"--audit-log-mode", "blocking",
		"--enable-priority-and-fairness=false", "--profiling=false"}
	if _, err := os.Stat(l.path("authentication-config.yaml")); err == nil {
		args = append(args, "--authentication-config", l.path("authentication-config.yaml"))
	}
	return args
}

// spawnAndWait starts a component and waits until ready says it is.
func (c *ControlPlane) spawnAndWait(ctx context.Context, component, binary string, ready func(context.Context) error, args ...string) error {
	s, err := c.l.spawn(component, binary, args...)
	if err != nil {
		return err
	}
	c.procs[component] = s
	return c.l.waitFor(ctx, component, s, ready)
}

// writeKubeconfig writes the kubeconfig of the user whose certificate is pki/<user>.crt.
func (c *ControlPlane) writeKubeconfig(user string) error {
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters["controlplane"] = &clientcmdapi.Cluster{Server: c.URL, CertificateAuthorityData: c.CAPEM}
	cert, err := os.ReadFile(c.l.pki(user + ".crt"))
	if err != nil {
		return err
	}
	key, err := os.ReadFile(c.l.pki(user + ".key"))
	if err != nil {
		return err
	}
	cfg.AuthInfos[user] = &clientcmdapi.AuthInfo{ClientCertificateData: cert, ClientKeyData: key}
	cfg.Contexts["controlplane"] = &clientcmdapi.Context{Cluster: "controlplane", AuthInfo: user}
	cfg.CurrentContext = "controlplane"
	return clientcmd.WriteToFile(*cfg, c.l.kubeconfigPath(user))
}

// Dir returns the state directory.
func (c *ControlPlane) Dir() string { return c.l.dir }

// Kubeconfig returns the path of the admin kubeconfig (system:masters; certificates embedded).
func (c *ControlPlane) Kubeconfig() string { return c.l.kubeconfigPath("admin") }

// CAFile returns the path of the API server's CA certificate (PEM).
func (c *ControlPlane) CAFile() string { return c.l.pki("ca.crt") }

// AuditLog returns the path of the audit log (JSON lines, one event per request).
func (c *ControlPlane) AuditLog() string { return c.l.path("audit", "audit.log") }

// RESTConfig returns the admin client configuration.
func (c *ControlPlane) RESTConfig() (*rest.Config, error) {
	return clientcmd.BuildConfigFromFlags("", c.Kubeconfig())
}

// Client returns an admin clientset.
func (c *ControlPlane) Client() (*kubernetes.Clientset, error) {
	cfg, err := c.RESTConfig()
	if err != nil {
		return nil, err
	}
	return kubernetes.NewForConfig(cfg)
}

// TokenConfig returns the client configuration of whoever holds token: the API server's URL
// and CA and the bearer token, nothing else (what a provider is handed).
func (c *ControlPlane) TokenConfig(token string) *rest.Config {
	return &rest.Config{Host: c.URL, BearerToken: token, TLSClientConfig: rest.TLSClientConfig{CAData: c.CAPEM}}
}

// Stop stops the components, the controllers first, and removes the directory when
// StartControlPlane made it.
func (c *ControlPlane) Stop() error {
	err := c.stopProcs()
	if c.removal && err == nil {
		err = os.RemoveAll(c.l.dir)
	}
	return err
}

func (c *ControlPlane) stopProcs() error {
	var errs []error
	for i := len(controlPlaneComponents) - 1; i >= 0; i-- {
		name := controlPlaneComponents[i]
		if s := c.procs[name]; s != nil {
			if err := c.l.stopComponent(name, controlPlaneStopGrace); err != nil {
				errs = append(errs, err)
				continue
			}
			<-s.exited // reaped: its ports are free again
			delete(c.procs, name)
		}
	}
	return errors.Join(errs...)
}
