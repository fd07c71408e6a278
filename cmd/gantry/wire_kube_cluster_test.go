//go:build !fast

// Live: needs the machine's Kubernetes test cluster (as root) and live OpenTofu (bin/tofu, built from tools/tofu).

package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"gantry/bench"
	catalogfiles "gantry/catalog"
	"gantry/models/authz"
	"gantry/models/idempotency"
	runpkg "gantry/models/run"
	"gantry/runner/kube"
	"gantry/runner/kube/kubecluster/kubetest"
	"gantry/runner/tofu"
	"gantry/runner/tofu/tofutest"
	"gantry/sandbox/cloud"
)

// TestServeRunsPhasesAsJobs: `gantry serve` given the Kubernetes flags offers
// tofu/kubernetes, serves its runner listener (the phase endpoint and the state backend,
// which the saved plan names through --kube-portal-url), and a run's plan, apply and
// verification run as Jobs on the test cluster, leaving nothing in the namespace. It
// needs root and the test cluster's Debian packages.
func TestServeRunsPhasesAsJobs(t *testing.T) {
	c := kubetest.Cluster(t)
	ns := kubetest.Namespace(t, c)
	ctx := t.Context()
	root, err := tofu.RepoRoot(".")
	require.NoError(t, err)
	tc := tofutest.Toolchain(t, root, t.TempDir(), io.Discard)
	phase, err := kube.BuildPhase(ctx, root, t.TempDir())
	require.NoError(t, err)
	locks, err := kube.CatalogLocks(catalogfiles.FS)
	require.NoError(t, err)
	img, err := kube.RunnerImage(tc, phase, locks)
	require.NoError(t, err)
	require.NoError(t, c.ImportImage(ctx, img))
	require.NoError(t, c.WaitListed(ctx, img.Name), "the executor's health looks for it in the node status")

	// Everything the pods reach listens on the pod bridge's gateway.
	gw := c.Gateway()
	free := func() string {
		ln, err := net.Listen("tcp", net.JoinHostPort(gw, "0"))
		require.NoError(t, err)
		defer ln.Close()
		return net.JoinHostPort(gw, strconv.Itoa(ln.Addr().(*net.TCPAddr).Port))
	}
	portalAddr, runnerAddr := free(), free()
	cloudLn, err := net.Listen("tcp", net.JoinHostPort(gw, "0"))
	require.NoError(t, err)
	cloudURL := "http://" + cloudLn.Addr().String()

	r := newReplicas(t)
	p := r.start("--addr", portalAddr, "--base-url", "http://"+portalAddr, "--runner", kube.Name, "--replica-id", "kube-serve-test",
		"--kubeconfig", c.Kubeconfig(), "--kube-namespace", ns, "--kube-image", img.Name,
		"--kube-listen", runnerAddr, "--kube-portal-url", "http://"+runnerAddr, "--cloud-endpoint", cloudURL)
	sc, err := cloud.New(ctx, cloud.Config{DataDir: t.TempDir(), Issuer: "http://" + portalAddr + "/workload", AdminToken: "admin",
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	require.NoError(t, err)
	srv := &http.Server{Handler: sc, ReadHeaderTimeout: 10 * time.Second}
	go srv.Serve(cloudLn) //nolint:errcheck // ends with ErrServerClosed
	t.Cleanup(func() { srv.Close() })

	// The request goes to the serve process (its executors decide the run's): the
	// harness's in-process System offers only the mock.
	var dev string
	require.NoError(t, r.DB.Raw("SELECT id FROM environments WHERE organization_id = ? AND name = 'development'", r.Orgs["acme"]).Scan(&dev).Error)
	token := demoToken(t, r, "acme-operator", r.Orgs["acme"], authz.RoleOperator, "read", "plan", "apply")
	body, err := json.Marshal(map[string]any{"template": "bucket", "environment_id": dev, "workspace": "on-jobs", "inputs": map[string]string{"name": "on-jobs"}})
	require.NoError(t, err)
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, p.URL+"/api/v1/requests", bytes.NewReader(body))
	require.NoError(t, err)
	req.Header.Set("Authorization", "Bearer "+token)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Idempotency-Key", idempotency.NewKey())
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	out, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	require.NoError(t, err)
	require.Equal(t, http.StatusCreated, resp.StatusCode, "%s\n%s", out, p.out)
	var requested struct{ ID string }
	require.NoError(t, json.Unmarshal(out, &requested))
	// Woken by run changes; the portal's exit fails the wait at once.
	var got runpkg.Run
	bench.Eventually(t, "the run to end", 5*time.Minute, func() (bool, any) {
		p.alive(t, "the run to end")
		require.NoError(t, r.DB.Where("id = ?", requested.ID).Take(&got).Error)
		return got.State.Terminal(), bench.Later(func() string { return fmt.Sprintf("%s; the portal's output:\n%s", got.State, p.out) })
	}, bench.Wake(r.changes()))
	require.Equal(t, runpkg.Succeeded, got.State, "%s\n%s", got.StateReason, p.out)
	require.Equal(t, kube.Name, got.Runner)

	// Woken by watches of the namespace (started before the first List, so no deletion
	// goes unseen).
	client, err := c.Client()
	require.NoError(t, err)
	secretsOfGantry := metav1.ListOptions{LabelSelector: kube.LabelManagedBy + "=gantry"}
	changes := kubetest.Changes(t, client, ns)
	bench.Eventually(t, "the Jobs and Secrets of the phases to be gone", time.Minute, func() (bool, any) {
		jobs, err := client.BatchV1().Jobs(ns).List(ctx, metav1.ListOptions{})
		require.NoError(t, err)
		secrets, err := client.CoreV1().Secrets(ns).List(ctx, secretsOfGantry)
		require.NoError(t, err)
		return len(jobs.Items) == 0 && len(secrets.Items) == 0, fmt.Sprintf("%d Jobs, %d Secrets", len(jobs.Items), len(secrets.Items))
	}, bench.Wake(changes))
}
