package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strings"

	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"gantry/runner"
	"gantry/runner/kube"
	"gantry/runner/oci"
	"gantry/web"
)

// kubeFlags configure the tofu/kubernetes executor (docs/runners.md, "Kubernetes"):
// offered when --kube-image is set.
type kubeFlags struct {
	kubeconfig    string
	namespace     string
	image         string
	listen        string
	portalURL     string
	stateURL      string
	cloudEndpoint string
	memory        string
	cpus          string
	// portal is the phase endpoint the runner and the runner listener share (made at
	// registration: systemFlags are passed by value).
	portal *kube.Portal
}

func (k *kubeFlags) register(f flags) {
	f.str(&k.kubeconfig, "kubeconfig", "GANTRY_KUBECONFIG", "", "kubeconfig of the cluster tofu/kubernetes runs its Jobs on (default: the in-cluster service account)")
	f.str(&k.namespace, "kube-namespace", "GANTRY_KUBE_NAMESPACE", "gantry-runs", "namespace of the tofu/kubernetes Jobs and their Secrets")
	f.str(&k.image, "kube-image", "GANTRY_KUBE_IMAGE", "", "the runner image (gantry.local/runner:<content tag>, imported into the cluster, never pulled); setting it offers tofu/kubernetes")
	f.str(&k.listen, "kube-listen", "GANTRY_KUBE_LISTEN", "", "address serving the runner pods the phase endpoint and the state backend, and nothing else of Gantry (e.g. 10.244.0.1:8766, or :8766 in a cluster)")
	f.str(&k.portalURL, "kube-portal-url", "GANTRY_KUBE_PORTAL_URL", "", "--kube-listen as this replica's pods reach it (each replica its own: the phase sessions are in its memory)")
	f.str(&k.stateURL, "kube-state-url", "GANTRY_KUBE_STATE_URL", "", "the state backend as pods reach it, embedded in saved plans: the same on every replica (default: --kube-portal-url)")
	f.str(&k.cloudEndpoint, "kube-cloud-endpoint", "GANTRY_KUBE_CLOUD_ENDPOINT", "", "the sandbox cloud as pods reach it (default: --cloud-endpoint)")
	f.str(&k.memory, "kube-memory", "GANTRY_KUBE_MEMORY", "512Mi", "memory limit (and request) of each runner pod")
	f.str(&k.cpus, "kube-cpus", "GANTRY_KUBE_CPUS", "1", "CPU limit of each runner pod (requested at a tenth)")
	k.portal = kube.NewPortal()
}

func (k kubeFlags) enabled() bool { return k.image != "" }

// stateBase is where the pods reach the state backend.
func (k kubeFlags) stateBase() string {
	if k.stateURL != "" {
		return strings.TrimRight(k.stateURL, "/")
	}
	return strings.TrimRight(k.portalURL, "/")
}

// restConfig is --kubeconfig's cluster, or the one the portal runs in.
func (k kubeFlags) restConfig() (*rest.Config, error) {
	if k.kubeconfig != "" {
		return clientcmd.BuildConfigFromFlags("", k.kubeconfig)
	}
	cfg, err := rest.InClusterConfig()
	if err != nil {
		return nil, fmt.Errorf("no --kubeconfig, and not running in a cluster: %w", err)
	}
	return cfg, nil
}

// kubeRunner builds the tofu/kubernetes executor and removes the Jobs this replica's
// last process left behind.
func (s systemFlags) kubeRunner(ctx context.Context, logger *slog.Logger) (runner.Runner, error) {
	k := s.kube
	var missing []string
	for flag, v := range map[string]string{"--kube-listen": k.listen, "--kube-portal-url": k.portalURL} {
		if v == "" {
			missing = append(missing, flag)
		}
	}
	if len(missing) > 0 {
		return nil, fmt.Errorf("tofu/kubernetes: %s not set", strings.Join(missing, " and "))
	}
	cloud := k.cloudEndpoint
	if cloud == "" {
		cloud = s.cloudEndpoint
	}
	if cloud == "" {
		return nil, errors.New("tofu/kubernetes: no --kube-cloud-endpoint or --cloud-endpoint: jobs would have no cloud to reach")
	}
	mem, err := resource.ParseQuantity(k.memory)
	if err != nil {
		return nil, fmt.Errorf("--kube-memory: %w", err)
	}
	cpus, err := resource.ParseQuantity(k.cpus)
	if err != nil {
		return nil, fmt.Errorf("--kube-cpus: %w", err)
	}
	cfg, err := k.restConfig()
	if err != nil {
		return nil, fmt.Errorf("tofu/kubernetes: %w", err)
	}
	client, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("tofu/kubernetes: %w", err)
	}
	limits := oci.Limits{MemoryBytes: mem.Value(), CPUs: float64(cpus.MilliValue()) / 1000}
	launcher, err := kube.NewJobLauncher(kube.JobConfig{Client: client, Namespace: k.namespace, Image: k.image,
		Replica: s.leases.Holder, Limits: limits, Logger: logger})
	if err != nil {
		return nil, err
	}
	// A cluster that does not answer now is shown on /executors (Health); the Jobs its
	// dead process left end by their deadline, and their pods stop when the phase
	// endpoint no longer knows them.
	if n, err := launcher.Sweep(ctx); err != nil {
		logger.Warn("removing the Jobs this replica's last process left failed", "error", err)
	} else if n > 0 {
		logger.Warn("removed the Jobs this replica's last process left behind", "count", n, "namespace", k.namespace)
	}
	workDir, _, err := s.liveDirs()
	if err != nil {
		return nil, err
	}
	return &kube.Runner{Launcher: launcher, Portal: k.portal, PortalURL: k.portalURL, CloudEndpoint: cloud, Limits: limits,
		WorkRoot: s.replicaDirs(workDir).Jobs, Timeouts: s.timeouts}, nil
}

// runnerHandler is what --kube-listen serves: the phase endpoint and the state backend.
func (k kubeFlags) runnerHandler(srv *web.Server) http.Handler {
	mux := http.NewServeMux()
	mux.Handle(kube.PathPrefix, k.portal)
	mux.Handle("/state/", web.StateOnly(srv.Echo))
	return mux
}
