package pages

import (
	"testing"

	"github.com/stretchr/testify/require"

	"gantry/models/policy"
	"gantry/models/run"
	"gantry/policies"
)

// TestBlockOfAPolicyBlockedRun: a blocked run's block lists its failed mandatory rules,
// hard ones first, with every message and the override given; advisory failures and
// passed rules are not what blocks it; a run that is not blocked has none. The policy
// table's order puts every failure first.
func TestBlockOfAPolicyBlockedRun(t *testing.T) {
	t.Parallel()
	results := []policies.Result{
		{RuleID: "a_passed", Enforcement: policies.HardMandatory, Passed: true},
		{RuleID: "b_advisory", Enforcement: policies.Advisory},
		{RuleID: "c_soft", Enforcement: policies.SoftMandatory, Messages: []string{"one", "two"}},
		{RuleID: "d_hard", Enforcement: policies.HardMandatory, Messages: []string{"three"}},
	}
	ev := &policy.Evaluation{Results: results}
	overrides := map[string]policy.Override{"c_soft": {RuleID: "c_soft", OverriddenByName: "Adam", Reason: "exported nightly"}}
	blocked := run.Run{State: run.PolicyBlocked}

	b := BlockOf(blocked, ev, overrides, run.Permissions{})
	require.NotNil(t, b)
	require.True(t, b.Hard)
	require.Len(t, b.Rules, 2)
	require.Equal(t, "d_hard", b.Rules[0].RuleID, "what blocks for good first")
	require.Equal(t, "c_soft", b.Rules[1].RuleID)
	require.Equal(t, []string{"one", "two"}, b.Rules[1].Messages)
	require.Equal(t, "Adam", b.Rules[1].Overridden.OverriddenByName)
	require.False(t, b.Rules[1].Override.Allowed(), "no permission, no override")

	require.Nil(t, BlockOf(run.Run{State: run.PendingApproval}, ev, overrides, run.Permissions{}))
	require.Nil(t, BlockOf(blocked, nil, nil, run.Permissions{}))

	var order []string
	for _, res := range FailedFirst(results) {
		order = append(order, res.RuleID)
	}
	require.Equal(t, []string{"d_hard", "c_soft", "b_advisory", "a_passed"}, order)
}
