package risk_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"gantry/models/errs"
	"gantry/models/risk"
)

// floors are the shape models/run.Floors has; the run package's test pins its values.
var floors = risk.Floors{
	Classes: map[risk.Condition]risk.Class{risk.CondDestroy: 3, risk.CondIrreversible: 3, risk.CondProduction: 2},
	Decisions: map[risk.Level]risk.Decision{
		risk.Level3: {Level: risk.Level3, Approver: risk.ApproverOwner, FourEyes: true, Elevated: true},
	},
}

// Matrix edits below a floor are refused with a field error each; the default matrix
// is at the floors.
func TestFloorsRefuseEditsBelowThem(t *testing.T) {
	t.Parallel()
	require.NoError(t, floors.Check(risk.Default()))
	for name, tc := range map[string]struct {
		edit  func(risk.Matrix)
		field string
	}{
		"destroy self-service":        {func(m risk.Matrix) { setClass(m, risk.CondDestroy, 1) }, "class.destroy"},
		"irreversible loss at risk 2": {func(m risk.Matrix) { setClass(m, risk.CondIrreversible, 2) }, "class.irreversible_loss"},
		"production at risk 1":        {func(m risk.Matrix) { setClass(m, risk.CondProduction, 1) }, "class.production_change"},
		"risk 3 by an admin": {func(m risk.Matrix) {
			setDecision(m, risk.Level3, func(d *risk.Decision) { d.Approver = risk.ApproverAdmin })
		}, "approver.3"},
		"risk 3 by named owners": {func(m risk.Matrix) {
			setDecision(m, risk.Level3, func(d *risk.Decision) { d.Approver = risk.ApproverEnvOwners })
		}, "approver.3"},
		"risk 3 without four eyes": {func(m risk.Matrix) { setDecision(m, risk.Level3, func(d *risk.Decision) { d.FourEyes = false }) }, "four_eyes.3"},
		"risk 3 without elevation": {func(m risk.Matrix) { setDecision(m, risk.Level3, func(d *risk.Decision) { d.Elevated = false }) }, "elevated.3"},
		"risk 3 escalating to an admin": {func(m risk.Matrix) {
			setDecision(m, risk.Level3, func(d *risk.Decision) { d.Escalation, d.EscalateAfterHours = risk.ApproverAdmin, 4 })
		}, "escalation.3"},
		"risk 3 escalating to env owner": {func(m risk.Matrix) {
			setDecision(m, risk.Level3, func(d *risk.Decision) { d.Escalation, d.EscalateAfterHours = risk.ApproverEnvOwners, 4 })
		}, "escalation.3"},
	} {
		m := risk.Default()
		tc.edit(m)
		v, ok := errs.AsValidation(floors.Check(m))
		require.True(t, ok, name)
		require.Contains(t, v.Fields, tc.field, name)
		require.Len(t, v.Fields, 1, "%s: %v", name, v.Fields)
		require.NotRegexp(t, `DESIGN|§|docs/`, v.Fields[tc.field], "%s: the message points at a document the owner does not have", name)
	}
	// Above the floors is the owners' business.
	m := risk.Default()
	setClass(m, risk.CondProduction, 3)
	setClass(m, risk.CondReplace, 1)
	setDecision(m, risk.Level2, func(d *risk.Decision) { d.Approver, d.FourEyes = risk.ApproverOperator, false })
	require.NoError(t, floors.Check(m))
}

// Raise lifts a matrix saved below the floors (before they existed) to them, so every
// assessment respects them.
func TestFloorsRaiseALooseMatrix(t *testing.T) {
	t.Parallel()
	loose := risk.Default()
	setClass(loose, risk.CondDestroy, 1)
	setClass(loose, risk.CondProduction, 1)
	setDecision(loose, risk.Level3, func(d *risk.Decision) {
		d.Approver, d.FourEyes, d.Elevated, d.Escalation, d.EscalateAfterHours = risk.ApproverOperator, false, false, risk.ApproverOperator, 1
	})
	raised := floors.Raise(loose)
	require.NoError(t, floors.Check(raised))
	require.Equal(t, risk.Class(1), classOf(loose, risk.CondDestroy), "Raise copies, the input is untouched")

	destroy := raised.Assess(risk.Facts{Kind: risk.KindApply, Destroy: 1, Tier: "development"})
	require.Equal(t, risk.Class(3), destroy.Class)
	require.Equal(t, risk.Decision{Level: risk.Level3, Approver: risk.ApproverOwner, FourEyes: true, Elevated: true}, destroy.Decision)
	prod := raised.Assess(risk.Facts{Kind: risk.KindApply, Create: 1, Tier: "production", RequiresApproval: true})
	require.Equal(t, risk.Class(2), prod.Class)
}

func classOf(m risk.Matrix, c risk.Condition) risk.Class {
	for _, r := range m.Rules {
		if r.Condition == c {
			return r.Class
		}
	}
	return -1
}
