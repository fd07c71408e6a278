package classify_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"gantry/models/catalog"
	"gantry/models/classify"
)

// The team namespace template's plans, planned by OpenTofu 1.10.10 with the real
// hashicorp/kubernetes 1.13.4 provider (testdata/team_namespace_*.json: create from
// nothing; destroy, a new group and a new name against the state of that create; no
// cluster was needed, plan -refresh=false), classified with what the template's manifest
// says of its types: deleting the namespace deletes everything in it.
func teamNamespace(t *testing.T, plan string) classify.Result {
	t.Helper()
	c, err := catalog.Load(t.Context(), os.DirFS("../../catalog"), &catalog.MemoryPins{})
	require.NoError(t, err)
	facts, err := catalog.ForRuns(c).Facts("team-namespace")
	require.NoError(t, err)
	data, err := os.ReadFile(filepath.Join("testdata", "team_namespace_"+plan+".json"))
	require.NoError(t, err)
	res, err := classify.Classify(data, facts.ClassifyOptions())
	require.NoError(t, err)
	return res
}

const (
	nsAddr    = "module.team-namespace.kubernetes_namespace.this"
	quotaAddr = "module.team-namespace.kubernetes_resource_quota.this"
	limitAddr = "module.team-namespace.kubernetes_limit_range.this"
	bindAddr  = "module.team-namespace.kubernetes_role_binding.team"
)

func change(t *testing.T, res classify.Result, addr string) classify.Change {
	t.Helper()
	for _, c := range res.Changes {
		if c.Address == addr {
			return c
		}
	}
	t.Fatalf("no change of %s", addr)
	return classify.Change{}
}

func TestTeamNamespaceDestroyIsIrreversible(t *testing.T) {
	t.Parallel()
	res := teamNamespace(t, "destroy")
	require.Equal(t, classify.Counts{Destroy: 4}, res.Counts)
	require.True(t, res.HasIrreversible)
	require.False(t, res.TouchesOrgScoped)
	ns := change(t, res, nsAddr)
	require.Equal(t, classify.ClassDestroy, ns.Class)
	require.True(t, ns.Irreversible)
	// What goes with it: everything the template put in it (and, in the cluster,
	// whatever else the team did).
	require.Equal(t, []string{limitAddr, quotaAddr, bindAddr}, ns.Dependents)
	for _, addr := range []string{limitAddr, quotaAddr, bindAddr} {
		c := change(t, res, addr)
		require.Equal(t, classify.ClassDestroy, c.Class, addr)
		require.False(t, c.Irreversible, "%s holds no data of its own", addr)
		require.Empty(t, c.Dependents, addr)
	}
}

// A new name replaces the namespace: the same loss as a destroy.
func TestTeamNamespaceRenameIsIrreversible(t *testing.T) {
	t.Parallel()
	res := teamNamespace(t, "rename")
	require.Equal(t, classify.Counts{Replace: 4}, res.Counts)
	require.True(t, res.HasIrreversible)
	ns := change(t, res, nsAddr)
	require.Equal(t, classify.ClassReplace, ns.Class)
	require.True(t, ns.Irreversible)
	require.Equal(t, []string{limitAddr, quotaAddr, bindAddr}, ns.Dependents)
}

// A new group for the role binding is an update in place: not irreversible, and not
// org-scoped (the binding grants in the workspace's own namespace; the
// namespace_role_bindings policy bounds what it may grant). Cluster-wide grants are.
func TestTeamNamespaceRoleBindingChange(t *testing.T) {
	t.Parallel()
	res := teamNamespace(t, "regroup")
	require.Equal(t, classify.Counts{Update: 1, NoOp: 3}, res.Counts)
	rb := change(t, res, bindAddr)
	require.Equal(t, classify.ClassUpdate, rb.Class)
	require.False(t, rb.Irreversible)
	require.False(t, rb.OrgScoped)
	require.False(t, res.HasIrreversible)
	require.False(t, res.TouchesOrgScoped)

	data, err := os.ReadFile(filepath.Join("testdata", "team_namespace_regroup.json"))
	require.NoError(t, err)
	c, err := catalog.Load(t.Context(), os.DirFS("../../catalog"), &catalog.MemoryPins{})
	require.NoError(t, err)
	facts, err := catalog.ForRuns(c).Facts("team-namespace")
	require.NoError(t, err)
	require.ElementsMatch(t, []string{"kubernetes_cluster_role", "kubernetes_cluster_role_binding"}, facts.OrgScoped)
	cluster, err := classify.Classify([]byte(strings.ReplaceAll(string(data), "kubernetes_role_binding", "kubernetes_cluster_role_binding")), facts.ClassifyOptions())
	require.NoError(t, err)
	require.True(t, cluster.TouchesOrgScoped, "a cluster role binding is an org-scoped grant")
	require.True(t, change(t, cluster, "module.team-namespace.kubernetes_cluster_role_binding.team").OrgScoped)
}
