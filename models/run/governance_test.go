package run

import (
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"gantry/models/environment"
	"gantry/models/risk"
)

// TestGovernanceGateIsTheRoute: what GovernanceRules.Gate tells the governance report
// of a kind of change in an environment is what FinishPlan's route does to a run of it
// (Gantry's approval, or a wait for RequirementOf), over matrices within the floors,
// protected and unprotected environments of each tier and every kind of change; and the
// words it answers in for the cases an auditor asks about most.
func TestGovernanceGateIsTheRoute(t *testing.T) {
	t.Parallel()
	edit := func(f func(*risk.Matrix)) risk.Matrix {
		m := risk.Default()
		f(&m)
		return m
	}
	level := func(m *risk.Matrix, l risk.Level, f func(*risk.Decision)) {
		for i := range m.Decisions {
			if m.Decisions[i].Level == l {
				f(&m.Decisions[i])
			}
		}
	}
	matrices := map[string]risk.Matrix{
		"default": risk.Default(),
		"risk 2 without four eyes": edit(func(m *risk.Matrix) {
			level(m, risk.Level2, func(d *risk.Decision) { d.FourEyes = false })
		}),
		"replace at risk 1": edit(func(m *risk.Matrix) {
			for i := range m.Rules {
				if m.Rules[i].Condition == risk.CondReplace {
					m.Rules[i].Class = 1
				}
			}
		}),
		"risk 1 decided by an operator, no four eyes": edit(func(m *risk.Matrix) {
			level(m, risk.Level1, func(d *risk.Decision) { d.Approver, d.FourEyes = risk.ApproverOperator, false })
		}),
	}
	kinds := map[string]risk.Facts{
		"create":      {Kind: risk.KindApply, Create: 1},
		"replace":     {Kind: risk.KindApply, Replace: 1},
		"destroy run": {Kind: risk.KindDestroy, Destroy: 1},
		"data loss":   {Kind: risk.KindApply, Replace: 1, Irreversible: true},
		"org policy":  {Kind: risk.KindApply, Update: 1, OrgScopedChange: true, OrgPolicyChange: true},
	}
	now := time.Now()
	for mName, m := range matrices {
		require.NoError(t, Floors.Check(m), mName)
		for _, tier := range environment.Tiers {
			for _, protected := range []bool{false, true} {
				env := environment.Environment{Tier: tier, RequiresApproval: protected, DecisionWindowHours: 1}
				for kName, f := range kinds {
					f.HasChanges, f.Tier, f.RequiresApproval = true, string(tier), protected
					name := fmt.Sprintf("%s, %s, protected %t, %s", mName, tier, protected, kName)
					r := Run{State: Planning, Kind: Kind(f.Kind), PlanSummary: Summary{Create: f.Create, Update: f.Update, Replace: f.Replace, Delete: f.Destroy}}
					r.assessedAs(assessRisk(m, f))
					require.NoError(t, route(&r, env, now, "routed"), name)
					got := GovernanceRules{}.Gate(m, f).Decision
					if r.State == Approved {
						require.Equal(t, risk.ApproverSystem, got.Approver, name)
						continue
					}
					want := RequirementOf(r)
					require.Equal(t, PendingApproval, r.State, name)
					require.Equal(t, []any{want.Approver, want.FourEyes, want.Elevated}, []any{got.Approver, got.FourEyes, got.Elevated}, name)
				}
			}
		}
	}
	dev := risk.Facts{HasChanges: true, Tier: "development"}
	gate := func(m risk.Matrix, f risk.Facts) string { return GovernanceRules{}.Gate(m, f).Decision.Summary() }
	with := func(f risk.Facts, g func(*risk.Facts)) risk.Facts { g(&f); return f }
	require.Equal(t, "self-service: a system approval bound to the same evidence, naming the rule",
		gate(risk.Default(), with(dev, func(f *risk.Facts) { f.Kind, f.Create = risk.KindApply, 1 })))
	require.Equal(t, "an admin or owner, not the requester", gate(risk.Default(), with(dev, func(f *risk.Facts) { f.Kind, f.Replace = risk.KindApply, 1 })),
		"without requires_approval a replace still goes to an admin")
	require.Equal(t, "an owner, not the requester, freshly authenticated, typing DESTROY with a reason of 10+ characters",
		gate(risk.Default(), with(dev, func(f *risk.Facts) { f.Kind, f.Destroy = risk.KindDestroy, 1 })), "and a destroy to an owner (the floors)")
	require.Equal(t, "an admin or owner", gate(matrices["risk 2 without four eyes"], with(dev, func(f *risk.Facts) { f.Kind, f.Replace = risk.KindApply, 1 })))
	require.Equal(t, "an admin or owner, not the requester",
		gate(matrices["replace at risk 1"], with(dev, func(f *risk.Facts) { f.Kind, f.Replace, f.Tier = risk.KindApply, 1, "production" })),
		"a production change stays at risk 2 whatever the matrix says of replaces")
	require.True(t, GovernanceRules{}.AppliesOnlyApproved())
	require.True(t, GovernanceRules{}.VerifiesBeforeSuccess())
}
