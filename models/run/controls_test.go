package run

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"gantry/models/authz"
	"gantry/models/environment"
	"gantry/models/errs"
	"gantry/models/policy"
	"gantry/models/risk"
	"gantry/policies"
)

// TestOverrideRuleIsTheServicesRule: the review page's per-rule verdict is the rule the
// service's Override applies: a failed soft-mandatory rule not yet overridden, for
// whoever may override the run; never a passed, advisory, hard-mandatory or already
// overridden one, and nothing for whoever may not override.
func TestOverrideRuleIsTheServicesRule(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 12, 2, 10, 0, 0, 0, time.UTC)
	deadline := now.Add(time.Hour)
	env := environment.Environment{ID: "env-1", OrganizationID: "org-1", Tier: environment.TierStaging}
	two := 2
	r := Run{ID: "run-1", OrganizationID: "org-1", EnvironmentID: "env-1", Kind: KindApply, State: PolicyBlocked, PolicyOutcome: "soft_failed",
		RequestedBy: "usr-op", RiskClass: &two, RequiredApprover: string(risk.ApproverAdmin), FourEyes: true, DecisionDeadline: &deadline, Simulated: true}
	results := []policies.Result{
		{RuleID: "passed", RuleVersion: "1", Enforcement: policies.SoftMandatory, Passed: true},
		{RuleID: "advisory", RuleVersion: "1", Enforcement: policies.Advisory},
		{RuleID: "hard", RuleVersion: "1", Enforcement: policies.HardMandatory},
		{RuleID: "soft", RuleVersion: "2", Enforcement: policies.SoftMandatory},
		{RuleID: "done", RuleVersion: "1", Enforcement: policies.SoftMandatory},
	}
	overrides := map[string]policy.Override{"done": {RuleID: "done"}}
	admin := Actor{Subject: authz.Subject{UserID: "usr-admin", OrganizationID: "org-1", Role: authz.RoleAdmin}}
	p := PermissionsOf(r, admin, env, now)
	require.True(t, p.Override.Allowed(), p.Override.Reason())
	want := map[string]errs.Code{"passed": errs.CodeInvalidInput, "advisory": errs.CodeConflict, "hard": errs.CodeForbidden,
		"soft": "", "done": errs.CodeConflict, "missing": errs.CodeInvalidInput}
	for rule, code := range want {
		version := "1"
		if rule == "soft" {
			version = "2"
		}
		v := p.OverrideRule(results, overrides, rule, version)
		_, err := overridable(results, overrides, rule, version)
		require.Equal(t, err == nil, v.Allowed(), "the page and the service agree on %s", rule)
		if code == "" {
			require.True(t, v.Allowed(), "%s: %s", rule, v.Reason())
			continue
		}
		require.Equal(t, code, v.Code(), rule)
	}
	require.Equal(t, errs.CodeStaleEvidence, p.OverrideRule(results, overrides, "soft", "1").Code(), "another version is stale evidence")

	operator := Actor{Subject: authz.Subject{UserID: "usr-other", OrganizationID: "org-1", Role: authz.RoleOperator}}
	v := PermissionsOf(r, operator, env, now).OverrideRule(results, overrides, "soft", "2")
	require.Equal(t, errs.CodeForbidden, v.Code(), "an operator overrides nothing: the run's own verdict answers")
}

// TestDriftControlsAskWhatTheServicesRequire: a token that may only plan may check a
// workspace's drift (CheckDrift needs provisioning.plan) but not plan to correct it
// (PlanToCorrect needs runs.apply), so the page offers it only the check.
func TestDriftControlsAskWhatTheServicesRequire(t *testing.T) {
	t.Parallel()
	planner := authz.Subject{UserID: "usr-op", OrganizationID: "org-1", Role: authz.RoleOperator, TokenID: "tok-1",
		Scopes: []authz.Scope{authz.ScopePlan}}
	require.True(t, MayCheckDrift(planner))
	require.False(t, MayPlanToCorrect(planner))
	planner.Scopes = append(planner.Scopes, authz.ScopeApply)
	require.True(t, MayPlanToCorrect(planner))
	viewer := authz.Subject{UserID: "usr-v", OrganizationID: "org-1", Role: authz.RoleViewer}
	require.False(t, MayCheckDrift(viewer))
	require.False(t, MayPlanToCorrect(viewer))
	// A rollback is asked for as a request is (RequestRollback needs provisioning.plan):
	// the workspace page's rollback links follow it.
	require.True(t, MayRollBack(authz.Subject{UserID: "usr-op", OrganizationID: "org-1", Role: authz.RoleOperator}))
	require.False(t, MayRollBack(viewer))
}
