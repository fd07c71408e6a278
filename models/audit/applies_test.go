package audit_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"gantry/models/audit"
	"gantry/models/authz"
)

// TestAppliesByEnvironmentJudgesEachApply: every apply (a run entering RUNNING) is
// judged by the approval in force when it started, from the chain alone: none, or one
// of another plan digest, is unevidenced; a person's approval by the run's requester
// (the same actor, or the approval saying self_approved) is self-approved; Gantry's is
// self-service. Each is planted as the events the run lifecycle records.
func TestAppliesByEnvironmentJudgesEachApply(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	log, ctx := f.log, context.Background()
	olivia := authz.Subject{UserID: "usr-olivia", Name: "Olivia", OrganizationID: f.org, Role: authz.RoleOperator}
	adam := authz.Subject{UserID: "usr-adam", Name: "Adam", OrganizationID: f.org, Role: authz.RoleAdmin}
	system := authz.System(f.org)
	record := func(who authz.Subject, action, runID, env string, number int, data map[string]any) {
		t.Helper()
		if data == nil {
			data = map[string]any{}
		}
		data["number"] = number
		require.NoError(t, log.RecordAs(ctx, who, audit.Entry{Action: action, TargetType: "run", TargetID: runID, Data: data, EnvironmentID: env}))
	}
	approved := func(digest string, more map[string]any) map[string]any {
		d := map[string]any{"approved_plan_digest": digest, "approval_kind": "person"}
		for k, v := range more {
			d[k] = v
		}
		return d
	}
	apply := map[string]any{"plan_digest": "sha256:aa"}
	// staging: approved by another person (evidenced), by the requester (self-approved,
	// twice: the same actor, and a plan again whose approval says so), and planted
	// without any approval (unevidenced).
	record(olivia, "run.queued", "run-1", "env-stg", 1, nil)
	record(adam, "run.approved", "run-1", "env-stg", 1, approved("sha256:aa", nil))
	record(system, "run.running", "run-1", "env-stg", 1, map[string]any{"plan_digest": "sha256:aa"})
	record(olivia, "run.queued", "run-2", "env-stg", 2, nil)
	record(olivia, "run.approved", "run-2", "env-stg", 2, approved("sha256:aa", nil))
	record(system, "run.running", "run-2", "env-stg", 2, apply)
	record(adam, "run.queued", "run-3", "env-stg", 3, nil)
	record(olivia, "run.approved", "run-3", "env-stg", 3, approved("sha256:aa", map[string]any{"self_approved": true}))
	record(system, "run.running", "run-3", "env-stg", 3, apply)
	record(system, "run.running", "run-4", "env-stg", 4, apply)
	// An approval of another plan than the one applied, then a verification failed.
	record(olivia, "run.queued", "run-5", "env-stg", 5, nil)
	record(adam, "run.approved", "run-5", "env-stg", 5, approved("sha256:bb", nil))
	record(system, "run.running", "run-5", "env-stg", 5, apply)
	record(system, "run.failed", "run-5", "env-stg", 5, map[string]any{"from": "VERIFYING"})
	record(system, "run.succeeded", "run-1", "env-stg", 1, map[string]any{"from": "VERIFYING"})
	// development: Gantry's self-service approval, never self-approval.
	record(olivia, "run.queued", "run-6", "env-dev", 1, nil)
	record(system, "run.approved", "run-6", "env-dev", 1, map[string]any{"approved_plan_digest": "sha256:aa", "approval_kind": "self-service"})
	record(system, "run.running", "run-6", "env-dev", 1, apply)

	got, err := log.AppliesByEnvironment(ctx, f.org)
	require.NoError(t, err)
	require.Equal(t, map[string]audit.ApplyCount{
		"env-stg": {Applied: 5, Unevidenced: 2, SelfApproved: 2, Verified: 1, VerificationFailed: 1,
			UnevidencedRuns:  []audit.RunRef{{ID: "run-5", Number: 5}, {ID: "run-4", Number: 4}},
			SelfApprovedRuns: []audit.RunRef{{ID: "run-3", Number: 3}, {ID: "run-2", Number: 2}}},
		"env-dev": {Applied: 1, SelfService: 1, SelfServiceRuns: []audit.RunRef{{ID: "run-6", Number: 1}}},
	}, got)
}
