package chartcheck

import (
	"errors"
	"fmt"
	"maps"
	"slices"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	policyv1 "k8s.io/api/policy/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/validation"
)

// Rendered is a rendered chart's objects by kind, as the checks read them.
type Rendered struct {
	Deployments     []*appsv1.Deployment
	Services        []*corev1.Service
	PDBs            []*policyv1.PodDisruptionBudget
	Secrets         []*corev1.Secret
	ServiceAccounts []*corev1.ServiceAccount
	Namespaces      []*corev1.Namespace
	Roles           []*rbacv1.Role
	RoleBindings    []*rbacv1.RoleBinding
	NetworkPolicies []*networkingv1.NetworkPolicy
	Others          []Object // anything else: the checks refuse it (a ClusterRole, say)
}

// Sort files the objects by kind.
func Sort(objs []Object) Rendered {
	var r Rendered
	for _, o := range objs {
		switch v := o.Obj.(type) {
		case *appsv1.Deployment:
			r.Deployments = append(r.Deployments, v)
		case *corev1.Service:
			r.Services = append(r.Services, v)
		case *policyv1.PodDisruptionBudget:
			r.PDBs = append(r.PDBs, v)
		case *corev1.Secret:
			r.Secrets = append(r.Secrets, v)
		case *corev1.ServiceAccount:
			r.ServiceAccounts = append(r.ServiceAccounts, v)
		case *corev1.Namespace:
			r.Namespaces = append(r.Namespaces, v)
		case *rbacv1.Role:
			r.Roles = append(r.Roles, v)
		case *rbacv1.RoleBinding:
			r.RoleBindings = append(r.RoleBindings, v)
		case *networkingv1.NetworkPolicy:
			r.NetworkPolicies = append(r.NetworkPolicies, v)
		default:
			r.Others = append(r.Others, o)
		}
	}
	return r
}

// Check holds the rendered chart to Gantry's rules and returns every breach (nil: none).
// namespace is the release's namespace.
func Check(objs []Object, namespace string) error {
	r := Sort(objs)
	var errs []error
	fail := func(format string, args ...any) { errs = append(errs, fmt.Errorf(format, args...)) }
	for _, o := range objs {
		errs = append(errs, checkMeta(o)...)
	}
	for _, o := range r.Others {
		fail("%s (%s): the chart renders no such kind (a ClusterRole or ClusterRoleBinding would reach past the runner namespace)", o.Name(), o.Source)
	}
	if len(r.Deployments) != 1 {
		fail("want exactly one Deployment (the portal), got %d", len(r.Deployments))
		return errors.Join(errs...)
	}
	d := r.Deployments[0]
	errs = append(errs, checkDeployment(d)...)
	errs = append(errs, checkSelection(r, d)...)
	errs = append(errs, checkSecretRefs(r, d)...)
	errs = append(errs, checkRBAC(r, d, namespace)...)
	errs = append(errs, checkRunnerPolicy(r, d, namespace)...)
	return errors.Join(errs...)
}

// checkMeta: names and labels the API server would accept.
func checkMeta(o Object) []error {
	m, ok := o.Obj.(metav1.Object)
	if !ok {
		return []error{fmt.Errorf("%s: not an object with metadata", o.Source)}
	}
	var errs []error
	for _, msg := range validation.IsDNS1123Subdomain(m.GetName()) {
		errs = append(errs, fmt.Errorf("%s: name %q: %s", o.Name(), m.GetName(), msg))
	}
	errs = append(errs, checkLabels(o.Name(), m.GetLabels())...)
	return errs
}

func checkLabels(where string, l map[string]string) []error {
	var errs []error
	for k, v := range l {
		for _, msg := range validation.IsQualifiedName(k) {
			errs = append(errs, fmt.Errorf("%s: label key %q: %s", where, k, msg))
		}
		for _, msg := range validation.IsValidLabelValue(v) {
			errs = append(errs, fmt.Errorf("%s: label %s=%q: %s", where, k, v, msg))
		}
	}
	return errs
}

// checkDeployment: replicas, probes, resources and the restricted security context.
func checkDeployment(d *appsv1.Deployment) []error {
	var errs []error
	fail := func(format string, args ...any) {
		errs = append(errs, fmt.Errorf("Deployment %s: "+format, append([]any{d.Name}, args...)...))
	}
	if d.Spec.Replicas == nil || *d.Spec.Replicas < 2 {
		fail("replicas must be set and at least 2 (one replica is down during every drain and upgrade)")
	}
	spec := d.Spec.Template.Spec
	errs = append(errs, checkLabels("Deployment "+d.Name+" pod template", d.Spec.Template.Labels)...)
	psc := spec.SecurityContext
	if psc == nil || psc.RunAsNonRoot == nil || !*psc.RunAsNonRoot {
		fail("the pod's securityContext must set runAsNonRoot: true")
	}
	if psc == nil || psc.SeccompProfile == nil || psc.SeccompProfile.Type != corev1.SeccompProfileTypeRuntimeDefault {
		fail("the pod's securityContext must set seccompProfile RuntimeDefault")
	}
	if len(spec.Containers) == 0 {
		fail("no containers")
		return errs
	}
	for _, c := range slices.Concat(spec.InitContainers, spec.Containers) {
		for _, e := range checkContainer(c) {
			fail("container %s: %v", c.Name, e)
		}
	}
	portal := spec.Containers[0]
	ports := map[string]bool{}
	for _, p := range portal.Ports {
		ports[p.Name] = true
		for _, msg := range validation.IsValidPortName(p.Name) {
			fail("container %s: port name %q: %s", portal.Name, p.Name, msg)
		}
	}
	for _, p := range []struct {
		name  string
		probe *corev1.Probe
		path  string
	}{{"livenessProbe", portal.LivenessProbe, "/healthz"}, {"readinessProbe", portal.ReadinessProbe, "/readyz"}} {
		switch {
		case p.probe == nil || p.probe.HTTPGet == nil:
			fail("container %s: %s must be an httpGet of %s", portal.Name, p.name, p.path)
		case p.probe.HTTPGet.Path != p.path:
			fail("container %s: %s asks %s, want %s", portal.Name, p.name, p.probe.HTTPGet.Path, p.path)
		case p.probe.HTTPGet.Port.StrVal != "" && !ports[p.probe.HTTPGet.Port.StrVal]:
			fail("container %s: %s names port %q, which the container does not declare", portal.Name, p.name, p.probe.HTTPGet.Port.StrVal)
		}
	}
	return errs
}

// checkContainer: the restricted Pod Security Standard, a read-only root and resources.
func checkContainer(c corev1.Container) []error {
	var errs []error
	fail := func(format string, args ...any) { errs = append(errs, fmt.Errorf(format, args...)) }
	sc := c.SecurityContext
	if sc == nil {
		return []error{errors.New("no securityContext")}
	}
	if sc.RunAsNonRoot == nil || !*sc.RunAsNonRoot {
		fail("runAsNonRoot must be true")
	}
	if sc.RunAsUser != nil && *sc.RunAsUser == 0 {
		fail("runAsUser must not be 0")
	}
	if sc.ReadOnlyRootFilesystem == nil || !*sc.ReadOnlyRootFilesystem {
		fail("readOnlyRootFilesystem must be true")
	}
	if sc.AllowPrivilegeEscalation == nil || *sc.AllowPrivilegeEscalation {
		fail("allowPrivilegeEscalation must be false")
	}
	if sc.Privileged != nil && *sc.Privileged {
		fail("must not be privileged")
	}
	if sc.Capabilities == nil || !slices.Equal(sc.Capabilities.Drop, []corev1.Capability{"ALL"}) || len(sc.Capabilities.Add) > 0 {
		fail("capabilities must drop ALL and add none")
	}
	if sc.SeccompProfile == nil || sc.SeccompProfile.Type != corev1.SeccompProfileTypeRuntimeDefault {
		fail("seccompProfile must be RuntimeDefault")
	}
	for _, r := range []corev1.ResourceName{corev1.ResourceCPU, corev1.ResourceMemory} {
		if _, ok := c.Resources.Requests[r]; !ok {
			fail("resources.requests.%s is missing", r)
		}
	}
	if _, ok := c.Resources.Limits[corev1.ResourceMemory]; !ok {
		fail("resources.limits.memory is missing")
	}
	for _, e := range c.Env {
		for _, msg := range validation.IsEnvVarName(e.Name) {
			fail("env %q: %s", e.Name, msg)
		}
	}
	return errs
}

// checkSelection: the Deployment, its Service and its PodDisruptionBudget all select
// the portal's pods, and the budget can be met while a pod is drained.
func checkSelection(r Rendered, d *appsv1.Deployment) []error {
	var errs []error
	pods := labels.Set(d.Spec.Template.Labels)
	selects := func(what string, sel *metav1.LabelSelector) {
		s, err := metav1.LabelSelectorAsSelector(sel)
		switch {
		case err != nil:
			errs = append(errs, fmt.Errorf("%s: selector: %w", what, err))
		case sel == nil || s.Empty():
			errs = append(errs, fmt.Errorf("%s: an empty selector selects every pod in the namespace", what))
		case !s.Matches(pods):
			errs = append(errs, fmt.Errorf("%s: selector %s does not select the portal's pods (labels %v)", what, s, pods))
		}
	}
	selects("Deployment "+d.Name, d.Spec.Selector)
	if len(r.Services) == 0 {
		errs = append(errs, errors.New("no Service for the portal"))
	}
	for _, s := range r.Services {
		selects("Service "+s.Name, &metav1.LabelSelector{MatchLabels: s.Spec.Selector})
	}
	if len(r.PDBs) != 1 {
		errs = append(errs, fmt.Errorf("want one PodDisruptionBudget, got %d", len(r.PDBs)))
	}
	for _, p := range r.PDBs {
		selects("PodDisruptionBudget "+p.Name, p.Spec.Selector)
		switch {
		case p.Spec.MinAvailable == nil && p.Spec.MaxUnavailable == nil:
			errs = append(errs, fmt.Errorf("PodDisruptionBudget %s: neither minAvailable nor maxUnavailable", p.Name))
		case p.Spec.MinAvailable != nil && p.Spec.MinAvailable.IntVal >= *d.Spec.Replicas:
			// A budget as large as the Deployment blocks every drain for good.
			errs = append(errs, fmt.Errorf("PodDisruptionBudget %s: minAvailable %d leaves no pod to evict of %d replicas", p.Name, p.Spec.MinAvailable.IntVal, *d.Spec.Replicas))
		}
	}
	return errs
}

// checkSecretRefs: every Secret key the pods read exists in the Secret the chart renders
// (a Secret the operator brings, existingSecret, is not rendered: its references are
// reported by ExternalSecretRefs instead).
func checkSecretRefs(r Rendered, d *appsv1.Deployment) []error {
	var errs []error
	rendered := map[string]*corev1.Secret{}
	for _, s := range r.Secrets {
		rendered[s.Name] = s
	}
	for _, ref := range SecretRefs(d) {
		s, ok := rendered[ref.Name]
		if !ok {
			continue
		}
		_, inData := s.Data[ref.Key]
		_, inString := s.StringData[ref.Key]
		if !inData && !inString {
			errs = append(errs, fmt.Errorf("Deployment %s: container %s reads key %q of Secret %s, which has keys %v", d.Name, ref.Container, ref.Key, s.Name,
				slices.Sorted(maps.Keys(mergeKeys(s)))))
		}
	}
	return errs
}

// SecretRef is one Secret key a container reads.
type SecretRef struct{ Container, Env, Name, Key string }

// SecretRefs lists the Secret keys the Deployment's containers read.
func SecretRefs(d *appsv1.Deployment) []SecretRef {
	var out []SecretRef
	for _, c := range slices.Concat(d.Spec.Template.Spec.InitContainers, d.Spec.Template.Spec.Containers) {
		for _, e := range c.Env {
			if e.ValueFrom != nil && e.ValueFrom.SecretKeyRef != nil {
				out = append(out, SecretRef{Container: c.Name, Env: e.Name, Name: e.ValueFrom.SecretKeyRef.Name, Key: e.ValueFrom.SecretKeyRef.Key})
			}
		}
	}
	return out
}

func mergeKeys(s *corev1.Secret) map[string]bool {
	keys := map[string]bool{}
	for k := range s.Data {
		keys[k] = true
	}
	for k := range s.StringData {
		keys[k] = true
	}
	return keys
}
