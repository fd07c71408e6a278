package run

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"gantry/models/catalog"
	"gantry/models/classify"
	"gantry/models/environment"
	"gantry/models/review"
	"gantry/models/risk"
)

// The plan gates hold for the team namespace template (hashicorp/kubernetes) as they do
// for the sandbox templates: its manifest (the catalog, as the composition root hands it
// to runs) says which types are irreversible and org-scoped, and the same risk rules,
// floors and cost estimate apply to its real plans (../classify/testdata/team_namespace_*).
func TestTeamNamespaceGates(t *testing.T) {
	t.Parallel()
	c, err := catalog.Load(t.Context(), os.DirFS("../../catalog"), &catalog.MemoryPins{})
	require.NoError(t, err)
	facts, err := catalog.ForRuns(c).Facts("team-namespace")
	require.NoError(t, err)
	read := func(plan string) []byte {
		data, err := os.ReadFile(filepath.Join("..", "classify", "testdata", "team_namespace_"+plan+".json"))
		require.NoError(t, err)
		return data
	}
	dev := environment.Environment{Tier: environment.TierDevelopment}
	prod := environment.Environment{Tier: environment.TierProduction, RequiresApproval: true}
	// A cluster-wide grant, as a later version of the module might add one.
	clusterGrant := []byte(strings.ReplaceAll(string(read("regroup")), "kubernetes_role_binding", "kubernetes_cluster_role_binding"))

	for _, tc := range []struct {
		name  string
		plan  []byte
		kind  Kind
		env   environment.Environment
		class risk.Class
		rule  risk.Condition
	}{
		{"create in development: self-service", read("create"), KindApply, dev, 1, risk.CondCreateUpdateOnly},
		{"create in production", read("create"), KindApply, prod, 2, risk.CondProduction},
		{"new group in development: an update like any other", read("regroup"), KindApply, dev, 1, risk.CondCreateUpdateOnly},
		{"new group in production", read("regroup"), KindApply, prod, 2, risk.CondProduction},
		{"cluster-wide grant in development: org-scoped", clusterGrant, KindApply, dev, 2, risk.CondOrgScopedUpdate},
		{"new name: the namespace is replaced, its content lost", read("rename"), KindApply, dev, 3, risk.CondIrreversible},
		{"destroy run", read("destroy"), KindDestroy, dev, 3, risk.CondDestroy},
	} {
		res, err := classify.Classify(tc.plan, facts.ClassifyOptions())
		require.NoError(t, err, tc.name)
		a := assessRisk(risk.Default(), factsOf(Run{Kind: tc.kind}, tc.env, res, facts))
		require.Equal(t, tc.class, a.Class, tc.name)
		require.Equal(t, string(tc.rule), a.Rule.ID, tc.name)

		// No template price: the estimate says so rather than $0.00.
		cost := review.EstimateCost(res, facts.Prices)
		require.True(t, cost.NoPrice, tc.name)
		before, after, delta := cost.Amounts()
		require.Equal(t, []string{"no price", "no price", "no price"}, []string{before, after, delta}, tc.name)
	}

	// What policies see of a destroy: the namespace irreversible, with what goes with it.
	res, err := classify.Classify(read("destroy"), facts.ClassifyOptions())
	require.NoError(t, err)
	pc := policyClassification(res)
	require.Equal(t, 4, pc.Counts["destroy"])
	for _, ch := range pc.Changes {
		require.Equal(t, ch.Type == "kubernetes_namespace", ch.Irreversible, ch.Address)
		if ch.Type == "kubernetes_namespace" {
			require.Len(t, ch.Dependents, 3)
		}
	}
}
