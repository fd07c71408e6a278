//go:build !fast

// Live: needs PostgreSQL (the workload issuer's keys), etcd and the pinned Kubernetes binary (a private control plane).

package kubetarget_test

import (
	"context"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"

	"gantry/bench"
	"gantry/models/db/dbtest"
	"gantry/models/identity"
	"gantry/models/keyring"
	"gantry/runner/kube/kubecluster"
	"gantry/runner/targets/kubetarget"
	"gantry/runner/targets/kubetarget/kubetargettest"
)

const audience = "kubernetes"

func TestMain(m *testing.M) { os.Exit(dbtest.Main(m)) }

// session is a Gantry phase's client on the target: what a compromised runner holding the
// phase's token could do with it directly.
type session struct {
	name   string // the username the API server gives it
	client *kubernetes.Clientset
}

// TestTargetHoldsGantrySessionsToTheirClaimsAndTheReview: a real workload issuer (ES256
// keys in PostgreSQL) served over https, and a private API server trusting it with
// kubetarget's authentication configuration, roles, bindings and admission policy.
//   - A plan's token (scope read) is the session its claims name, lists and gets, and may not
//     create: RBAC refuses it and the audit log names the session with the 403.
//   - An apply's token (scope write) whose approved plan had creates and updates but no delete
//     creates the workspace's namespace, quota, limit range and role binding (a team bound to
//     "edit") and updates the quota, and is refused a DELETE of either by the admission policy,
//     saying the approved plan contained no delete.
//   - Another workspace's apply token, even with deletes approved, can neither create in this
//     namespace, relabel it, nor delete it; nor create a namespace labelled for this workspace.
//   - An apply token whose approved plan had a delete deletes the quota and the namespace,
//     which the namespace controller then removes.
//   - An expired token and a token for another audience are 401.
func TestTargetHoldsGantrySessionsToTheirClaimsAndTheReview(t *testing.T) {
	ctx, cancel := bench.Context(context.Background(), 10*time.Minute)
	defer cancel()
	gdb := dbtest.New(t)
	keys, err := keyring.Parse(keyring.NewKeySpec("kek-test"))
	require.NoError(t, err)
	served := kubetargettest.ServeIssuer(t, func(url string) *identity.Issuer {
		return identity.NewIssuer(gdb, keys, url, identity.Options{})
	})
	trust := kubetarget.Trust{IssuerURL: served.URL, CAPEM: served.CAPEM, Audience: audience}
	began := time.Now()
	cp := kubetargettest.Target(ctx, t, trust, kubetarget.Grant{Organization: "org-1"})
	t.Logf("target ready in %s (control plane %s of it)", time.Since(began).Round(time.Millisecond), cp.Timings.ControllersReady)

	digest := "sha256:" + strings.Repeat("ab", 32)
	mint := func(iss *identity.Issuer, c identity.Claims) string {
		t.Helper()
		c.OrganizationID, c.EnvironmentID = "org-1", "env-1"
		if c.Audience == "" {
			c.Audience = audience
		}
		if c.Phase == identity.PhaseApply {
			c.PlanDigest, c.Lease = digest, 1
		}
		token, _, err := iss.Mint(ctx, c)
		require.NoError(t, err)
		return token
	}
	login := func(token string) session {
		t.Helper()
		// The API server fetches the issuer's keys in the background: a trusted token is
		// accepted within a moment, and one that never is fails here, not later.
		wait, cancel := bench.Context(ctx, time.Minute)
		defer cancel()
		user, err := cp.WaitAuthenticates(wait, token)
		require.NoError(t, err)
		client, err := kubernetes.NewForConfig(cp.TokenConfig(token))
		require.NoError(t, err)
		return session{name: user.Username, client: client}
	}
	plan := identity.Claims{WorkspaceID: "ws-1", RunID: "run-1", Phase: identity.PhasePlan}
	reader := login(mint(served.Issuer, plan))

	// Who the plan's session is: its claims, mapped.
	user, err := cp.WaitAuthenticates(ctx, mint(served.Issuer, plan))
	require.NoError(t, err)
	require.Equal(t, reader.name, user.Username)
	require.Equal(t, "gantry:org:org-1:env:env-1:ws:ws-1:run:run-1:phase:plan", user.Username)
	require.Subset(t, user.Groups, []string{"gantry:ws:ws-1:read", "gantry:org:org-1:read"})
	require.Equal(t, []string{"org-1"}, []string(user.Extra[kubetarget.ExtraOrganization]))
	require.Equal(t, []string{"env-1"}, []string(user.Extra[kubetarget.ExtraEnvironment]))
	require.Equal(t, []string{"ws-1"}, []string(user.Extra[kubetarget.ExtraWorkspace]))
	require.Equal(t, []string{"read"}, []string(user.Extra[kubetarget.ExtraScope]))
	require.NotContains(t, user.Extra, kubetarget.ExtraApproved, "a plan's token approves nothing")

	const ns = "team-a"
	namespace := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns, Labels: map[string]string{kubetarget.WorkspaceLabel: "ws-1"}}}

	// The plan reads, and may not write.
	_, err = reader.client.CoreV1().Namespaces().List(ctx, metav1.ListOptions{})
	require.NoError(t, err)
	_, err = reader.client.CoreV1().Namespaces().Get(ctx, ns, metav1.GetOptions{})
	require.True(t, apierrors.IsNotFound(err), "a read of what is not there yet: %v", err)
	_, err = reader.client.CoreV1().Namespaces().Create(ctx, namespace, metav1.CreateOptions{})
	require.True(t, apierrors.IsForbidden(err), "got %v", err)
	require.Contains(t, err.Error(), `User "`+reader.name+`" cannot create resource "namespaces"`)
	events, err := cp.AuditEvents()
	require.NoError(t, err)
	require.True(t, slices.ContainsFunc(events, func(e kubecluster.AuditEvent) bool {
		return e.User.Username == reader.name && e.Verb == "create" && e.Code() == 403 && e.ObjectRef != nil && e.ObjectRef.Resource == "namespaces"
	}), "the audit log names the plan's session with its refused create")

	// The apply of a plan approved with creates and updates, no delete.
	apply := identity.Claims{WorkspaceID: "ws-1", RunID: "run-1", Phase: identity.PhaseApply,
		Approved: identity.ApprovedClasses(4, 1, 0, 0)}
	writer := login(mint(served.Issuer, apply))
	require.Equal(t, "gantry:org:org-1:env:env-1:ws:ws-1:run:run-1:phase:apply", writer.name)
	createTeamNamespace(ctx, t, writer.client, namespace)
	_, err = writer.client.CoreV1().ResourceQuotas(ns).Patch(ctx, "quota", types.MergePatchType,
		[]byte(`{"spec":{"hard":{"pods":"20"}}}`), metav1.PatchOptions{})
	require.NoError(t, err, "an approved update")
	noDelete := "the approved plan contained no delete"
	err = writer.client.CoreV1().ResourceQuotas(ns).Delete(ctx, "quota", metav1.DeleteOptions{})
	requireRefused(t, err, noDelete+": DELETE of resourcequotas quota refused")
	err = writer.client.CoreV1().Namespaces().Delete(ctx, ns, metav1.DeleteOptions{})
	requireRefused(t, err, noDelete+": DELETE of namespaces team-a refused")
	events, err = cp.AuditEvents()
	require.NoError(t, err)
	require.True(t, slices.ContainsFunc(events, func(e kubecluster.AuditEvent) bool {
		return e.User.Username == writer.name && e.Verb == "delete" && e.Code() == 403 &&
			strings.Contains(e.Annotations["validation.policy.admission.k8s.io/validation_failure"], kubetarget.PolicyName)
	}), "the audit log names the apply's session and the policy that refused its delete")

	// Another workspace's apply, deletes approved, touches nothing of ws-1's.
	other := login(mint(served.Issuer, identity.Claims{WorkspaceID: "ws-2", RunID: "run-2", Phase: identity.PhaseApply,
		Approved: identity.ApprovedClasses(1, 1, 1, 1)}))
	_, err = other.client.CoreV1().LimitRanges(ns).Create(ctx, &corev1.LimitRange{ObjectMeta: metav1.ObjectMeta{Name: "intruder"}}, metav1.CreateOptions{})
	requireRefused(t, err, "namespace team-a does not belong to workspace ws-2")
	_, err = other.client.CoreV1().Namespaces().Patch(ctx, ns, types.MergePatchType,
		[]byte(`{"metadata":{"labels":{"`+kubetarget.WorkspaceLabel+`":"ws-2"}}}`), metav1.PatchOptions{})
	requireRefused(t, err, "namespace team-a does not belong to workspace ws-2")
	err = other.client.CoreV1().ResourceQuotas(ns).Delete(ctx, "quota", metav1.DeleteOptions{})
	requireRefused(t, err, "namespace team-a does not belong to workspace ws-2")
	err = other.client.CoreV1().Namespaces().Delete(ctx, ns, metav1.DeleteOptions{})
	requireRefused(t, err, "namespace team-a does not belong to workspace ws-2")
	_, err = other.client.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "team-b",
		Labels: map[string]string{kubetarget.WorkspaceLabel: "ws-1"}}}, metav1.CreateOptions{})
	requireRefused(t, err, "namespace team-b would not belong to workspace ws-2")
	// Nor does ws-1's own apply give its namespace away.
	_, err = writer.client.CoreV1().Namespaces().Patch(ctx, ns, types.MergePatchType,
		[]byte(`{"metadata":{"labels":{"`+kubetarget.WorkspaceLabel+`":"ws-2"}}}`), metav1.PatchOptions{})
	requireRefused(t, err, "namespace team-a would not belong to workspace ws-1")

	// Tokens the API server does not accept at all.
	expired := identity.NewIssuer(gdb, keys, served.URL, identity.Options{Now: func() time.Time { return time.Now().Add(-20 * time.Minute) }})
	wrongAudience := mint(served.Issuer, identity.Claims{WorkspaceID: "ws-1", RunID: "run-1", Phase: identity.PhasePlan, Audience: "sandbox"})
	for name, token := range map[string]string{"expired": mint(expired, plan), "wrong audience": wrongAudience} {
		client, err := kubernetes.NewForConfig(cp.TokenConfig(token))
		require.NoError(t, err)
		_, err = client.CoreV1().Namespaces().List(ctx, metav1.ListOptions{})
		require.True(t, apierrors.IsUnauthorized(err), "%s: got %v", name, err)
	}

	// The apply of a plan that deletes: the namespace goes, with what is in it.
	remover := login(mint(served.Issuer, identity.Claims{WorkspaceID: "ws-1", RunID: "run-3", Phase: identity.PhaseApply,
		Approved: identity.ApprovedClasses(0, 0, 0, 4)}))
	require.NoError(t, remover.client.CoreV1().ResourceQuotas(ns).Delete(ctx, "quota", metav1.DeleteOptions{}))
	admin, err := cp.Client()
	require.NoError(t, err)
	have, err := admin.CoreV1().Namespaces().Get(ctx, ns, metav1.GetOptions{})
	require.NoError(t, err)
	w, err := admin.CoreV1().Namespaces().Watch(ctx, metav1.ListOptions{FieldSelector: fields.OneTermEqualSelector("metadata.name", ns).String(),
		ResourceVersion: have.ResourceVersion})
	require.NoError(t, err)
	defer w.Stop()
	require.NoError(t, remover.client.CoreV1().Namespaces().Delete(ctx, ns, metav1.DeleteOptions{}))
	for e := range w.ResultChan() {
		if e.Type == watch.Deleted {
			break
		}
	}
	_, err = admin.CoreV1().Namespaces().Get(ctx, ns, metav1.GetOptions{})
	require.True(t, apierrors.IsNotFound(err), "the namespace is gone: %v", err)

	rss, err := cp.RSS()
	require.NoError(t, err)
	t.Logf("RSS after the test: etcd %d MiB, apiserver %d MiB, controller-manager %d MiB",
		rss["etcd"]>>20, rss["kube-apiserver"]>>20, rss["kube-controller-manager"]>>20)
}

// createTeamNamespace creates what the team namespace template manages: the namespace, a
// quota, a limit range and a role binding of a team to "edit".
func createTeamNamespace(ctx context.Context, t *testing.T, c *kubernetes.Clientset, ns *corev1.Namespace) {
	t.Helper()
	_, err := c.CoreV1().Namespaces().Create(ctx, ns, metav1.CreateOptions{})
	require.NoError(t, err)
	_, err = c.CoreV1().ResourceQuotas(ns.Name).Create(ctx, &corev1.ResourceQuota{ObjectMeta: metav1.ObjectMeta{Name: "quota"},
		Spec: corev1.ResourceQuotaSpec{Hard: corev1.ResourceList{corev1.ResourcePods: resource.MustParse("10"),
			corev1.ResourceRequestsCPU: resource.MustParse("2")}}}, metav1.CreateOptions{})
	require.NoError(t, err)
	_, err = c.CoreV1().LimitRanges(ns.Name).Create(ctx, &corev1.LimitRange{ObjectMeta: metav1.ObjectMeta{Name: "limits"},
		Spec: corev1.LimitRangeSpec{Limits: []corev1.LimitRangeItem{{Type: corev1.LimitTypeContainer,
			Default:        corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("200m")},
			DefaultRequest: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("100m")}}}}}, metav1.CreateOptions{})
	require.NoError(t, err)
	_, err = c.RbacV1().RoleBindings(ns.Name).Create(ctx, &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "team-edit"},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "edit"},
		Subjects: []rbacv1.Subject{{APIGroup: rbacv1.GroupName, Kind: rbacv1.GroupKind, Name: "team-a"}}}, metav1.CreateOptions{})
	require.NoError(t, err)
}

// requireRefused requires err to be the admission policy's refusal saying why.
func requireRefused(t *testing.T, err error, why string) {
	t.Helper()
	require.True(t, apierrors.IsForbidden(err), "got %v", err)
	require.Contains(t, err.Error(), "ValidatingAdmissionPolicy '"+kubetarget.PolicyName+"'")
	require.Contains(t, err.Error(), why)
}
