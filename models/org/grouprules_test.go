package org

import (
	"testing"

	"github.com/stretchr/testify/require"

	"gantry/models/authz"
	"gantry/models/errs"
)

// The group rules as a pure table: who the rules admit, change, end or leave alone.
func TestDecide(t *testing.T) {
	rules := []GroupRule{
		{GroupName: "/platform/approvers", Role: authz.RoleAdmin},
		{GroupName: "engineers", Role: authz.RoleOperator},
		{GroupName: "live", Role: authz.RoleViewer, CloudLive: true},
		{GroupName: "audit", Role: authz.RoleAuditor},
		{GroupName: "scim-readers", Role: authz.RoleViewer},
	}
	rule := func(role authz.Role, live bool) *Membership {
		return &Membership{Role: role, CloudLive: live, Source: SourceRule}
	}
	direct := func(role authz.Role) *Membership { return &Membership{Role: role, Source: SourceDirect} }
	known := func(groups ...string) Standing { return Standing{Claimed: groups, ClaimsKnown: true} }
	cases := []struct {
		name    string
		st      Standing
		current *Membership
		want    RuleDecision
	}{
		{"no mapped group, no member", known("other"), nil, RuleDecision{Outcome: RuleKeep}},
		{"a mapped group admits", known("engineers"), nil,
			RuleDecision{Outcome: RuleAdmit, Role: authz.RoleOperator, Matched: []string{"engineers"}}},
		{"the highest mapped role wins", known("engineers", "/platform/approvers", "audit"), nil,
			RuleDecision{Outcome: RuleAdmit, Role: authz.RoleAdmin, Matched: []string{"/platform/approvers", "audit", "engineers"}}},
		{"auditor above viewer", known("audit", "scim-readers"), nil,
			RuleDecision{Outcome: RuleAdmit, Role: authz.RoleAuditor, Matched: []string{"audit", "scim-readers"}}},
		{"operator above auditor", known("audit", "engineers"), nil,
			RuleDecision{Outcome: RuleAdmit, Role: authz.RoleOperator, Matched: []string{"audit", "engineers"}}},
		{"cloud.live from any matched rule", known("engineers", "live"), nil,
			RuleDecision{Outcome: RuleAdmit, Role: authz.RoleOperator, CloudLive: true, Matched: []string{"engineers", "live"}}},
		{"groups are matched exactly", known("Engineers", "platform/approvers"), nil, RuleDecision{Outcome: RuleKeep}},
		{"directory groups count", Standing{ClaimsKnown: true, Directory: []string{"engineers"}}, nil,
			RuleDecision{Outcome: RuleAdmit, Role: authz.RoleOperator, Matched: []string{"engineers"}}},
		{"same role: nothing", known("engineers"), rule(authz.RoleOperator, false),
			RuleDecision{Outcome: RuleKeep, Role: authz.RoleOperator, Matched: []string{"engineers"}}},
		{"another mapped role: change", known("/platform/approvers"), rule(authz.RoleOperator, false),
			RuleDecision{Outcome: RuleChange, Role: authz.RoleAdmin, Matched: []string{"/platform/approvers"}}},
		{"cloud.live gone: change", known("engineers"), rule(authz.RoleOperator, true),
			RuleDecision{Outcome: RuleChange, Role: authz.RoleOperator, Matched: []string{"engineers"}}},
		{"no mapped group any more: end", known("other"), rule(authz.RoleOperator, false), RuleDecision{Outcome: RuleEnd}},
		{"no groups at all: end", known(), rule(authz.RoleViewer, false), RuleDecision{Outcome: RuleEnd}},
		{"an invited member is never raised", known("/platform/approvers"), direct(authz.RoleViewer), RuleDecision{Outcome: RuleKeep}},
		{"an invited member is never lowered", known("scim-readers"), direct(authz.RoleAdmin), RuleDecision{Outcome: RuleKeep}},
		{"an invited member never ends", known(), direct(authz.RoleOperator), RuleDecision{Outcome: RuleKeep}},
		{"an owner is never touched", known(), direct(authz.RoleOwner), RuleDecision{Outcome: RuleKeep}},
		{"overage keeps a rule member", Standing{}, rule(authz.RoleOperator, false), RuleDecision{Outcome: RuleKeep}},
		{"overage keeps a rule member even when the directory maps less", Standing{Directory: []string{"scim-readers"}}, rule(authz.RoleAdmin, false),
			RuleDecision{Outcome: RuleKeep, Role: authz.RoleViewer, Matched: []string{"scim-readers"}}},
		{"overage: the directory still admits", Standing{Directory: []string{"engineers"}}, nil,
			RuleDecision{Outcome: RuleAdmit, Role: authz.RoleOperator, Matched: []string{"engineers"}}},
		{"deactivated in the directory: end", Standing{Claimed: []string{"engineers"}, ClaimsKnown: true, Deactivated: true},
			rule(authz.RoleOperator, false), RuleDecision{Outcome: RuleEnd}},
		{"deactivated in the directory, overage: end", Standing{Deactivated: true}, rule(authz.RoleOperator, false), RuleDecision{Outcome: RuleEnd}},
		{"deactivated in the directory: not admitted", Standing{Claimed: []string{"engineers"}, ClaimsKnown: true, Deactivated: true}, nil,
			RuleDecision{Outcome: RuleKeep}},
		{"deactivated: an invited member stays", Standing{Deactivated: true}, direct(authz.RoleOperator), RuleDecision{Outcome: RuleKeep}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			require.Equal(t, c.want, Decide(rules, c.st, c.current))
		})
	}
}

// No rule can make an owner: owner is not among the roles a rule gives.
func TestNoRuleRoleIsOwner(t *testing.T) {
	require.NotContains(t, RuleRoles, authz.RoleOwner)
	d := Decide([]GroupRule{{GroupName: "owners", Role: authz.RoleOwner}}, Standing{Claimed: []string{"owners"}, ClaimsKnown: true}, nil)
	require.Equal(t, RuleDecision{Outcome: RuleKeep}, d, "a stored owner rule (refused on the way in) still gives nothing")
}

// A rule's fields, checked before anything is written.
func TestRuleInputCheck(t *testing.T) {
	for _, c := range []struct {
		in     RuleInput
		fields []string
	}{
		{RuleInput{Group: " engineers ", Role: authz.RoleOperator}, nil},
		{RuleInput{Group: "/platform/approvers", Role: authz.RoleAuditor, CloudLive: true}, nil},
		{RuleInput{Group: "", Role: authz.RoleViewer}, []string{"group"}},
		{RuleInput{Group: "eng\x00ineers", Role: authz.RoleViewer}, []string{"group"}},
		{RuleInput{Group: "eng\u200bineers", Role: authz.RoleViewer}, []string{"group"}},
		{RuleInput{Group: string(make([]byte, 257)), Role: authz.RoleViewer}, []string{"group"}},
		{RuleInput{Group: "owners", Role: authz.RoleOwner}, []string{"role"}},
		{RuleInput{Group: "x", Role: "root"}, []string{"role"}},
		{RuleInput{Group: "\xff", Role: ""}, []string{"group", "role"}},
	} {
		err := c.in.check()
		if c.fields == nil {
			require.NoError(t, err, "%+v", c.in)
			continue
		}
		var got []string
		for f := range errsFields(t, err) {
			got = append(got, f)
		}
		require.ElementsMatch(t, c.fields, got, "%+v", c.in)
	}
	in := RuleInput{Group: " engineers ", Role: authz.RoleOperator}
	require.NoError(t, in.check())
	require.Equal(t, "engineers", in.Group, "trimmed")
}

func errsFields(t *testing.T, err error) map[string]string {
	t.Helper()
	v, ok := errs.AsValidation(err)
	require.True(t, ok, "%v", err)
	return v.Fields
}
