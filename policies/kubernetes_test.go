package policies

import (
	"context"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// The rules reach the team namespace template's resources: deleting the namespace in an
// apply is refused (it is irreversible), a destroy run may; a role binding to a group of
// Kubernetes itself, or of an admin role, fails namespace_role_bindings.
func TestTeamNamespaceViolations(t *testing.T) {
	b := builtin(t)
	tmpl := templateFacts["team-namespace"]
	destroy := readPlan(t, "../../models/classify/testdata/team_namespace_destroy.json")
	ev, err := b.Evaluate(context.Background(), destroy, runFor(t, destroy, "apply", "development", tmpl), nil)
	require.NoError(t, err)
	require.Equal(t, map[string][]string{"data_deletion_via_destroy": {
		"module.team-namespace.kubernetes_namespace.this: deleting a data-bearing kubernetes_namespace loses its data; only a destroy run may delete it (run kind: apply)",
	}}, failed(ev))
	ev, err = b.Evaluate(context.Background(), destroy, runFor(t, destroy, "destroy", "development", tmpl), nil)
	require.NoError(t, err)
	require.Empty(t, failed(ev))

	regroup := string(readPlan(t, "../../models/classify/testdata/team_namespace_regroup.json"))
	require.Contains(t, regroup, `"name": "team-b"`)
	require.Contains(t, regroup, `"name": "edit"`)
	for plan, msg := range map[string]string{
		strings.ReplaceAll(regroup, `"name": "team-b"`, `"name": "system:authenticated"`): `module.team-namespace.kubernetes_role_binding.team: grants to the Group "system:authenticated", which Kubernetes itself defines; name the team's own group`,
		strings.ReplaceAll(regroup, `"name": "edit"`, `"name": "admin"`):                  `module.team-namespace.kubernetes_role_binding.team: binds the ClusterRole "admin"; a namespace grant binds the ClusterRole edit or view, or a Role of the namespace`,
	} {
		ev, err := b.Evaluate(context.Background(), []byte(plan), runFor(t, []byte(plan), "apply", "development", tmpl), nil)
		require.NoError(t, err)
		require.Equal(t, map[string][]string{"namespace_role_bindings": {msg}}, failed(ev))
		require.Equal(t, OutcomeSoft, ev.Outcome)
	}
}
