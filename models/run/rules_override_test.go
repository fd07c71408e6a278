package run

import (
	"testing"

	"github.com/stretchr/testify/require"

	"gantry/models/authz"
	"gantry/models/errs"
	"gantry/models/risk"
	"gantry/policies"
)

// TestOverriderDoesNotApprove: where four eyes applies, whoever overrode a run's
// soft-mandatory policy failure does not also approve it (issue 37); another admin
// does, and the overrider may still reject or cancel it. Where four eyes does not
// apply (the owners' choice at risk 1 in a protected environment) the overrider
// approves as before.
func TestOverriderDoesNotApprove(t *testing.T) {
	t.Parallel()
	released := func(m risk.Matrix) scenario {
		r := planned(t, planning{env: stagingEnv, matrix: m, kind: KindApply, actions: []string{`["create"]`}, softFailed: true})
		require.NoError(t, r.ReleasePolicyBlock("soft-mandatory failures overridden by an admin"))
		return scenario{r, stagingEnv}
	}
	fourEyes, twoEyes := released(risk.Default()), released(namedMatrix())
	require.True(t, RequirementOf(fourEyes.run).FourEyes)
	require.False(t, RequirementOf(twoEyes.run).FourEyes)
	for _, c := range []struct {
		row decisionRow
		s   scenario
	}{
		{decisionRow{name: "overrider admin", who: actor{role: authz.RoleAdmin, overrider: true}, want: verdicts{forbidden, okCode, conflict, okCode}}, fourEyes},
		{decisionRow{name: "overrider owner", who: actor{role: authz.RoleOwner, overrider: true}, want: verdicts{forbidden, okCode, conflict, okCode}}, fourEyes},
		{decisionRow{name: "another admin", who: actor{role: authz.RoleAdmin}, want: verdicts{okCode, okCode, conflict, okCode}}, fourEyes},
		{decisionRow{name: "operator", who: actor{role: authz.RoleOperator}, want: verdicts{okCode, okCode, forbidden, forbidden}}, fourEyes},
		{decisionRow{name: "two eyes overrider admin", who: actor{role: authz.RoleAdmin, overrider: true}, want: verdicts{okCode, okCode, conflict, okCode}}, twoEyes},
	} {
		t.Run(c.row.name, func(t *testing.T) { decideRow(t, c.row, c.s) })
	}
	// The refusal says why, in words, for the page and the API.
	overrider := Actor{Subject: authz.Subject{UserID: "usr-adam", OrganizationID: tableOrg, Role: authz.RoleAdmin, AuthenticatedAt: t0}, Overrode: true}
	require.Equal(t, "You overrode a policy failure of this run: four eyes means someone else approves it.",
		PermissionsOf(fourEyes.run, overrider, stagingEnv, t0).Approve.Reason())
}

// TestResubmit: "Edit and resubmit" is offered on a run that will not apply as asked
// (rejected, or blocked by a policy, soft or hard) to whoever may request runs; not on
// a run still on its way, a destroy, or to a viewer.
func TestResubmit(t *testing.T) {
	t.Parallel()
	s := decisionScenarios(t)
	operator := Actor{Subject: authz.Subject{UserID: tableRequester, OrganizationID: tableOrg, Role: authz.RoleOperator, AuthenticatedAt: t0}}
	viewer := Actor{Subject: authz.Subject{UserID: "usr-victor", OrganizationID: tableOrg, Role: authz.RoleViewer, AuthenticatedAt: t0}}
	rejected := s["r1-protected"].run
	rejected.State = Rejected
	destroy := s["r3-destroy"].run
	destroy.State = Rejected
	hard := s["soft-block"].run
	hard.PolicyOutcome = string(policies.OutcomeHard)
	for _, c := range []struct {
		name string
		r    Run
		who  Actor
		want errs.Code
	}{
		{"soft block", s["soft-block"].run, operator, okCode},
		{"hard block", hard, operator, okCode},
		{"rejected", rejected, operator, okCode},
		{"waiting", s["r1-protected"].run, operator, conflict},
		{"rejected destroy", destroy, operator, conflict},
		{"viewer", s["soft-block"].run, viewer, forbidden},
	} {
		require.Equal(t, c.want, verdictCode(PermissionsOf(c.r, c.who, stagingEnv, t0).Resubmit), c.name)
	}
}
