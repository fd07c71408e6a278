package run

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"gantry/models/authz"
	"gantry/models/environment"
	"gantry/models/errs"
	"gantry/models/risk"
)

// TestATokenNeverDecidesRiskThree: an owner's token with scope decide approves and
// rejects a risk-2 run as the owner would, and neither approves nor rejects a risk-3
// one (that needs a person's fresh sign-in), whatever its scopes; a token without scope
// decide decides nothing.
func TestATokenNeverDecidesRiskThree(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 12, 2, 10, 0, 0, 0, time.UTC)
	deadline := now.Add(time.Hour)
	env := environment.Environment{ID: "env-1", OrganizationID: "org-1", Tier: environment.TierProduction}
	two := 2
	r := Run{ID: "run-1", OrganizationID: "org-1", EnvironmentID: "env-1", Kind: KindApply, State: PendingApproval, RequestedBy: "usr-op",
		RiskClass: &two, RequiredApprover: string(risk.ApproverAdmin), FourEyes: true, DecisionDeadline: &deadline, Simulated: true}
	owner := Actor{Subject: authz.Subject{UserID: "usr-owner", OrganizationID: "org-1", Role: authz.RoleOwner, TokenID: "tok-1",
		Scopes: []authz.Scope{authz.ScopeDecide}}}
	p := PermissionsOf(r, owner, env, now)
	require.True(t, p.Approve.Allowed(), p.Approve.Reason())
	require.True(t, p.Reject.Allowed(), p.Reject.Reason())

	three := 3
	destroy := r
	destroy.Kind, destroy.RiskClass, destroy.RequiredApprover, destroy.Elevated = KindDestroy, &three, string(risk.ApproverOwner), true
	owner.Scopes = authz.Scopes
	owner.AuthenticatedAt = now // as if signed in just now: a token is still not a person
	p = PermissionsOf(destroy, owner, env, now)
	for name, v := range map[string]Verdict{"approve": p.Approve, "reject": p.Reject} {
		require.Equal(t, errs.CodeForbidden, v.Code(), name)
		require.Contains(t, v.Reason(), "An API token never decides", name)
	}
	session := owner
	session.TokenID, session.Scopes = "", nil
	require.True(t, PermissionsOf(destroy, session, env, now).Approve.Allowed(), "the same owner, signed in, may")

	reader := owner
	reader.Scopes = []authz.Scope{authz.ScopeRead, authz.ScopeApply}
	require.Equal(t, errs.CodeForbidden, PermissionsOf(r, reader, env, now).Approve.Code(), "deciding needs scope decide")
}
