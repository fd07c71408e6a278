package risk_test

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"

	"gantry/models/errs"
	"gantry/models/risk"
)

// facts builders: one change of each shape, in an unprotected development environment
// unless the case says otherwise.
func apply(f risk.Facts) risk.Facts {
	if f.Kind == "" {
		f.Kind = risk.KindApply
	}
	if f.Tier == "" {
		f.Tier = "development"
	}
	f.HasChanges = true
	return f
}

// TestAssessDefault covers every row of DESIGN §3's table with the default matrix.
func TestAssessDefault(t *testing.T) {
	t.Parallel()
	m := risk.Default()
	none := risk.Decision{Level: risk.Level0, Approver: risk.ApproverNone}
	system := risk.Decision{Level: risk.Level1, Approver: risk.ApproverSystem}
	protected := risk.Decision{Level: risk.Level1Protected, Approver: risk.ApproverOperator, FourEyes: true}
	admin := risk.Decision{Level: risk.Level2, Approver: risk.ApproverAdmin, FourEyes: true}
	owner := risk.Decision{Level: risk.Level3, Approver: risk.ApproverOwner, FourEyes: true, Elevated: true}

	cases := []struct {
		name     string
		facts    risk.Facts
		class    risk.Class
		rule     risk.Condition
		decision risk.Decision
	}{
		// Risk 0: dry runs and plans without changes, whatever else the facts say.
		{"dry run in production with destroys", risk.Facts{Kind: risk.KindPlanOnly, HasChanges: true, Destroy: 3, Irreversible: true,
			OrgPolicyChange: true, Tier: "production", RequiresApproval: true}, 0, risk.CondNoChanges, none},
		{"apply without changes in production", risk.Facts{Kind: risk.KindApply, Tier: "production", RequiresApproval: true}, 0, risk.CondNoChanges, none},
		{"destroy run with nothing to destroy", risk.Facts{Kind: risk.KindDestroy, Tier: "staging"}, 0, risk.CondNoChanges, none},
		// Risk 1: creates and in-place updates only.
		{"create only", apply(risk.Facts{Create: 2}), 1, risk.CondCreateUpdateOnly, system},
		{"update only in staging", apply(risk.Facts{Update: 1, Tier: "staging"}), 1, risk.CondCreateUpdateOnly, system},
		{"create and update in a protected environment", apply(risk.Facts{Create: 1, Update: 1, Tier: "staging", RequiresApproval: true}),
			1, risk.CondCreateUpdateOnly, protected},
		{"output-only change", apply(risk.Facts{}), 1, risk.CondCreateUpdateOnly, system},
		// Risk 2: replace, production, org-scoped.
		{"replace", apply(risk.Facts{Create: 1, Replace: 1}), 2, risk.CondReplace, admin},
		{"create in production", apply(risk.Facts{Create: 1, Tier: "production", RequiresApproval: true}), 2, risk.CondProduction, admin},
		{"create in unprotected production", apply(risk.Facts{Create: 1, Tier: "production"}), 2, risk.CondProduction, admin},
		{"org-scoped update", apply(risk.Facts{Update: 1, OrgScopedChange: true}), 2, risk.CondOrgScopedUpdate, admin},
		{"org-scoped update in a protected environment", apply(risk.Facts{Update: 1, OrgScopedChange: true, RequiresApproval: true}),
			2, risk.CondOrgScopedUpdate, admin},
		// Risk 3: destroy, irreversible loss, org policy.
		{"delete action", apply(risk.Facts{Destroy: 1}), 3, risk.CondDestroy, owner},
		{"destroy run", apply(risk.Facts{Kind: risk.KindDestroy}), 3, risk.CondDestroy, owner},
		{"replace of a database", apply(risk.Facts{Replace: 1, Irreversible: true}), 3, risk.CondIrreversible, owner},
		{"org policy change", apply(risk.Facts{Update: 1, OrgScopedChange: true, OrgPolicyChange: true}), 3, risk.CondOrgPolicyChange, owner},
		{"org policy change without the org-scoped flag", apply(risk.Facts{Create: 1, OrgPolicyChange: true}), 3, risk.CondOrgPolicyChange, owner},
		// The highest rule wins; among equals the first in the matrix's order.
		{"replace in production: replace comes first", apply(risk.Facts{Replace: 1, Tier: "production"}), 2, risk.CondReplace, admin},
		{"destroy of a bucket: destroy comes before irreversible", apply(risk.Facts{Destroy: 1, Irreversible: true}), 3, risk.CondDestroy, owner},
		{"production org policy change", apply(risk.Facts{Update: 1, OrgPolicyChange: true, Tier: "production"}), 3, risk.CondOrgPolicyChange, owner},
		// Counts imply changes even when the flag was forgotten (fail safe).
		{"counts without the flag", risk.Facts{Kind: risk.KindApply, Destroy: 1, Tier: "development"}, 3, risk.CondDestroy, owner},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			a := m.Assess(tc.facts)
			require.Equal(t, tc.class, a.Class)
			require.Equal(t, tc.rule, a.Rule.Condition)
			require.Equal(t, string(tc.rule), a.Rule.ID)
			require.Equal(t, tc.decision, a.Decision)
			require.Equal(t, tc.decision.Level, a.Level)
			require.Equal(t, tc.facts.RequiresApproval, a.Protected)
			require.NotEmpty(t, a.Reason)
		})
	}
}

func TestAssessReason(t *testing.T) {
	t.Parallel()
	m := risk.Default()
	require.Equal(t, "risk 2: any replace (rule replace) — an admin or owner, not the requester",
		m.Assess(apply(risk.Facts{Replace: 1})).Reason)
	require.Equal(t, "risk 0: dry run, or a plan without changes (rule no_changes) — no decision needed",
		m.Assess(risk.Facts{Kind: risk.KindPlanOnly}).Reason)
	require.Equal(t, "risk 1 in a protected environment: create or update in place only, nothing org-scoped (rule create_update_only) — one operator, admin or owner, not the requester",
		m.Assess(apply(risk.Facts{Create: 1, RequiresApproval: true})).Reason)
	require.Equal(t, "risk 3: any destroy (delete action or destroy run) (rule destroy) — an owner, not the requester, freshly authenticated, typing DESTROY with a reason of 10+ characters",
		m.Assess(apply(risk.Facts{Destroy: 1})).Reason)
}

// TestAssessEditedMatrix: the matrix is data; editing it changes the assessment.
func TestAssessEditedMatrix(t *testing.T) {
	t.Parallel()
	prodCreate := apply(risk.Facts{Create: 1, Tier: "production", RequiresApproval: true})
	require.Equal(t, risk.Class(2), risk.Default().Assess(prodCreate).Class)

	m := risk.Default()
	setClass(m, risk.CondProduction, 3)
	require.NoError(t, m.Validate())
	a := m.Assess(prodCreate)
	require.Equal(t, risk.Class(3), a.Class)
	require.Equal(t, risk.CondProduction, a.Rule.Condition)
	require.Equal(t, risk.Level3, a.Level)
	require.Equal(t, risk.ApproverOwner, a.Decision.Approver)
	require.True(t, a.Decision.Elevated)
	require.Equal(t, risk.Default().Rules, risk.Default().Rules, "Default returns a fresh matrix each time")
	require.Equal(t, risk.Class(2), risk.Default().Assess(prodCreate).Class, "editing a copy leaves the default alone")

	// A replace in production now lands on production_change (3), not replace (2).
	require.Equal(t, risk.CondProduction, m.Assess(apply(risk.Facts{Replace: 1, Tier: "production"})).Rule.Condition)

	// Rule order breaks ties: put production_change first and it names replaces in production.
	reordered := risk.Default()
	var prod risk.Rule
	for i, r := range reordered.Rules {
		if r.Condition == risk.CondProduction {
			prod = r
			reordered.Rules = append(reordered.Rules[:i:i], reordered.Rules[i+1:]...)
			break
		}
	}
	reordered.Rules = append([]risk.Rule{prod}, reordered.Rules...)
	require.NoError(t, reordered.Validate())
	require.Equal(t, risk.CondProduction, reordered.Assess(apply(risk.Facts{Replace: 1, Tier: "production"})).Rule.Condition)

	// A changed decision row: level 2 by operators, without four eyes.
	m = risk.Default()
	for i := range m.Decisions {
		if m.Decisions[i].Level == risk.Level2 {
			m.Decisions[i] = risk.Decision{Level: risk.Level2, Approver: risk.ApproverOperator}
		}
	}
	require.NoError(t, m.Validate())
	a = m.Assess(apply(risk.Facts{Replace: 1}))
	require.Equal(t, risk.Decision{Level: risk.Level2, Approver: risk.ApproverOperator}, a.Decision)
	require.Equal(t, "risk 2: any replace (rule replace) — one operator, admin or owner", a.Reason)

	// Raising create_update_only to 2 puts every change before an admin.
	m = risk.Default()
	setClass(m, risk.CondCreateUpdateOnly, 2)
	require.Equal(t, risk.Level2, m.Assess(apply(risk.Facts{Create: 1})).Level)
}

// TestAssessIncompleteMatrix: a matrix missing rows never loosens the default.
func TestAssessIncompleteMatrix(t *testing.T) {
	t.Parallel()
	m := risk.Matrix{}
	a := m.Assess(apply(risk.Facts{Destroy: 1}))
	require.Equal(t, risk.Class(3), a.Class)
	require.Equal(t, risk.ApproverOwner, a.Decision.Approver)
	require.True(t, a.Decision.Elevated)
}

func setClass(m risk.Matrix, c risk.Condition, class risk.Class) {
	for i := range m.Rules {
		if m.Rules[i].Condition == c {
			m.Rules[i].Class = class
		}
	}
}

func setDecision(m risk.Matrix, l risk.Level, f func(*risk.Decision)) {
	for i := range m.Decisions {
		if m.Decisions[i].Level == l {
			f(&m.Decisions[i])
		}
	}
}

func TestDefaultIsValidAndMatchesTheDesign(t *testing.T) {
	t.Parallel()
	m := risk.Default()
	require.NoError(t, m.Validate())
	classes := map[risk.Condition]risk.Class{}
	for _, r := range m.Rules {
		classes[r.Condition] = r.Class
	}
	require.Equal(t, map[risk.Condition]risk.Class{
		risk.CondNoChanges: 0, risk.CondCreateUpdateOnly: 1, risk.CondReplace: 2, risk.CondProduction: 2,
		risk.CondOrgScopedUpdate: 2, risk.CondDestroy: 3, risk.CondIrreversible: 3, risk.CondOrgPolicyChange: 3,
	}, classes)
	require.Equal(t, []risk.Decision{
		{Level: "0", Approver: "none"},
		{Level: "1", Approver: "system"},
		{Level: "1-protected", Approver: "operator", FourEyes: true},
		{Level: "2", Approver: "admin", FourEyes: true},
		{Level: "3", Approver: "owner", FourEyes: true, Elevated: true},
	}, m.Decisions)

	// The JSON form is what the database stores.
	raw, err := json.Marshal(m)
	require.NoError(t, err)
	require.Contains(t, string(raw), `{"id":"replace","condition":"replace","class":2,"description":"any replace"}`)
	require.Contains(t, string(raw), `{"level":"2","approver":"admin","four_eyes":true,"elevated":false,"escalation":""}`)
	var back risk.Matrix
	require.NoError(t, json.Unmarshal(raw, &back))
	require.Equal(t, m, back)
}

func TestValidate(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name  string
		edit  func(*risk.Matrix)
		field string
	}{
		{"class above 3", func(m *risk.Matrix) { setClass(*m, risk.CondReplace, 4) }, "class.replace"},
		{"negative class", func(m *risk.Matrix) { setClass(*m, risk.CondDestroy, -1) }, "class.destroy"},
		{"dry runs gated", func(m *risk.Matrix) { setClass(*m, risk.CondNoChanges, 1) }, "class.no_changes"},
		{"a change at risk 0", func(m *risk.Matrix) { setClass(*m, risk.CondCreateUpdateOnly, 0) }, "class.create_update_only"},
		{"condition missing", func(m *risk.Matrix) { m.Rules = m.Rules[:len(m.Rules)-1] }, "rules"},
		{"condition twice", func(m *risk.Matrix) {
			r := m.Rules[2]
			r.ID = "replace-again"
			m.Rules = append(m.Rules, r)
		}, "rules"},
		{"unknown condition", func(m *risk.Matrix) {
			m.Rules = append(m.Rules, risk.Rule{ID: "moon", Condition: "full_moon", Class: 3})
		}, "rules"},
		{"rule without id", func(m *risk.Matrix) { m.Rules[1].ID = "" }, "rules"},
		{"rule ids repeat", func(m *risk.Matrix) { m.Rules[1].ID = m.Rules[0].ID }, "rules"},
		{"level missing", func(m *risk.Matrix) { m.Decisions = m.Decisions[:4] }, "decisions"},
		{"level twice", func(m *risk.Matrix) { m.Decisions = append(m.Decisions, m.Decisions[4]) }, "decisions"},
		{"unknown level", func(m *risk.Matrix) {
			m.Decisions = append(m.Decisions, risk.Decision{Level: "4", Approver: risk.ApproverOwner})
		}, "decisions"},
		{"unknown approver", func(m *risk.Matrix) {
			setDecision(*m, risk.Level2, func(d *risk.Decision) { d.Approver = "cto" })
		}, "approver.2"},
		{"nobody decides a change", func(m *risk.Matrix) {
			setDecision(*m, risk.Level1, func(d *risk.Decision) { d.Approver = risk.ApproverNone })
		}, "approver.1"},
		{"system decides a protected change", func(m *risk.Matrix) {
			setDecision(*m, risk.Level1Protected, func(d *risk.Decision) { d.Approver = risk.ApproverSystem; d.FourEyes = false })
		}, "approver.1-protected"},
		{"system decides risk 3", func(m *risk.Matrix) {
			setDecision(*m, risk.Level3, func(d *risk.Decision) { *d = risk.Decision{Level: risk.Level3, Approver: risk.ApproverSystem} })
		}, "approver.3"},
		{"a person gates dry runs", func(m *risk.Matrix) {
			setDecision(*m, risk.Level0, func(d *risk.Decision) { d.Approver = risk.ApproverAdmin })
		}, "approver.0"},
		{"elevated system approval", func(m *risk.Matrix) {
			setDecision(*m, risk.Level1, func(d *risk.Decision) { d.Elevated = true })
		}, "elevated.1"},
		{"four eyes without a person", func(m *risk.Matrix) {
			setDecision(*m, risk.Level0, func(d *risk.Decision) { d.FourEyes = true })
		}, "four_eyes.0"},
		{"unknown escalation", func(m *risk.Matrix) {
			setDecision(*m, risk.Level2, func(d *risk.Decision) { d.Escalation = "board" })
		}, "escalation.2"},
		{"escalation to the system", func(m *risk.Matrix) {
			setDecision(*m, risk.Level2, func(d *risk.Decision) { d.Escalation = risk.ApproverSystem })
		}, "escalation.2"},
		{"escalation lowers the bar", func(m *risk.Matrix) {
			setDecision(*m, risk.Level3, func(d *risk.Decision) { d.Escalation = risk.ApproverAdmin })
		}, "escalation.3"},
		{"escalating a self-service approval", func(m *risk.Matrix) {
			setDecision(*m, risk.Level1, func(d *risk.Decision) { d.Escalation = risk.ApproverOwner })
		}, "escalation.1"},
		{"escalation without a waiting time", func(m *risk.Matrix) {
			setDecision(*m, risk.Level2, func(d *risk.Decision) { d.Escalation = risk.ApproverEnvOwners })
		}, "escalate_after_hours.2"},
		{"escalation waiting longer than a decision window can last", func(m *risk.Matrix) {
			setDecision(*m, risk.Level2, func(d *risk.Decision) { d.Escalation, d.EscalateAfterHours = risk.ApproverEnvOwners, 721 })
		}, "escalate_after_hours.2"},
		{"escalation to a higher role adds nobody", func(m *risk.Matrix) {
			setDecision(*m, risk.Level2, func(d *risk.Decision) { d.Escalation, d.EscalateAfterHours = risk.ApproverOwner, 4 })
		}, "escalation.2"},
		{"escalation to the same named owners", func(m *risk.Matrix) {
			setDecision(*m, risk.Level2, func(d *risk.Decision) {
				d.Approver, d.Escalation, d.EscalateAfterHours = risk.ApproverEnvOwners, risk.ApproverEnvOwners, 4
			})
		}, "escalation.2"},
		{"a waiting time without an escalation", func(m *risk.Matrix) {
			setDecision(*m, risk.Level1Protected, func(d *risk.Decision) { d.EscalateAfterHours = 4 })
		}, "escalate_after_hours.1-protected"},
		{"named owners decide dry runs", func(m *risk.Matrix) {
			setDecision(*m, risk.Level0, func(d *risk.Decision) { d.Approver = risk.ApproverEnvOwners })
		}, "approver.0"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			m := risk.Default()
			tc.edit(&m)
			err := m.Validate()
			v, ok := errs.AsValidation(err)
			require.True(t, ok, "%v", err)
			require.Contains(t, v.Fields, tc.field, v.Fields)
			require.Len(t, v.Fields, 1, v.Fields)
		})
	}

	// Several problems at once are all reported, one per field.
	m := risk.Default()
	setClass(m, risk.CondReplace, 9)
	setDecision(m, risk.Level3, func(d *risk.Decision) { d.Approver = "x" })
	v, ok := errs.AsValidation(m.Validate())
	require.True(t, ok)
	require.Contains(t, v.Fields, "class.replace")
	require.Contains(t, v.Fields, "approver.3")

	// Valid edits.
	for name, edit := range map[string]func(risk.Matrix){
		"named owners decide, admins after 4 h": func(m risk.Matrix) {
			setDecision(m, risk.Level2, func(d *risk.Decision) {
				d.Approver, d.Escalation, d.EscalateAfterHours = risk.ApproverEnvOwners, risk.ApproverAdmin, 4
			})
		},
		"operators escalate to named owners": func(m risk.Matrix) {
			setDecision(m, risk.Level1Protected, func(d *risk.Decision) { d.Escalation, d.EscalateAfterHours = risk.ApproverEnvOwners, 8 })
		},
		"four eyes off":  func(m risk.Matrix) { setDecision(m, risk.Level3, func(d *risk.Decision) { d.FourEyes = false }) },
		"elevated admin": func(m risk.Matrix) { setDecision(m, risk.Level2, func(d *risk.Decision) { d.Elevated = true }) },
		"system approves risk 0": func(m risk.Matrix) {
			setDecision(m, risk.Level0, func(d *risk.Decision) { d.Approver = risk.ApproverSystem })
		},
		"operator decides risk 1": func(m risk.Matrix) {
			setDecision(m, risk.Level1, func(d *risk.Decision) { d.Approver = risk.ApproverOperator })
		},
		"replace is risk 1": func(m risk.Matrix) { setClass(m, risk.CondReplace, 1) },
	} {
		m := risk.Default()
		edit(m)
		require.NoError(t, m.Validate(), name)
	}
}

func TestDiff(t *testing.T) {
	t.Parallel()
	before := risk.Default()
	require.Empty(t, risk.Diff(before, risk.Default()))

	after := risk.Default()
	setClass(after, risk.CondProduction, 3)
	setDecision(after, risk.Level2, func(d *risk.Decision) {
		d.Escalation, d.EscalateAfterHours = risk.ApproverEnvOwners, 4
		d.Elevated = true
	})
	require.Equal(t, []risk.Change{
		{Row: "rule production_change", Field: "class", Before: "2", After: "3"},
		{Row: "decision 2", Field: "elevated", Before: "false", After: "true"},
		{Row: "decision 2", Field: "escalation", Before: "none", After: "environment_owners"},
		{Row: "decision 2", Field: "escalate_after_hours", Before: "0", After: "4"},
	}, risk.Diff(before, after))
}
