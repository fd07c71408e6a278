package chartcheck

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
)

const (
	release   = "gantry"
	namespace = "gantry"
)

// repoRoot is the checkout this package lives in.
func repoRoot(t testing.TB) string {
	t.Helper()
	root, err := filepath.Abs(filepath.Join("..", ".."))
	require.NoError(t, err)
	return root
}

func chartDir(t testing.TB) string { return filepath.Join(repoRoot(t), "deploy", "helm", "gantry") }

// helm builds (once, cached in bin/) and returns the pinned Helm.
func helm(t testing.TB) string {
	t.Helper()
	var log bytes.Buffer
	path, err := EnsureHelm(t.Context(), repoRoot(t), filepath.Join(repoRoot(t), "bin"), &log)
	require.NoError(t, err, "building the pinned Helm from tools/helm (needs Go and the module proxy or a warm module cache):\n%s", log.String())
	return path
}

// renderSet renders the chart in dir with the values files of its ci/ folder named.
func renderSet(t testing.TB, dir string, sets ...string) ([]byte, error) {
	t.Helper()
	var files []string
	for _, s := range sets {
		files = append(files, filepath.Join(chartDir(t), "ci", s))
	}
	return Render(context.WithoutCancel(t.Context()), helm(t), dir, release, namespace, files...)
}

// TestChartRendersValid renders the chart with each values set of ci/ and holds every
// object to the pinned Kubernetes types (strictly) and to Check, then asserts what each
// set is for.
func TestChartRendersValid(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		set      string
		replicas int32
		check    func(t *testing.T, r Rendered)
	}{
		{"default-values.yaml", 2, func(t *testing.T, r Rendered) {
			require.Len(t, r.Secrets, 1, "the chart makes the Secret from values")
			require.Empty(t, r.Roles, "no executor, no RBAC")
			require.False(t, *r.Deployments[0].Spec.Template.Spec.AutomountServiceAccountToken)
			for _, ref := range SecretRefs(r.Deployments[0]) {
				require.Equal(t, r.Secrets[0].Name, ref.Name)
			}
			require.Len(t, r.Deployments[0].Spec.Template.Spec.InitContainers, 1, "migrations run in an init container")
			require.Equal(t, []string{"migrate"}, r.Deployments[0].Spec.Template.Spec.InitContainers[0].Args)
			require.Equal(t, "false", env(r.Deployments[0], "GANTRY_MIGRATE"), "the portal does not migrate again")
		}},
		{"existing-secret-values.yaml", 2, func(t *testing.T, r Rendered) {
			require.Empty(t, r.Secrets, "the operator's Secret is used, none is made")
			keys := map[string]string{}
			for _, ref := range SecretRefs(r.Deployments[0]) {
				require.Equal(t, "gantry-config", ref.Name)
				keys[ref.Env] = ref.Key
			}
			require.Equal(t, map[string]string{"GANTRY_DATABASE_URL": "database-url", "GANTRY_OIDC_ISSUER": "oidc-issuer",
				"GANTRY_OIDC_CLIENT_ID": "oidc-client-id", "GANTRY_OIDC_CLIENT_SECRET": "oidc-client-secret", "GANTRY_KEYS": "keys"}, keys,
				"the keys docs/kubernetes.md lists")
		}},
		{"replicas3-kubernetes-values.yaml", 3, func(t *testing.T, r Rendered) {
			require.Len(t, r.Roles, 1)
			require.Equal(t, "gantry-runners", r.Roles[0].Namespace)
			require.True(t, *r.Deployments[0].Spec.Template.Spec.AutomountServiceAccountToken, "the executor needs the API")
			require.Len(t, r.Namespaces, 1)
			require.Equal(t, "restricted", r.Namespaces[0].Labels["pod-security.kubernetes.io/enforce"])
			np := r.NetworkPolicies[0]
			require.Equal(t, "gantry-runners", np.Namespace)
			require.Len(t, np.Spec.Egress, 3, "portal, cloud, DNS")
			require.Equal(t, "203.0.113.0/24", np.Spec.Egress[1].To[0].IPBlock.CIDR)
			require.Equal(t, "tofu/kubernetes", env(r.Deployments[0], "GANTRY_RUNNER"))
		}},
	} {
		t.Run(tc.set, func(t *testing.T) {
			t.Parallel()
			manifest, err := renderSet(t, chartDir(t), tc.set)
			require.NoError(t, err)
			objs, err := Decode(manifest)
			require.NoError(t, err, "strict decoding against k8s.io/api")
			require.NoError(t, Check(objs, namespace))
			r := Sort(objs)
			require.Equal(t, tc.replicas, *r.Deployments[0].Spec.Replicas)
			tc.check(t, r)
		})
	}
}

func env(d *appsv1.Deployment, name string) string {
	for _, e := range d.Spec.Template.Spec.Containers[0].Env {
		if e.Name == name {
			return e.Value
		}
	}
	return ""
}

// TestChartLint: `helm lint --strict` finds nothing with any values set.
func TestChartLint(t *testing.T) {
	t.Parallel()
	sets, err := filepath.Glob(filepath.Join(chartDir(t), "ci", "*.yaml"))
	require.NoError(t, err)
	require.Len(t, sets, 3)
	for _, set := range sets {
		cmd := exec.CommandContext(t.Context(), helm(t), "lint", "--strict", chartDir(t), "--values", set)
		cmd.Env = helmEnv(t.TempDir())
		out, err := cmd.CombinedOutput()
		require.NoError(t, err, "helm lint with %s:\n%s", filepath.Base(set), out)
		require.Contains(t, string(out), "0 chart(s) failed")
	}
}

// TestChartRequiresSettings: without the values nobody can guess, rendering stops with a
// message naming them.
func TestChartRequiresSettings(t *testing.T) {
	t.Parallel()
	for values, want := range map[string]string{
		"": "secret.databaseURL (or secret.existingSecret) is required",
		"secret: {existingSecret: gantry-config}":                                                      "baseURL is required",
		"baseURL: https://g.example\nsecret: {databaseURL: postgres://x/y}":                            "secret.oidcIssuer (or secret.existingSecret) is required",
		"baseURL: https://g.example\nsecret: {existingSecret: c}\nkubernetesExecutor: {enabled: true}": "kubernetesExecutor.runnerImage is required",
		"baseURL: https://g.example\nsecret: {existingSecret: c}\nmigrations: {mode: sometimes}":       `migrations.mode "sometimes": want initContainer, serve or external`,
	} {
		file := filepath.Join(t.TempDir(), "v.yaml")
		require.NoError(t, os.WriteFile(file, []byte(values), 0o600))
		_, err := Render(t.Context(), helm(t), chartDir(t), release, namespace, file)
		require.ErrorContains(t, err, want, "values %q", values)
	}
}

// TestPlantedBadManifestIsCaught: the validation is only worth having if a planted fault
// makes it fire. Each case copies the chart, plants one fault into a template and
// expects the strict decoding or Check to name it.
func TestPlantedBadManifestIsCaught(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name, file, from, to, want string
		set                        string
	}{
		{"misspelt field", "deployment.yaml", "readinessProbe:", "readinesProbe:",
			`unknown field "spec.template.spec.containers[0].readinesProbe"`, "default-values.yaml"},
		{"field of the wrong type", "service.yaml", "port: {{ .Values.service.port }}", "port: eighty",
			"int32", "default-values.yaml"},
		{"writable root filesystem", "_helpers.tpl", "readOnlyRootFilesystem: true", "readOnlyRootFilesystem: false",
			"readOnlyRootFilesystem must be true", "default-values.yaml"},
		{"capabilities kept", "_helpers.tpl", `drop: ["ALL"]`, `drop: ["NET_RAW"]`,
			"capabilities must drop ALL", "default-values.yaml"},
		{"no readiness probe on /readyz", "deployment.yaml", "path: /readyz", "path: /healthz",
			"readinessProbe asks /healthz, want /readyz", "default-values.yaml"},
		{"PodDisruptionBudget selecting other pods", "pdb.yaml", `{{- include "gantry.selectorLabels" . | nindent 6 }}`, "app: something-else",
			"does not select the portal's pods", "default-values.yaml"},
		{"Secret key missing", "secret.yaml", "  keys: {{", "  kek: {{",
			`reads key "keys" of Secret gantry`, "default-values.yaml"},
		{"token without the executor", "deployment.yaml", "automountServiceAccountToken: {{ .Values.kubernetesExecutor.enabled }}", "automountServiceAccountToken: true",
			"automountServiceAccountToken must be set, and true only with", "default-values.yaml"},
		{"a verb too many", "rbac.yaml", `verbs: ["create", "get", "list", "delete"]`, `verbs: ["create", "get", "list", "delete", "update"]`,
			"grants", "replicas3-kubernetes-values.yaml"},
		{"a ClusterRole", "rbac.yaml", "kind: Role\nmetadata:", "kind: ClusterRole\nmetadata:",
			"the chart renders no such kind", "replicas3-kubernetes-values.yaml"},
		{"egress to everywhere", "networkpolicy.yaml",
			"    - to:\n        - namespaceSelector:\n            matchLabels:\n              kubernetes.io/metadata.name: kube-system\n          podSelector:\n            matchLabels:\n              k8s-app: kube-dns\n      ports:\n",
			"    - ports:\n", "has no peers: it allows every destination", "replicas3-kubernetes-values.yaml"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			dir := copyChart(t)
			tmpl := filepath.Join(dir, "templates", tc.file)
			src, err := os.ReadFile(tmpl)
			require.NoError(t, err)
			require.Contains(t, string(src), tc.from, "the plant's anchor is gone from %s: update this test", tc.file)
			require.NoError(t, os.WriteFile(tmpl, []byte(strings.Replace(string(src), tc.from, tc.to, 1)), 0o644))

			manifest, err := renderSet(t, dir, tc.set)
			require.NoError(t, err, "the planted chart still renders: the fault is in what it renders")
			objs, err := Decode(manifest)
			if err == nil {
				err = Check(objs, namespace)
			}
			require.Error(t, err, "the planted fault was not caught")
			require.ErrorContains(t, err, tc.want)
			t.Logf("caught: %v", err)
		})
	}
}

// copyChart copies the chart into a temporary directory (a plant never touches the tree).
func copyChart(t *testing.T) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "gantry")
	require.NoError(t, os.CopyFS(dir, os.DirFS(chartDir(t))))
	return dir
}
