package kubetarget

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	admissionv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
)

// Objects decodes a YAML stream of Manifests into typed objects, refusing any kind Apply does
// not know.
func Objects(stream []byte) ([]runtime.Object, error) {
	r := utilyaml.NewYAMLReader(bufio.NewReader(bytes.NewReader(stream)))
	var out []runtime.Object
	for {
		doc, err := r.Read()
		if errors.Is(err, io.EOF) {
			return out, nil
		}
		if err != nil {
			return nil, err
		}
		if len(bytes.TrimSpace(stripComments(doc))) == 0 {
			continue
		}
		obj, _, err := scheme.Codecs.UniversalDeserializer().Decode(doc, nil, nil)
		if err != nil {
			return nil, fmt.Errorf("decoding %q: %w", firstLine(doc), err)
		}
		switch obj.(type) {
		case *rbacv1.ClusterRole, *rbacv1.ClusterRoleBinding, *admissionv1.ValidatingAdmissionPolicy, *admissionv1.ValidatingAdmissionPolicyBinding:
			out = append(out, obj)
		default:
			return nil, fmt.Errorf("%T is not an object of Gantry's trust", obj)
		}
	}
}

func stripComments(doc []byte) []byte {
	var b bytes.Buffer
	for line := range strings.Lines(string(doc)) {
		if !strings.HasPrefix(strings.TrimSpace(line), "#") {
			b.WriteString(line)
		}
	}
	return b.Bytes()
}

func firstLine(doc []byte) string {
	line, _, _ := strings.Cut(strings.TrimSpace(string(stripComments(doc))), "\n")
	return line
}

// Apply creates or updates the objects of Manifests(g) with cfg (a cluster administrator's
// client configuration) and waits until the admission policy is enforced: the API server
// loads a new policy in the background, and until it has, a Gantry session's writes would be
// let through unchecked.
func Apply(ctx context.Context, cfg *rest.Config, g Grant) error {
	stream, err := Manifests(g)
	if err != nil {
		return err
	}
	objs, err := Objects(stream)
	if err != nil {
		return err
	}
	client, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return err
	}
	for _, obj := range objs {
		if err := createOrUpdate(ctx, client, obj); err != nil {
			return err
		}
	}
	return waitEnforced(ctx, cfg)
}

// createOrUpdate writes one object, replacing what an earlier Apply left.
func createOrUpdate(ctx context.Context, c kubernetes.Interface, obj runtime.Object) error {
	var err error
	switch o := obj.(type) {
	case *rbacv1.ClusterRole:
		err = upsert(ctx, c.RbacV1().ClusterRoles(), o)
	case *rbacv1.ClusterRoleBinding:
		err = upsert(ctx, c.RbacV1().ClusterRoleBindings(), o)
	case *admissionv1.ValidatingAdmissionPolicy:
		err = upsert(ctx, c.AdmissionregistrationV1().ValidatingAdmissionPolicies(), o)
	case *admissionv1.ValidatingAdmissionPolicyBinding:
		err = upsert(ctx, c.AdmissionregistrationV1().ValidatingAdmissionPolicyBindings(), o)
	default:
		err = fmt.Errorf("%T is not an object of Gantry's trust", obj)
	}
	return err
}

// objectAPI is the part of a typed cluster-scoped client upsert uses.
type objectAPI[T metav1.Object] interface {
	Create(context.Context, T, metav1.CreateOptions) (T, error)
	Update(context.Context, T, metav1.UpdateOptions) (T, error)
	Get(context.Context, string, metav1.GetOptions) (T, error)
}

func upsert[T metav1.Object](ctx context.Context, api objectAPI[T], obj T) error {
	_, err := api.Create(ctx, obj, metav1.CreateOptions{})
	if !apierrors.IsAlreadyExists(err) {
		return err
	}
	have, err := api.Get(ctx, obj.GetName(), metav1.GetOptions{})
	if err != nil {
		return err
	}
	obj.SetResourceVersion(have.GetResourceVersion())
	_, err = api.Update(ctx, obj, metav1.UpdateOptions{})
	return err
}

// waitEnforced waits until the API server refuses, by the admission policy, a dry-run write
// that only the policy refuses: an unlabelled namespace created by an impersonated Gantry
// session that RBAC lets do anything (the group system:masters). Nothing is stored.
func waitEnforced(ctx context.Context, admin *rest.Config) error {
	probe := rest.CopyConfig(admin)
	probe.Impersonate = rest.ImpersonationConfig{UserName: UserPrefix + "probe", Groups: []string{"system:masters"},
		Extra: map[string][]string{ExtraWorkspace: {"probe"}}}
	client, err := kubernetes.NewForConfig(probe)
	if err != nil {
		return err
	}
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "gantry-policy-probe"}}
	for {
		_, err := client.CoreV1().Namespaces().Create(ctx, ns, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
		switch {
		case apierrors.IsForbidden(err) && strings.Contains(err.Error(), PolicyName):
			return nil
		case err != nil:
			return fmt.Errorf("probing the admission policy: %w", err)
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("waiting for the admission policy %s to be enforced: %w", PolicyName, ctx.Err())
		case <-time.After(100 * time.Millisecond):
		}
	}
}
