//go:build !fast

// Live: needs live OpenTofu (bin/tofu), the pinned Kubernetes (tools/k8s) for a private API
// server and the pinned terraform-provider-kubernetes (tools/kubernetes-provider).

package web_test

import (
	"encoding/base64"
	"encoding/json"
	"net/http"
	"net/url"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"gantry/bench"
	"gantry/cmd/gantry/webtest"
	"gantry/models/run"
	"gantry/runner/kube/kubecluster"
	"gantry/runner/targets/kubetarget"
	"gantry/runner/targets/kubetarget/kubetargettest"
	"gantry/runner/tofu"
	"gantry/runner/tofu/tofutest"
	"gantry/runner/tofurun"
	"gantry/web"
)

// kubeApp is Gantry with the live runner (real tofu, the real hashicorp/kubernetes provider
// from the offline mirror) behind a recording executor, and a private kube-apiserver that
// trusts Gantry's workload issuer, served over TLS, for the acme organization.
type kubeApp struct {
	*webtest.App
	exec *recordingExecutor
	cp   *kubecluster.ControlPlane
	kube *kubernetes.Clientset // the cluster's admin
}

func startKube(t *testing.T) kubeApp {
	t.Helper()
	tc := tofutest.Toolchain(t, "..", t.TempDir(), testLogWriter{t}, tofu.Kubernetes)
	issuer, err := web.ListenIssuerTLS("127.0.0.1:0")
	require.NoError(t, err)
	a := kubeApp{exec: &recordingExecutor{Executor: &tofurun.Process{Tofu: tc.Tofu, CLIConfig: tc.CLIConfig}}}
	a.App = webtest.StartWith(t, webtest.Options{IssuerTLS: issuer,
		Runner: tofurun.New(a.exec, t.TempDir(), &tofu.PluginCache{Mirror: tc.Mirror, Root: t.TempDir()})})
	a.cp = kubetargettest.Target(t.Context(), t, kubetarget.Trust{IssuerURL: issuer.URL, CAPEM: issuer.CAPEM, Audience: "kubernetes"},
		kubetarget.Grant{Organization: a.Orgs["acme"]})
	a.kube, err = a.cp.Client()
	require.NoError(t, err)
	return a
}

// setKubernetesTarget points environment envID at the private API server through the
// admin's edit form, and makes its changes need an approval.
func (a kubeApp) setKubernetesTarget(t *testing.T, admin *http.Client, envID string) {
	t.Helper()
	var env struct{ Name, Tier, Executor string }
	require.NoError(t, a.DB.Raw("SELECT name, tier, executor FROM environments WHERE id = ?", envID).Scan(&env).Error)
	resp := a.PostForm(t, admin, "/environments/"+envID, url.Values{"_csrf": {a.CSRF(t, admin)}, "name": {env.Name}, "tier": {env.Tier},
		"executor": {env.Executor}, "requires_approval": {"on"}, "target_kind": {"kubernetes"},
		"target_kubernetes_server": {a.cp.URL}, "target_kubernetes_ca": {string(a.cp.CAPEM)}})
	body := webtest.ReadBody(t, resp)
	require.Equal(t, http.StatusSeeOther, resp.StatusCode, body)
}

// phaseTokens are the workload tokens a run's plan, apply and verify commands were given.
func (a kubeApp) phaseTokens(t *testing.T, runID string) map[string]string {
	t.Helper()
	a.exec.mu.Lock()
	defer a.exec.mu.Unlock()
	out := map[string]string{}
	for _, c := range a.exec.calls {
		var cred struct{ RunID, Phase string }
		require.NoError(t, a.DB.Raw("SELECT run_id, phase FROM state_credentials WHERE id = ?", c.stateUser).Scan(&cred).Error)
		if cred.RunID == runID && c.cloudTk != "" {
			out[cred.Phase] = c.cloudTk
		}
	}
	return out
}

// claimsOf is a token's payload (its signature is the API server's business).
func claimsOf(t *testing.T, token string) map[string]any {
	t.Helper()
	parts := strings.Split(token, ".")
	require.Len(t, parts, 3)
	raw, err := base64.RawURLEncoding.DecodeString(parts[1])
	require.NoError(t, err)
	var c map[string]any
	require.NoError(t, json.Unmarshal(raw, &c))
	return c
}

// as is a client of the API server presenting token.
func (a kubeApp) as(t *testing.T, token string) *kubernetes.Clientset {
	t.Helper()
	c, err := kubernetes.NewForConfig(a.cp.TokenConfig(token))
	require.NoError(t, err)
	return c
}

func quota(name string) *corev1.ResourceQuota {
	return &corev1.ResourceQuota{ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: corev1.ResourceQuotaSpec{Hard: corev1.ResourceList{corev1.ResourcePods: resource.MustParse("3")}}}
}

// TestKubernetesTargetThroughThePortal (issue 38): a team namespace requested through the
// portal is planned by the real hashicorp/kubernetes provider with a read-scoped workload
// token the API server trusts (it cannot write: RBAC refuses it, and the API server's audit
// log names the session), approved, applied with a write-scoped one, verified, and
// destroyed. The apply's token carries what its approval covered: with it, a compromised
// runner could create in the namespace but is refused a DELETE by the admission policy.
// Another workspace's token cannot touch the namespace. No token is left in any file,
// plan, state, log, page, the database or the API server's audit log.
func TestKubernetesTargetThroughThePortal(t *testing.T) {
	t.Parallel()
	app := startKube(t)
	ctx := t.Context()
	admin := app.LoggedIn(t, "admin@acme.test")
	operator := app.LoggedIn(t, "operator@acme.test")
	owner := app.LoggedIn(t, "owner@acme.test")
	dev := app.OrgEnvironmentID(t, "acme", "development")
	app.setKubernetesTarget(t, admin, dev)
	request := func(workspace, name string, kind run.Kind) url.Values {
		return url.Values{"template": {"team-namespace"}, "environment": {dev}, "workspace": {workspace}, "kind": {string(kind)},
			"inputs.name": {name}, "inputs.group": {"team-" + name}}
	}

	// Planned with a read token: the plan shows what it would create, and that token
	// cannot create anything itself.
	first := waitForState(t, app.App, app.App.RequestRun(t, operator, request("payments-ns", "payments", run.KindApply)), run.PendingApproval)
	require.Equal(t, 4, first.PlanSummary.Create, first.StateReason)
	plan := app.phaseTokens(t, first.ID)["plan"]
	require.NotEmpty(t, plan, "the plan got a workload token")
	pc := claimsOf(t, plan)
	require.Equal(t, "kubernetes", pc["aud"])
	require.Equal(t, "read", pc["scope"])
	require.NotContains(t, pc, "gantry_approved")
	_, err := app.as(t, plan).CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "plan-writes",
		Labels: map[string]string{kubetarget.WorkspaceLabel: first.WorkspaceID}}}, metav1.CreateOptions{})
	require.True(t, apierrors.IsForbidden(err), "a plan's token cannot create: %v", err)
	events, err := app.cp.AuditEvents()
	require.NoError(t, err)
	refused := false
	for _, e := range events {
		refused = refused || (strings.HasSuffix(e.User.Username, ":run:"+first.ID+":phase:plan") && e.Verb == "create" && e.Code() == http.StatusForbidden)
	}
	require.True(t, refused, "the API server's audit log names the plan's session and its refused create")

	// Approved, applied with a write token: the namespace and what it holds exist, labelled
	// for their workspace.
	approve(t, app.App, admin, first)
	first = waitForState(t, app.App, first.ID, run.Succeeded)
	ns, err := app.kube.CoreV1().Namespaces().Get(ctx, "payments", metav1.GetOptions{})
	require.NoError(t, err)
	require.Equal(t, first.WorkspaceID, ns.Labels[kubetarget.WorkspaceLabel])
	quotas, err := app.kube.CoreV1().ResourceQuotas("payments").List(ctx, metav1.ListOptions{})
	require.NoError(t, err)
	require.Len(t, quotas.Items, 1)
	tokens := app.phaseTokens(t, first.ID)
	apply := tokens["apply"]
	ac := claimsOf(t, apply)
	require.Equal(t, "write", ac["scope"])
	require.Equal(t, []any{"create"}, ac["gantry_approved"], "the apply's token carries what its approval covered")
	require.Equal(t, "read", claimsOf(t, tokens["verify"])["scope"], "verified with a read token")

	// A compromised runner holding the apply's token: its creates work, its DELETE is
	// refused by the admission policy (nobody approved a delete).
	compromised := app.as(t, apply)
	_, err = compromised.CoreV1().ResourceQuotas("payments").Create(ctx, quota("extra"), metav1.CreateOptions{})
	require.NoError(t, err, "the approved kind of change goes through")
	err = compromised.CoreV1().Namespaces().Delete(ctx, "payments", metav1.DeleteOptions{})
	require.ErrorContains(t, err, "the approved plan contained no delete")
	err = compromised.CoreV1().ResourceQuotas("payments").Delete(ctx, "extra", metav1.DeleteOptions{})
	require.ErrorContains(t, err, "the approved plan contained no delete")
	require.NoError(t, app.kube.CoreV1().ResourceQuotas("payments").Delete(ctx, "extra", metav1.DeleteOptions{}))

	// Another workspace's namespace, applied alike: its apply token cannot touch payments.
	second := waitForState(t, app.App, app.App.RequestRun(t, operator, request("ledger-ns", "ledger", run.KindApply)), run.PendingApproval)
	approve(t, app.App, admin, second)
	second = waitForState(t, app.App, second.ID, run.Succeeded)
	other := app.as(t, app.phaseTokens(t, second.ID)["apply"])
	_, err = other.CoreV1().ResourceQuotas("payments").Create(ctx, quota("intruder"), metav1.CreateOptions{})
	require.Error(t, err, "another workspace's token cannot create in payments")
	_, err = other.CoreV1().ResourceQuotas("ledger").Create(ctx, quota("own"), metav1.CreateOptions{})
	require.NoError(t, err, "but can in its own namespace")

	// Destroyed: the destroy's approved plan deletes, so its apply may.
	destroy := waitForState(t, app.App, app.App.RequestRun(t, operator, request("payments-ns", "payments", run.KindDestroy)), run.PendingApproval)
	require.Equal(t, 4, destroy.PlanSummary.Delete)
	approve(t, app.App, owner, destroy)
	destroy = waitForState(t, app.App, destroy.ID, run.Succeeded)
	require.Equal(t, []any{"delete"}, claimsOf(t, app.phaseTokens(t, destroy.ID)["apply"])["gantry_approved"])
	bench.Eventually(t, "the namespace removed by the namespace controller", 30*time.Second, func() (bool, any) {
		_, err := app.kube.CoreV1().Namespaces().Get(ctx, "payments", metav1.GetOptions{})
		return apierrors.IsNotFound(err), err
	}, bench.Poll(500*time.Millisecond))

	// No token anywhere it must not be.
	runs := []run.Run{first, second, destroy}
	scan := &leakScanner{t: t, canaries: app.exec.canaries(t), seen: map[string]int{}}
	for _, f := range app.exec.files() {
		scan.blob("workdir", f.name, f.data)
	}
	scan.artifacts(app.App, runs)
	scan.liveLogs(app.App, runs)
	scan.pages(app.App, admin, adminPages(runs, dev))
	scan.pages(app.App, operator, operatorPages(runs))
	scan.blob("database", "pg_dump", pgDump(t, app.DSN))
	audit, err := os.ReadFile(app.cp.AuditLog())
	require.NoError(t, err)
	scan.blob("apiserver", "audit log", audit)
	for _, where := range []string{"workdir", "config_bundle", "plan_json", "apply_log", "state", "live_log", "page", "database", "apiserver"} {
		require.Positive(t, scan.seen[where], "nothing was scanned in %s: the check could not fail", where)
	}
}
