//go:build !fast

// Live: needs the machine's Kubernetes test cluster (as root).

package chartcheck

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"gantry/bench"
	"gantry/deploy/portalimage"
	"gantry/models/db/dbtest"
	"gantry/models/keyring"
	"gantry/runner/kube/kubecluster/kubetest"
	"gantry/syncio"
)

func TestMain(m *testing.M) { os.Exit(dbtest.Main(m)) }

// installBudget bounds the wait for the pods to become ready, in idle-machine time (a
// bench budget): the image is imported, not pulled, so this is the kubelet starting
// containers, not a measure.
const installBudget = 5 * time.Minute

// TestChartInstallsOnTheTestCluster installs the chart on the real single-node cluster:
// the image built from this tree and imported into the node's containerd (never pulled),
// a database of this test reachable from the pods at the cluster's gateway, and the
// development OpenID Provider (`gantry dev-oidc` of a default build: the image's production
// build leaves it out) there too, with the
// Kubernetes executor's RBAC in a runner namespace of its own. Both replicas must become
// ready, `/readyz` must answer through each pod, a person must sign in through a pod with
// the provider on the host, the API server must grant the portal's ServiceAccount exactly
// the runner rules in the runner namespace and nothing elsewhere, and the executor's start
// (which lists this replica's leftover Jobs and Secrets with that account) must succeed.
func TestChartInstallsOnTheTestCluster(t *testing.T) {
	t.Parallel()
	c := kubetest.Cluster(t)
	ns := kubetest.Namespace(t, c)
	runnerNS := kubetest.Namespace(t, c)
	clientset, err := c.Client()
	require.NoError(t, err)
	ctx := t.Context()

	bin, err := portalimage.BuildBinary(ctx, repoRoot(t), t.TempDir())
	require.NoError(t, err)
	// The image's gantry is the production build: its development commands are not there.
	refused, err := exec.CommandContext(ctx, bin, "dev").CombinedOutput()
	require.Error(t, err, "the production gantry ran `gantry dev`")
	require.Contains(t, string(refused), "not in this build")
	devBin, err := portalimage.BuildDevBinary(ctx, repoRoot(t), t.TempDir())
	require.NoError(t, err)
	tag, err := portalimage.ContentTag(bin)
	require.NoError(t, err)
	img, err := portalimage.Image(bin, portalimage.CABundle, tag)
	require.NoError(t, err)
	require.NoError(t, c.ImportImage(ctx, img))

	// What the pods reach on the host, at the gateway (there is no kube-proxy).
	dbURL := forwardDatabase(t, c.Gateway(), dbtest.NewURL(t))
	const baseURL = "http://gantry.test"
	secret := "s-" + tag
	issuer := startDevOIDC(t, devBin, c.Gateway()+":0", baseURL+"/auth/callback", secret)

	values := filepath.Join(t.TempDir(), "values.yaml")
	require.NoError(t, os.WriteFile(values, fmt.Appendf(nil, `baseURL: %s
image: {repository: %s, tag: %q, pullPolicy: Never}
secret:
  databaseURL: %q
  oidcIssuer: %q
  oidcClientID: gantry-dev
  oidcClientSecret: %q
  keys: %q
resources:
  requests: {cpu: 50m, memory: 64Mi}
  limits: {cpu: "1", memory: 512Mi}
config:
  # Never called: the executor needs a cloud to offer, no phase runs here.
  cloudEndpoint: http://%s:1
kubernetesExecutor:
  enabled: true
  namespace: %s
  runnerImage: gantry.local/runner:not-imported
# The test cluster has no kube-proxy: the kubernetes Service's IP, which the kubelet puts in
# KUBERNETES_SERVICE_HOST, does not route; the API server answers at the node's address
# (in its certificate), so the in-cluster client is pointed there.
extraEnv:
  - {name: KUBERNETES_SERVICE_HOST, value: %q}
  - {name: KUBERNETES_SERVICE_PORT, value: "6443"}
`, baseURL, portalimage.Repository, tag, dbURL, issuer, secret, keyring.NewKeySpec("k1"), c.Gateway(), runnerNS, c.NodeIP()), 0o600))
	cmd := exec.CommandContext(ctx, helm(t), "install", "gantry", chartDir(t), "--namespace", ns, "--values", values)
	cmd.Env = append(helmEnv(t.TempDir()), "KUBECONFIG="+c.Kubeconfig()) // the later KUBECONFIG wins
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, "helm install:\n%s", out)

	pods := waitReady(t, clientset, ns, 2)
	for _, pod := range pods {
		resp, err := http.Get("http://" + net.JoinHostPort(pod.Status.PodIP, "8080") + "/readyz")
		require.NoError(t, err, "pod %s", pod.Name)
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		require.Equal(t, http.StatusOK, resp.StatusCode, "/readyz through pod %s: %s", pod.Name, body)
		require.Equal(t, int32(0), pod.Status.ContainerStatuses[0].RestartCount, "pod %s restarted", pod.Name)
	}
	signInThroughPod(t, "http://"+net.JoinHostPort(pods[0].Status.PodIP, "8080"), baseURL)
	checkRunnerAccess(t, clientset, ns, runnerNS)
	for _, pod := range pods {
		tail := int64(200)
		logs, err := clientset.CoreV1().Pods(ns).GetLogs(pod.Name, &corev1.PodLogOptions{Container: "gantry", TailLines: &tail}).DoRaw(ctx)
		require.NoError(t, err)
		require.NotContains(t, string(logs), "left failed", "the executor's start could not list its leftovers with the chart's RBAC:\n%s", logs)
		require.Contains(t, string(logs), `"runner":"mock"`, "the portal started")
	}
}

// checkRunnerAccess asks the API server's authorizer what the portal's ServiceAccount may
// do: every runner rule in the runner namespace, and nothing of the kind in its own
// namespace (not even its own Secret), nothing cluster-wide, no other verb.
func checkRunnerAccess(t *testing.T, clientset *kubernetes.Clientset, ns, runnerNS string) {
	t.Helper()
	may := func(namespace, verb, group, resource string) bool {
		res, sub, _ := strings.Cut(resource, "/")
		review, err := clientset.AuthorizationV1().SubjectAccessReviews().Create(t.Context(), &authorizationv1.SubjectAccessReview{
			Spec: authorizationv1.SubjectAccessReviewSpec{
				User:   "system:serviceaccount:" + ns + ":gantry",
				Groups: []string{"system:serviceaccounts", "system:serviceaccounts:" + ns, "system:authenticated"},
				ResourceAttributes: &authorizationv1.ResourceAttributes{Namespace: namespace, Verb: verb, Group: group,
					Resource: res, Subresource: sub},
			},
		}, metav1.CreateOptions{})
		require.NoError(t, err)
		return review.Status.Allowed
	}
	for groupResource, verbs := range RunnerRules {
		group, resource, _ := strings.Cut(groupResource, "/")
		for _, verb := range verbs {
			require.True(t, may(runnerNS, verb, group, resource), "%s %s in the runner namespace", verb, groupResource)
			require.False(t, may(ns, verb, group, resource), "%s %s in the portal's own namespace", verb, groupResource)
			require.False(t, may("default", verb, group, resource), "%s %s in another namespace", verb, groupResource)
		}
	}
	for _, denied := range []struct{ namespace, verb, group, resource string }{
		{runnerNS, "update", "batch", "jobs"},
		{runnerNS, "create", "", "pods"},
		{runnerNS, "create", "", "pods/exec"},
		{runnerNS, "create", "rbac.authorization.k8s.io", "roles"},
		{runnerNS, "get", "", "configmaps"},
		{"", "list", "", "nodes"},
		{"", "get", "", "namespaces"},
		{"", "list", "", "secrets"},
	} {
		require.False(t, may(denied.namespace, denied.verb, denied.group, denied.resource), "%+v", denied)
	}
}

// forwardDatabase serves a TCP forwarder to the database of dsn on gateway (a port of its
// own) and returns dsn with its host and port replaced by the forwarder's, as the pods
// reach it. The test server listens on loopback, which a pod cannot reach.
func forwardDatabase(t *testing.T, gateway, dsn string) string {
	t.Helper()
	u, err := url.Parse(dsn)
	require.NoError(t, err)
	target := u.Host
	ln, err := net.Listen("tcp", net.JoinHostPort(gateway, "0"))
	require.NoError(t, err)
	var (
		wg    sync.WaitGroup
		mu    sync.Mutex
		conns = map[net.Conn]bool{}
	)
	track := func(c net.Conn, open bool) {
		mu.Lock()
		defer mu.Unlock()
		if open {
			conns[c] = true
		} else {
			delete(conns, c)
		}
	}
	// The pods still run when this cleanup comes (the namespace goes later): their
	// connections are cut here, not waited for.
	t.Cleanup(func() {
		ln.Close()
		mu.Lock()
		for c := range conns {
			c.Close()
		}
		mu.Unlock()
		wg.Wait()
	})
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			in, err := ln.Accept()
			if err != nil {
				return // closed at cleanup
			}
			wg.Add(1)
			go func() {
				defer wg.Done()
				upstream, err := net.Dial("tcp", target)
				if err != nil {
					in.Close()
					return
				}
				track(in, true)
				track(upstream, true)
				done := make(chan struct{}, 2)
				go func() { _, _ = io.Copy(upstream, in); done <- struct{}{} }()
				go func() { _, _ = io.Copy(in, upstream); done <- struct{}{} }()
				<-done // either side closing ends both
				in.Close()
				upstream.Close()
				<-done
				track(in, false)
				track(upstream, false)
			}()
		}
	}()
	u.Host = ln.Addr().String()
	return u.String()
}

var devOIDCIssuer = regexp.MustCompile(`development OpenID Provider: (http://\S+)`)

// startDevOIDC runs bin (a default build of gantry) as `gantry dev-oidc` on addr for one client, with the
// demo users, and returns the issuer it announces.
func startDevOIDC(t *testing.T, bin, addr, redirect, secret string) string {
	t.Helper()
	cmd := exec.Command(bin, "dev-oidc", "--addr", addr, "--redirect-uris", redirect)
	cmd.Env = append(os.Environ(), "GANTRY_DEV_OIDC_CLIENT_SECRET="+secret)
	stdout, err := cmd.StdoutPipe()
	require.NoError(t, err)
	stderr := &syncio.Buffer{} // read while the process writes it
	cmd.Stderr = stderr
	require.NoError(t, cmd.Start())
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		_ = cmd.Wait()
	})
	// The issuer line is the event; stdout's end (the process exited) closes issuer, so a
	// provider that fails to start fails the test at once rather than at the budget's end.
	issuer := make(chan string, 1)
	go func() {
		defer close(issuer)
		lines := bufio.NewScanner(stdout)
		announced := false
		for lines.Scan() { // read to the end: a full pipe would stall the provider
			if m := devOIDCIssuer.FindStringSubmatch(lines.Text()); m != nil && !announced {
				issuer <- m[1]
				announced = true
			}
		}
	}()
	b := bench.NewBudget(30 * time.Second)
	for {
		timer := time.NewTimer(min(b.Left(), time.Second) + time.Millisecond)
		select {
		case is, ok := <-issuer:
			timer.Stop()
			if !ok {
				t.Fatalf("gantry dev-oidc exited before it announced its issuer:\n%s", stderr)
			}
			return is
		case <-timer.C:
			if b.Spent() {
				t.Fatalf("gantry dev-oidc did not announce its issuer within %s:\n%s", b, stderr)
			}
		}
	}
}

// waitReady waits until n pods of the portal in ns are ready and returns them, woken by a
// watch on those pods. When they do not become ready within installBudget of idle-machine
// time, it fails with their states, events and logs.
func waitReady(t *testing.T, clientset *kubernetes.Clientset, ns string, n int) []corev1.Pod {
	t.Helper()
	selector := "app.kubernetes.io/name=gantry,app.kubernetes.io/component=portal"
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	w, err := clientset.CoreV1().Pods(ns).Watch(ctx, metav1.ListOptions{LabelSelector: selector})
	require.NoError(t, err, "watching the portal's pods")
	defer w.Stop()
	changed := make(chan struct{}, 1)
	go func() {
		// Ends when w.Stop closes the result channel (or the API server ends the watch:
		// the wait's slow safety-net poll covers the rest).
		for range w.ResultChan() {
			select {
			case changed <- struct{}{}:
			default:
			}
		}
	}()
	var ready []corev1.Pod
	bench.Eventually(t, fmt.Sprintf("%d ready portal pods", n), installBudget, func() (bool, any) {
		list, err := clientset.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: selector})
		if err != nil { // the API server may be busy: the next event or poll asks again
			return false, bench.Later(func() string {
				return fmt.Sprintf("listing the pods: %v\n%s", err, diagnose(clientset, ns, selector))
			})
		}
		ready = ready[:0]
		for _, p := range list.Items {
			for _, cond := range p.Status.Conditions {
				if cond.Type == corev1.PodReady && cond.Status == corev1.ConditionTrue {
					ready = append(ready, p)
				}
			}
		}
		return len(ready) == n, bench.Later(func() string {
			return fmt.Sprintf("%d of %d ready:\n%s", len(ready), len(list.Items), diagnose(clientset, ns, selector))
		})
	}, bench.Wake(changed))
	return ready
}

// diagnose describes the pods of selector in ns: phase, container states, the namespace's
// events and each container's log tail.
func diagnose(clientset *kubernetes.Clientset, ns, selector string) string {
	ctx, cancel := bench.Context(context.Background(), 30*time.Second)
	defer cancel()
	var b strings.Builder
	pods, err := clientset.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: selector})
	if err != nil {
		return "listing pods: " + err.Error()
	}
	for _, p := range pods.Items {
		fmt.Fprintf(&b, "pod %s: %s\n", p.Name, p.Status.Phase)
		for _, s := range append(p.Status.InitContainerStatuses, p.Status.ContainerStatuses...) {
			fmt.Fprintf(&b, "  %s: ready=%v restarts=%d state=%+v last=%+v\n", s.Name, s.Ready, s.RestartCount, s.State, s.LastTerminationState)
			tail := int64(40)
			logs, err := clientset.CoreV1().Pods(ns).GetLogs(p.Name, &corev1.PodLogOptions{Container: s.Name, TailLines: &tail}).DoRaw(ctx)
			fmt.Fprintf(&b, "  log of %s (%v):\n%s\n", s.Name, err, logs)
		}
	}
	if events, err := clientset.CoreV1().Events(ns).List(ctx, metav1.ListOptions{}); err == nil {
		for _, e := range events.Items {
			fmt.Fprintf(&b, "event %s %s: %s %s\n", e.InvolvedObject.Name, e.Type, e.Reason, e.Message)
		}
	}
	return b.String()
}

var loginFormID = regexp.MustCompile(`name="id" value="([^"]+)"`)

// signInThroughPod signs in at the portal served by a pod (portal: its address), with the
// development provider on the host: the pod redirects to the provider, the provider back
// to the base URL's callback, which is sent to the pod (the base URL is a name nothing
// resolves), and the pod exchanges the code with the provider at the gateway.
func signInThroughPod(t *testing.T, portal, baseURL string) {
	t.Helper()
	jar, err := cookiejar.New(nil)
	require.NoError(t, err)
	browser := &http.Client{Jar: jar, Timeout: time.Minute, CheckRedirect: func(req *http.Request, _ []*http.Request) error {
		if strings.HasPrefix(req.URL.String(), baseURL) {
			return http.ErrUseLastResponse
		}
		return nil
	}}
	resp, err := browser.Get(portal + "/login")
	require.NoError(t, err)
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode, "the provider's login page:\n%s", body)
	id := loginFormID.FindSubmatch(body)
	require.NotNil(t, id, "no login form:\n%s", body)
	loginURL := *resp.Request.URL
	loginURL.RawQuery = ""
	resp, err = browser.PostForm(loginURL.String(), url.Values{"id": {string(id[1])}, "username": {"admin@acme.test"}, "password": {"admin-acme"}})
	require.NoError(t, err)
	resp.Body.Close()
	callback, err := url.Parse(resp.Header.Get("Location"))
	require.NoError(t, err)
	require.True(t, strings.HasPrefix(callback.String(), baseURL+"/auth/callback"), "redirected to %s", callback)

	// The callback, and any redirect to the base URL after it, go to the pod.
	next := callback
	for range 5 {
		resp, err = browser.Get(portal + next.RequestURI())
		require.NoError(t, err)
		body, _ = io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode < 300 || resp.StatusCode >= 400 {
			break
		}
		next, err = url.Parse(resp.Header.Get("Location"))
		require.NoError(t, err)
	}
	// Signed in (the page names the person), and a stranger to this empty database: the
	// page for people without a membership, a 403.
	require.Equal(t, http.StatusForbidden, resp.StatusCode, "after the callback:\n%s", body)
	require.Contains(t, string(body), "You are not a member of any organization")
	require.Contains(t, string(body), `data-testid="current-user">Adam`)
}
