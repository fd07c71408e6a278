package chartcheck

// The checks of what the chart grants and allows the Kubernetes executor's runner pods:
// the Role, its binding, and the NetworkPolicy that closes them.

import (
	"errors"
	"fmt"
	"maps"
	"slices"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
)

// RunnerRules are the one set of permissions the Kubernetes executor gets, in the runner
// namespace only, each for a call runner/kube makes: Jobs created suspended and resumed
// (patch), read, listed and deleted (a replica's leftovers); the phase's Secret created,
// read, listed and deleted; the pods watched and their logs followed. The chart's Role must
// grant exactly these.
var RunnerRules = map[string][]string{
	"batch/jobs": {"create", "delete", "get", "list", "patch"},
	"/secrets":   {"create", "delete", "get", "list"},
	"/pods":      {"get", "list", "watch"},
	"/pods/log":  {"get"},
}

// checkRBAC: the portal's token is mounted only with the Kubernetes executor, whose Role
// lives in one namespace, grants exactly RunnerRules and is bound to the portal's
// ServiceAccount alone.
func checkRBAC(r Rendered, d *appsv1.Deployment, namespace string) []error {
	var errs []error
	fail := func(format string, args ...any) { errs = append(errs, fmt.Errorf(format, args...)) }
	spec := d.Spec.Template.Spec
	sa := spec.ServiceAccountName
	if !slices.ContainsFunc(r.ServiceAccounts, func(s *corev1.ServiceAccount) bool { return s.Name == sa }) {
		fail("Deployment %s: runs as ServiceAccount %q, which the chart does not render", d.Name, sa)
	}
	executor := len(r.Roles) > 0
	if spec.AutomountServiceAccountToken == nil || *spec.AutomountServiceAccountToken != executor {
		fail("Deployment %s: automountServiceAccountToken must be set, and true only with the Kubernetes executor's Role (Role rendered: %v)", d.Name, executor)
	}
	if !executor {
		if len(r.RoleBindings) > 0 {
			fail("a RoleBinding without the executor's Role")
		}
		return errs
	}
	if len(r.Roles) != 1 || len(r.RoleBindings) != 1 {
		fail("want one Role and one RoleBinding for the runners, got %d and %d", len(r.Roles), len(r.RoleBindings))
		return errs
	}
	role, binding := r.Roles[0], r.RoleBindings[0]
	if role.Namespace == "" {
		fail("Role %s: no namespace: it must be confined to the runner namespace", role.Name)
	}
	got := map[string][]string{}
	for _, rule := range role.Rules {
		if len(rule.ResourceNames) > 0 || len(rule.NonResourceURLs) > 0 {
			fail("Role %s: a rule with resourceNames or nonResourceURLs: %+v", role.Name, rule)
		}
		for _, g := range rule.APIGroups {
			for _, res := range rule.Resources {
				got[g+"/"+res] = append(got[g+"/"+res], rule.Verbs...)
			}
		}
	}
	for k, v := range got {
		slices.Sort(v)
		got[k] = slices.Compact(v)
	}
	if !maps.EqualFunc(got, RunnerRules, slices.Equal) {
		fail("Role %s grants %v, want exactly %v", role.Name, got, RunnerRules)
	}
	if binding.Namespace != role.Namespace {
		fail("RoleBinding %s is in namespace %q, its Role in %q", binding.Name, binding.Namespace, role.Namespace)
	}
	if binding.RoleRef != (rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: role.Name}) {
		fail("RoleBinding %s: roleRef %+v, want the Role %s", binding.Name, binding.RoleRef, role.Name)
	}
	want := []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: sa, Namespace: namespace}}
	if !slices.Equal(binding.Subjects, want) {
		fail("RoleBinding %s: subjects %+v, want only the portal's ServiceAccount %s/%s", binding.Name, binding.Subjects, namespace, sa)
	}
	return errs
}

// checkRunnerPolicy: with the executor, the runner namespace has a NetworkPolicy that
// selects runner pods, lets nothing in and lets out only to named peers on named ports;
// its portal rule selects the portal's pods.
func checkRunnerPolicy(r Rendered, d *appsv1.Deployment, namespace string) []error {
	if len(r.Roles) == 0 {
		if len(r.NetworkPolicies) > 0 {
			return []error{errors.New("a runner NetworkPolicy without the Kubernetes executor")}
		}
		return nil
	}
	if len(r.NetworkPolicies) != 1 {
		return []error{fmt.Errorf("want one NetworkPolicy for the runner pods, got %d", len(r.NetworkPolicies))}
	}
	var errs []error
	np := r.NetworkPolicies[0]
	fail := func(format string, args ...any) {
		errs = append(errs, fmt.Errorf("NetworkPolicy %s: "+format, append([]any{np.Name}, args...)...))
	}
	if np.Namespace != r.Roles[0].Namespace {
		fail("in namespace %q, the runners are in %q", np.Namespace, r.Roles[0].Namespace)
	}
	if sel, err := metav1.LabelSelectorAsSelector(&np.Spec.PodSelector); err != nil || sel.Empty() {
		fail("podSelector must name the runner pods' labels")
	}
	if !slices.Equal(np.Spec.PolicyTypes, []networkingv1.PolicyType{networkingv1.PolicyTypeIngress, networkingv1.PolicyTypeEgress}) {
		fail("policyTypes %v, want [Ingress Egress]", np.Spec.PolicyTypes)
	}
	if len(np.Spec.Ingress) > 0 {
		fail("runner pods take no connections, yet %d ingress rules", len(np.Spec.Ingress))
	}
	portal := false
	pods := labels.Set(d.Spec.Template.Labels)
	declared := map[int32]bool{}
	for _, p := range d.Spec.Template.Spec.Containers[0].Ports {
		declared[p.ContainerPort] = true
	}
	for i, rule := range np.Spec.Egress {
		if len(rule.To) == 0 {
			fail("egress rule %d has no peers: it allows every destination", i)
		}
		if len(rule.Ports) == 0 {
			fail("egress rule %d has no ports: it allows every port", i)
		}
		for _, peer := range rule.To {
			if peer.PodSelector == nil || peer.NamespaceSelector == nil {
				if peer.IPBlock == nil {
					fail("egress rule %d: a peer needs both a namespace and a pod selector, or an ipBlock", i)
				}
				continue
			}
			s, err := metav1.LabelSelectorAsSelector(peer.PodSelector)
			ns, nerr := metav1.LabelSelectorAsSelector(peer.NamespaceSelector)
			if err != nil || nerr != nil || s.Empty() || ns.Empty() {
				fail("egress rule %d: an empty selector allows every pod", i)
				continue
			}
			if s.Matches(pods) && ns.Matches(labels.Set{"kubernetes.io/metadata.name": namespace}) {
				portal = true
				for _, p := range rule.Ports {
					if p.Port == nil || !declared[p.Port.IntVal] {
						fail("egress rule %d reaches the portal's pods on port %v, which the portal does not listen on (%v)", i, p.Port, declared)
					}
				}
			}
		}
	}
	if !portal {
		fail("no egress rule reaches the portal's pods in namespace %s", namespace)
	}
	return errs
}
