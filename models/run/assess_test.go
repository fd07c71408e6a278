package run

import (
	"testing"

	"github.com/stretchr/testify/require"

	"gantry/models/classify"
	"gantry/models/environment"
	"gantry/models/risk"
)

// factsOf is what the risk rules see; an org policy change is named by the template's
// org_policy list, not guessed from a type's name.
func TestFactsOf(t *testing.T) {
	t.Parallel()
	res := classify.Result{
		Changes: []classify.Change{
			{Address: "sandbox_org_policy.guard", Type: "sandbox_org_policy", Class: classify.ClassUpdate, OrgScoped: true},
			{Address: "sandbox_iam_policy_binding.x", Type: "sandbox_iam_policy_binding", Class: classify.ClassCreate, OrgScoped: true},
			{Address: "sandbox_bucket.b", Type: "sandbox_bucket", Class: classify.ClassNoOp},
		},
		Counts:           classify.Counts{Create: 1, Update: 1, NoOp: 1},
		TouchesOrgScoped: true,
	}
	r := Run{Kind: KindApply}
	env := environment.Environment{Tier: environment.TierStaging, RequiresApproval: true}

	f := factsOf(r, env, res, TemplateFacts{OrgScoped: []string{"sandbox_org_policy", "sandbox_iam_policy_binding"}, OrgPolicy: []string{"sandbox_org_policy"}})
	require.True(t, f.HasChanges)
	require.True(t, f.OrgScopedChange)
	require.True(t, f.OrgPolicyChange)
	require.Equal(t, 1, f.Create)
	require.Equal(t, 1, f.Update)
	require.Equal(t, "staging", f.Tier)
	require.True(t, f.RequiresApproval)

	// A binding whose name says "policy" is not an org policy unless the manifest says so.
	f = factsOf(r, env, res, TemplateFacts{OrgScoped: []string{"sandbox_iam_policy_binding"}, OrgPolicy: nil})
	require.False(t, f.OrgPolicyChange)

	// A no-op of an org policy changes nothing.
	res.Changes[0].Class = classify.ClassNoOp
	f = factsOf(r, env, res, TemplateFacts{OrgPolicy: []string{"sandbox_org_policy"}})
	require.False(t, f.OrgPolicyChange)
}

// The policy input carries only changes that do something, with their dependents
// bounded.
func TestPolicyClassification(t *testing.T) {
	t.Parallel()
	many := make([]string, 250)
	for i := range many {
		many[i] = "sandbox_bucket.b"
	}
	res := classify.Result{
		Changes: []classify.Change{
			{Address: "sandbox_network.n", Type: "sandbox_network", Class: classify.ClassReplace, Dependents: many, ActionReason: "replace_because_cannot_update"},
			{Address: "sandbox_bucket.b", Type: "sandbox_bucket", Class: classify.ClassNoOp},
			{Address: "data.sandbox_x.y", Type: "sandbox_x", Class: classify.ClassRead},
		},
		Counts: classify.Counts{Replace: 1, NoOp: 1, Read: 1},
	}
	pc := policyClassification(res)
	require.Equal(t, map[string]int{"create": 0, "update": 0, "replace": 1, "destroy": 0, "read": 1, "no_op": 1}, pc.Counts)
	require.Len(t, pc.Changes, 1)
	require.Equal(t, "replace", pc.Changes[0].Class)
	require.Equal(t, "replace_because_cannot_update", pc.Changes[0].ActionReason)
	require.Len(t, pc.Changes[0].Dependents, maxPolicyDependents)
}

// TestFloorsAreTheDesigns pins the floors (DESIGN §3) that models/risk's tests take the
// shape of, and shows assessRisk raising a matrix loosened below each of them.
func TestFloorsAreTheDesigns(t *testing.T) {
	t.Parallel()
	require.Equal(t, map[risk.Condition]risk.Class{risk.CondDestroy: 3, risk.CondIrreversible: 3, risk.CondProduction: 2}, Floors.Classes)
	require.Equal(t, map[risk.Level]risk.Decision{
		risk.Level3: {Level: risk.Level3, Approver: risk.ApproverOwner, FourEyes: true, Elevated: true},
	}, Floors.Decisions)

	loose := risk.Default()
	for i := range loose.Rules {
		loose.Rules[i].Class = min(loose.Rules[i].Class, 1)
	}
	for i := range loose.Decisions {
		if loose.Decisions[i].Level == risk.Level3 {
			loose.Decisions[i] = risk.Decision{Level: risk.Level3, Approver: risk.ApproverOperator}
		}
	}
	for name, tc := range map[string]struct {
		facts risk.Facts
		level risk.Level
	}{
		"a destroy":                        {risk.Facts{HasChanges: true, Destroy: 1, Tier: "staging", RequiresApproval: true}, risk.Level3},
		"a data-bearing resource replaced": {risk.Facts{HasChanges: true, Replace: 1, Irreversible: true, Tier: "staging", RequiresApproval: true}, risk.Level3},
		"a change in production":           {risk.Facts{HasChanges: true, Update: 1, Tier: "production", RequiresApproval: true}, risk.Level2},
	} {
		a := assessRisk(loose, tc.facts)
		require.Equal(t, tc.level, a.Level, name)
		if tc.level == risk.Level3 {
			require.Equal(t, Floors.Decisions[risk.Level3], a.Decision, name)
		}
	}
}

// TestNearestName: a typo of an existing workspace's name is found; a numbered series,
// a short name two letters off and a far name are not typos.
func TestNearestName(t *testing.T) {
	t.Parallel()
	names := []string{"billing-prod", "app-1", "db", "table-r1p", "payments"}
	for name, want := range map[string]string{
		"billing-prd": "billing-prod", "biling-prod": "billing-prod", "billing-prodd": "billing-prod", "paymnts": "payments",
		"app-2": "", "table-r3": "", "dc": "", "analytics": "", "billing-prod": "", "tabel-r1p": "table-r1p",
	} {
		require.Equal(t, want, nearestName(name, names), name)
	}
}
