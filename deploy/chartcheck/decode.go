package chartcheck

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	policyv1 "k8s.io/api/policy/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/serializer/json"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
)

// Object is one rendered object with the template it came from.
type Object struct {
	Source string // "gantry/templates/deployment.yaml", from Helm's "# Source:" line
	Obj    runtime.Object
}

// Name is the object's kind, namespace and name, for messages.
func (o Object) Name() string {
	m, ok := o.Obj.(interface {
		GetName() string
		GetNamespace() string
	})
	if !ok {
		return o.Source
	}
	kind := o.Obj.GetObjectKind().GroupVersionKind().Kind
	if m.GetNamespace() != "" {
		return kind + " " + m.GetNamespace() + "/" + m.GetName()
	}
	return kind + " " + m.GetName()
}

// newScheme knows the API groups the chart may render and nothing else: a kind outside
// them is an error, as is an API version the pinned Kubernetes does not serve.
func newScheme() (*runtime.Scheme, error) {
	s := runtime.NewScheme()
	for _, add := range []func(*runtime.Scheme) error{corev1.AddToScheme, appsv1.AddToScheme, policyv1.AddToScheme,
		rbacv1.AddToScheme, networkingv1.AddToScheme, batchv1.AddToScheme} {
		if err := add(s); err != nil {
			return nil, err
		}
	}
	return s, nil
}

// Decode splits a rendered manifest into its documents and decodes each strictly into
// the pinned k8s.io/api type of its apiVersion and kind: an unknown field, a field given
// twice or a value of the wrong type is an error naming the object and the field, the
// way the API server's strict field validation answers.
func Decode(manifest []byte) ([]Object, error) {
	scheme, err := newScheme()
	if err != nil {
		return nil, err
	}
	strict := json.NewSerializerWithOptions(json.DefaultMetaFactory, scheme, scheme,
		json.SerializerOptions{Yaml: true, Strict: true})
	reader := utilyaml.NewYAMLReader(bufio.NewReader(bytes.NewReader(manifest)))
	var (
		out  []Object
		errs []error
	)
	for {
		doc, err := reader.Read()
		if errors.Is(err, io.EOF) {
			break
		} else if err != nil {
			return nil, fmt.Errorf("splitting the manifest: %w", err)
		}
		source := sourceOf(doc)
		if isEmpty(doc) {
			continue
		}
		obj, _, err := strict.Decode(doc, nil, nil)
		if err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", source, err))
			continue
		}
		out = append(out, Object{Source: source, Obj: obj})
	}
	return out, errors.Join(errs...)
}

// sourceOf reads the template name from Helm's "# Source: <chart>/templates/<file>" line.
func sourceOf(doc []byte) string {
	for _, line := range strings.Split(string(doc), "\n") {
		if s, ok := strings.CutPrefix(strings.TrimSpace(line), "# Source: "); ok {
			return s
		}
	}
	return "(no source line)"
}

// isEmpty: a document of comments and blank lines only (a template that rendered nothing).
func isEmpty(doc []byte) bool {
	for _, line := range strings.Split(string(doc), "\n") {
		if l := strings.TrimSpace(line); l != "" && l != "---" && !strings.HasPrefix(l, "#") {
			return false
		}
	}
	return true
}
