//go:build !fast

// Live: needs runc (as root) and live OpenTofu (bin/tofu, built from tools/tofu).

package tofurun_test

// The OCI executor tests' harness: a state backend, the sockets, a runc setup and the
// checks that a job left nothing behind.

import (
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	catalogfiles "gantry/catalog"
	"gantry/models/catalog"
	"gantry/runner"
	"gantry/runner/oci"
	"gantry/runner/tofu"
	"gantry/runner/tofu/tofutest"
	"gantry/runner/tofurun"
	"gantry/sandbox/sandboxtest"
)

// The tests run real containers: they need root and runc (Debian package runc) and fail
// without them (requireRunc).

const (
	stateUser   = "job-cred-1"
	statePass   = "sbx-STATEPASS-5e1d0c"
	workspaceID = "ws-1"
)

// stateBackend is a minimal tofu http backend (GET/POST the state, LOCK/UNLOCK) that
// insists on the job's Basic credentials.
type stateBackend struct {
	mu     sync.Mutex
	state  []byte
	locked []byte
	calls  []string
}

func (b *stateBackend) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.calls = append(b.calls, r.Method+" "+r.URL.Path)
	if u, p, ok := r.BasicAuth(); !ok || u != stateUser || p != statePass {
		http.Error(w, "unauthorized", http.StatusUnauthorized)
		return
	}
	body, _ := io.ReadAll(r.Body)
	switch {
	case r.URL.Path == "/state/"+workspaceID && r.Method == http.MethodGet:
		if b.state == nil {
			w.WriteHeader(http.StatusNoContent)
			return
		}
		w.Write(b.state)
	case r.URL.Path == "/state/"+workspaceID && r.Method == http.MethodPost:
		b.state = body
	case r.URL.Path == "/state/"+workspaceID+"/lock" && r.Method == "LOCK":
		if b.locked != nil {
			w.WriteHeader(http.StatusLocked)
			w.Write(b.locked)
			return
		}
		b.locked = body
	case r.URL.Path == "/state/"+workspaceID+"/lock" && r.Method == "UNLOCK":
		b.locked = nil
	default:
		http.Error(w, "no", http.StatusNotFound)
	}
}

type ociEnv struct {
	tc       tofu.Toolchain
	fwd      string
	dir      string
	port     int    // the state backend's TCP port (host) = StatePort (container)
	cloudURL string // the cloud over TCP (process executor)
	state    *stateBackend
	iss      *sandboxtest.Issuer
	cloud    *sandboxtest.Cloud
	stateSk  string
	cloudSk  string
	config   []byte // the postgres template's config bundle
	ex       *oci.Executor
}

func requireRunc(t *testing.T) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Fatal("the OCI executor needs root (runc); CI runs as root")
	}
	if _, err := exec.LookPath("runc"); err != nil {
		t.Fatal("runc is not installed: apt-get install runc")
	}
}

func serve(t *testing.T, ln net.Listener, h http.Handler) {
	t.Helper()
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second}
	go srv.Serve(ln) //nolint:errcheck
	t.Cleanup(func() { srv.Close() })
}

func unixSocket(t *testing.T, name string) (string, net.Listener) {
	t.Helper()
	dir := filepath.Join(t.TempDir(), name)
	require.NoError(t, os.Mkdir(dir, 0o755))
	require.NoError(t, os.Chmod(dir, 0o755))
	path := filepath.Join(dir, name+".sock")
	ln, err := net.Listen("unix", path)
	require.NoError(t, err)
	require.NoError(t, os.Chmod(path, 0o666))
	return path, ln
}

func setupOCI(t *testing.T) *ociEnv {
	t.Helper()
	requireRunc(t)
	e := &ociEnv{dir: t.TempDir(), state: &stateBackend{}}
	var err error
	e.tc = tofutest.Toolchain(t, "../..", e.dir, io.Discard)
	e.fwd, err = tofu.BuildFwd(t.Context(), "../..", e.dir)
	require.NoError(t, err)

	tcp, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	e.port = tcp.Addr().(*net.TCPAddr).Port
	serve(t, tcp, e.state)
	var ln net.Listener
	e.stateSk, ln = unixSocket(t, "state")
	serve(t, ln, e.state)

	e.iss = sandboxtest.NewIssuer(t)
	e.cloud = sandboxtest.NewCloud(t, e.iss)
	e.cloudURL = e.cloud.URL
	e.cloudSk, ln = unixSocket(t, "cloud")
	serve(t, ln, e.cloud.Server)

	cat, err := catalog.Load(t.Context(), catalogfiles.FS, &catalog.MemoryPins{})
	require.NoError(t, err)
	entry, err := cat.Get("postgres")
	require.NoError(t, err)
	inputs, verr := entry.Template.ValidateInputs(map[string]string{"name": "orders", "engine_version": "16", "size": "small",
		"storage_gb": "20", "backup_retention_days": "7", "network_cidr": "10.30.0.0/16"})
	require.Nil(t, verr)
	b, err := entry.Generate(catalog.GenerateInput{WorkspaceID: workspaceID, Inputs: inputs,
		StateAddress: fmt.Sprintf("http://127.0.0.1:%d/state/%s", e.port, workspaceID)})
	require.NoError(t, err)
	e.config, _, err = b.Tar()
	require.NoError(t, err)

	e.ex = &oci.Executor{
		StateRoot:  filepath.Join(e.dir, "runc"),
		BundleRoot: filepath.Join(e.dir, "bundles"),
		CgroupRoot: fmt.Sprintf("gantry-tofurun-test-%d-%s", os.Getpid(), strings.ToLower(t.Name())),
	}
	t.Cleanup(func() {
		for _, m := range cgroupMounts(t) {
			_ = syscall.Rmdir(filepath.Join(m, e.ex.CgroupRoot))
		}
	})
	return e
}

func (e *ociEnv) newOCI(t *testing.T, limits oci.Limits, timeout time.Duration) *tofurun.OCI {
	t.Helper()
	o, err := tofurun.NewOCI(t.Context(), tofurun.OCIConfig{
		Toolchain: e.tc, Fwd: e.fwd, RootfsDir: filepath.Join(e.dir, "rootfs"),
		StateSocket: e.stateSk, StatePort: e.port, CloudSocket: e.cloudSk,
		Limits: limits, Timeout: timeout, Executor: e.ex,
	})
	require.NoError(t, err)
	return o
}

func (e *ociEnv) creds(t *testing.T, phase, scope string) runner.Credentials {
	return runner.Credentials{StateUsername: stateUser, StatePassword: statePass,
		CloudToken: e.iss.Mint(t, sandboxtest.Claims{Org: "acme", Env: "staging", Workspace: workspaceID, Run: "run-1", Phase: phase, Scope: scope})}
}

func cgroupMounts(t *testing.T) []string {
	t.Helper()
	data, err := os.ReadFile("/proc/self/mountinfo")
	require.NoError(t, err)
	var out []string
	for _, line := range strings.Split(string(data), "\n") {
		pre, post, ok := strings.Cut(line, " - ")
		f, g := strings.Fields(pre), strings.Fields(post)
		if ok && len(f) >= 5 && len(g) >= 1 && (g[0] == "cgroup" || g[0] == "cgroup2") {
			out = append(out, f[4])
		}
	}
	return out
}

// assertClean: no container, bundle or job cgroup is left.
func (e *ociEnv) assertClean(t *testing.T) {
	t.Helper()
	out, err := exec.Command("runc", "--root", e.ex.StateRoot, "list", "-q").CombinedOutput()
	require.NoError(t, err, "%s", out)
	require.Empty(t, strings.TrimSpace(string(out)))
	ents, err := os.ReadDir(e.ex.BundleRoot)
	require.NoError(t, err)
	require.Empty(t, ents)
	for _, m := range cgroupMounts(t) {
		ents, _ := os.ReadDir(filepath.Join(m, e.ex.CgroupRoot))
		for _, ent := range ents {
			require.False(t, ent.IsDir(), "cgroup left: %s", filepath.Join(m, e.ex.CgroupRoot, ent.Name()))
		}
	}
}
