//go:build !fast

// Live: needs the machine's Kubernetes test cluster, runc (both as root) and live OpenTofu (bin/tofu, built from tools/tofu).

package kube_test

import (
	"bytes"
	"context"
	"fmt"
	"io/fs"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	catalogfiles "gantry/catalog"
	"gantry/models/bundle"
	"gantry/runner"
	"gantry/runner/kube"
	"gantry/runner/kube/kubecluster/kubetest"
	"gantry/runner/oci"
	"gantry/runner/tofu"
	"gantry/runner/tofu/tofutest"
	"gantry/runner/tofurun"
)

// phaseStarts is how many phases each executor starts in BenchmarkPhaseStart.
const phaseStarts = 20

// BenchmarkPhaseStart measures how long a phase takes to start OpenTofu, on Kubernetes
// and in runc: from the runner's Plan called (for Kubernetes: the phase endpoint session
// opened, then the Job and its Secret created within it) to the first line `tofu init`
// prints ("Initializing ..."). On Kubernetes that moment is the container runtime's own
// timestamp of the line (the pod's log read with timestamps before the Job is deleted;
// one clock: the cluster is this machine), and the moment the portal read it from the
// followed log is reported beside it (kube_seen_*: what the run page waits); in runc it is
// when the portal read it from the container's output. 20 plans each, one after the
// other, of a configuration with the sandbox provider and nothing to create, no state
// backend and no cloud call, so the start is what is measured. It reports the p50, p90
// and p99 in milliseconds (goals for Kubernetes: p50 ≤ 2 s, p90 ≤ 4 s). Run it with
// -benchtime=1x; it needs root, runc and the test cluster.
func BenchmarkPhaseStart(b *testing.B) {
	root, err := tofu.RepoRoot(".")
	require.NoError(b, err)
	tc := tofutest.Toolchain(b, root, b.TempDir(), logWriter{b})
	config := emptyConfig(b)
	kubeRunner, kubeLaunch := benchKube(b, tc, root)
	runcRunner := benchRunc(b, tc, root)
	b.ResetTimer()
	for range b.N {
		measure := func(r runner.Runner, podClock func() (time.Time, bool)) (started, seen []time.Duration) {
			for i := range phaseStarts {
				begin := time.Now()
				at, err := firstInit(b.Context(), r, config)
				require.NoError(b, err, "phase %d", i)
				seen = append(seen, at.Sub(begin))
				if podClock != nil {
					t, ok := podClock()
					require.True(b, ok, "phase %d: no timestamped tofu init line in the pod's log", i)
					started = append(started, t.Sub(begin))
				}
			}
			return started, seen
		}
		kubeStarted, kubeSeen := measure(kubeRunner, kubeLaunch.lastInit)
		_, runcSeen := measure(runcRunner, nil)
		report(b, "kube", kubeStarted)
		report(b, "kube_seen", kubeSeen)
		report(b, "runc", runcSeen)
	}
}

// report reports the p50, p90 and p99 of ds in milliseconds.
func report(b *testing.B, prefix string, ds []time.Duration) {
	sort.Slice(ds, func(i, j int) bool { return ds[i] < ds[j] })
	at := func(p float64) float64 { return float64(ds[int(p*float64(len(ds)-1)+0.5)].Microseconds()) / 1000 }
	b.ReportMetric(at(0.50), prefix+"_p50_ms")
	b.ReportMetric(at(0.90), prefix+"_p90_ms")
	b.ReportMetric(at(0.99), prefix+"_p99_ms")
}

// emptyConfig is a bundle whose plan needs the sandbox provider and nothing else.
func emptyConfig(b testing.TB) []byte {
	main := `terraform {
  required_providers {
    sandbox = {
      source  = "` + tofu.ProviderSource + `"
      version = "` + tofu.ProviderVersion + `"
    }
  }
}
`
	// The catalog's lock file: the runner image's plugin cache holds its providers, as the
	// runc executor's cache will after its first plan.
	lock, err := fs.ReadFile(catalogfiles.FS, "templates/bucket/.terraform.lock.hcl")
	require.NoError(b, err)
	data, _, err := bundle.Bundle{Files: map[string][]byte{"main.tf": []byte(main), ".terraform.lock.hcl": lock}}.Tar()
	require.NoError(b, err)
	return data
}

// firstInit plans config with r and returns when its log showed tofu init's first line.
func firstInit(ctx context.Context, r runner.Runner, config []byte) (time.Time, error) {
	w := &firstWord{word: []byte("Initializing"), seen: make(chan time.Time, 1)}
	res, err := r.Plan(ctx, runner.PlanRequest{RunID: "run-bench", WorkspaceID: "ws-bench", Kind: runner.KindApply, Config: config, Log: w})
	if err != nil {
		return time.Time{}, fmt.Errorf("%w\n%s", err, res.Log)
	}
	select {
	case at := <-w.seen:
		return at, nil
	default:
		return time.Time{}, fmt.Errorf("the plan's log never showed tofu init:\n%s", res.Log)
	}
}

// firstWord notes when the log first shows word.
type firstWord struct {
	word []byte
	seen chan time.Time
	mu   sync.Mutex
	buf  []byte
	done bool
}

func (f *firstWord) Write(p []byte) (int, error) {
	now := time.Now()
	f.mu.Lock()
	defer f.mu.Unlock()
	if !f.done {
		f.buf = append(f.buf, p...)
		if bytes.Contains(f.buf, f.word) {
			f.done = true
			f.seen <- now
		}
	}
	return len(p), nil
}

// benchKube is the Kubernetes executor on the test cluster, its phase endpoint on the
// pod bridge's gateway, its launches timed by the pods' own log timestamps.
func benchKube(b testing.TB, tc tofu.Toolchain, root string) (runner.Runner, *timedLaunch) {
	c := kubetest.Cluster(b)
	ns := kubetest.Namespace(b, c)
	client, err := c.Client()
	require.NoError(b, err)
	image := importRunnerImage(b, c, tc, root)
	ln, err := net.Listen("tcp", net.JoinHostPort(c.Gateway(), "0"))
	require.NoError(b, err)
	portal := kube.NewPortal()
	mux := http.NewServeMux()
	mux.Handle(kube.PathPrefix, portal)
	serve(b, ln, mux)
	l, err := kube.NewJobLauncher(kube.JobConfig{Client: client, Namespace: ns, Image: image, Replica: "bench"})
	require.NoError(b, err)
	tl := &timedLaunch{Launcher: l, client: client, ns: ns}
	r := &kube.Runner{Launcher: tl, Portal: portal, PortalURL: "http://" + ln.Addr().String(), CloudEndpoint: "http://" + ln.Addr().String(),
		WorkRoot: b.TempDir()}
	require.NoError(b, r.Health(b.Context()))
	return r, tl
}

// timedLaunch reads each pod's log with the container runtime's timestamps before its
// Job is deleted, and keeps when the pod's tofu init said its first word.
type timedLaunch struct {
	kube.Launcher
	client kubernetes.Interface
	ns     string
	mu     sync.Mutex
	init   time.Time
	ok     bool
}

func (t *timedLaunch) lastInit() (time.Time, bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.init, t.ok
}

func (t *timedLaunch) Launch(ctx context.Context, spec kube.PodSpec) (kube.Pod, error) {
	t.mu.Lock()
	t.ok = false
	t.mu.Unlock()
	p, err := t.Launcher.Launch(ctx, spec)
	if err != nil {
		return nil, err
	}
	return timedPod{Pod: p, t: t, job: spec.Job}, nil
}

type timedPod struct {
	kube.Pod
	t   *timedLaunch
	job string
}

func (p timedPod) Delete(ctx context.Context, wait bool) error {
	pods, err := p.t.client.CoreV1().Pods(p.t.ns).List(ctx, metav1.ListOptions{LabelSelector: "batch.kubernetes.io/job-name=" + p.job})
	if err == nil && len(pods.Items) == 1 {
		raw, err := p.t.client.CoreV1().Pods(p.t.ns).GetLogs(pods.Items[0].Name, &corev1.PodLogOptions{Timestamps: true}).DoRaw(ctx)
		if err == nil {
			for _, line := range strings.Split(string(raw), "\n") {
				stamp, text, _ := strings.Cut(line, " ")
				if at, err := time.Parse(time.RFC3339Nano, stamp); err == nil && strings.Contains(text, "Initializing") {
					p.t.mu.Lock()
					p.t.init, p.t.ok = at, true
					p.t.mu.Unlock()
					break
				}
			}
		}
	}
	return p.Pod.Delete(ctx, wait)
}

// benchRunc is the runc executor with the same toolchain (its sockets answer nothing:
// the plan calls neither).
func benchRunc(b *testing.B, tc tofu.Toolchain, root string) runner.Runner {
	if os.Geteuid() != 0 {
		b.Fatal("the runc executor needs root; CI runs as root")
	}
	fwd, err := tofu.BuildFwd(b.Context(), root, b.TempDir())
	require.NoError(b, err)
	sockets := filepath.Join(b.TempDir(), "sockets")
	require.NoError(b, os.Mkdir(sockets, 0o755))
	require.NoError(b, os.Chmod(sockets, 0o755))
	var socks []string
	for _, name := range []string{"state.sock", "cloud.sock"} {
		p := filepath.Join(sockets, name)
		ln, err := net.Listen("unix", p)
		require.NoError(b, err)
		require.NoError(b, os.Chmod(p, 0o666))
		serve(b, ln, http.NotFoundHandler())
		socks = append(socks, p)
	}
	scratch := b.TempDir()
	ex := &oci.Executor{StateRoot: filepath.Join(scratch, "runc"), BundleRoot: filepath.Join(scratch, "bundles"),
		CgroupRoot: fmt.Sprintf("gantry-kubebench-%d", os.Getpid())}
	o, err := tofurun.NewOCI(b.Context(), tofurun.OCIConfig{Toolchain: tc, Fwd: fwd, RootfsDir: filepath.Join(scratch, "rootfs"),
		StateSocket: socks[0], StatePort: 8765, CloudSocket: socks[1], Timeout: 2 * time.Minute, Executor: ex})
	require.NoError(b, err)
	return tofurun.New(o, filepath.Join(scratch, "work"), &tofu.PluginCache{Mirror: tc.Mirror, Root: filepath.Join(scratch, "plugins")})
}
