package run

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"

	"gantry/models/classify"
	"gantry/models/environment"
	"gantry/models/risk"
	"gantry/policies"
)

// The request form's prediction (issue 37, item 4), asked of the same functions the
// plan gates use (classify.Classify, factsOf, assessRisk) and of impactOf: plans written
// by hand, no database, milliseconds. A rename of a bucket (a data-bearing type) is a
// replace that loses data, so it is risk 3 and an owner's, whatever the environment; a
// dry run of it says the same of "if applied".
func TestPredictedImpact(t *testing.T) {
	t.Parallel()
	bucket := TemplateFacts{Irreversible: []string{"sandbox_bucket"}, Prices: map[string]float64{"sandbox_bucket": 2.3}}
	dev := environment.Environment{Tier: environment.TierDevelopment}
	staging := environment.Environment{Tier: environment.TierStaging, RequiresApproval: true}
	prod := environment.Environment{Tier: environment.TierProduction, RequiresApproval: true}

	for _, tc := range []struct {
		name     string
		kind     Kind
		env      environment.Environment
		changes  []planChange
		class    risk.Class
		approver risk.Approver
		replaces []Replacement
		destroys int
		changed  int
		losesAny bool
	}{
		{name: "rename of a bucket in development", kind: KindApply, env: dev,
			changes: []planChange{{"sandbox_bucket.this", "sandbox_bucket", []string{"delete", "create"}, []string{"name"}}},
			class:   3, approver: risk.ApproverOwner, changed: 1, losesAny: true,
			replaces: []Replacement{{Address: "sandbox_bucket.this", Type: "sandbox_bucket", Irreversible: true, Because: []string{"name"}}}},
		{name: "a dry run of the same rename, as if applied", kind: KindApply, env: staging,
			changes: []planChange{{"sandbox_bucket.this", "sandbox_bucket", []string{"create", "delete"}, []string{"region"}}},
			class:   3, approver: risk.ApproverOwner, changed: 1, losesAny: true,
			replaces: []Replacement{{Address: "sandbox_bucket.this", Type: "sandbox_bucket", Irreversible: true, Because: []string{"region"}}}},
		{name: "retention changed in place", kind: KindApply, env: dev,
			changes: []planChange{{"sandbox_bucket.this", "sandbox_bucket", []string{"update"}, nil}},
			class:   1, approver: risk.ApproverSystem, changed: 1},
		{name: "replace of a type that holds no data", kind: KindApply, env: dev,
			changes: []planChange{{"sandbox_network.this", "sandbox_network", []string{"delete", "create"}, []string{"name"}}},
			class:   2, approver: risk.ApproverAdmin, changed: 1,
			replaces: []Replacement{{Address: "sandbox_network.this", Type: "sandbox_network", Because: []string{"name"}}}},
		{name: "in place in production", kind: KindApply, env: prod,
			changes: []planChange{{"sandbox_bucket.this", "sandbox_bucket", []string{"update"}, nil}},
			class:   2, approver: risk.ApproverAdmin, changed: 1},
		{name: "the same inputs again", kind: KindApply, env: dev,
			changes: []planChange{{"sandbox_bucket.this", "sandbox_bucket", []string{"no-op"}, nil}},
			class:   0, approver: risk.ApproverNone},
		{name: "destroy", kind: KindDestroy, env: dev,
			changes: []planChange{{"sandbox_bucket.this", "sandbox_bucket", []string{"delete"}, nil}},
			class:   3, approver: risk.ApproverOwner, destroys: 1, changed: 1, losesAny: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			res, err := classify.Classify(planDoc(t, tc.changes), bucket.ClassifyOptions())
			require.NoError(t, err)
			a := Assessment{Classification: res, Risk: assessRisk(risk.Default(), factsOf(Run{Kind: tc.kind}, tc.env, res, bucket))}
			got := impactOf(a)
			require.Equal(t, tc.class, got.Risk.Class)
			require.Equal(t, tc.approver, got.Risk.Decision.Approver)
			require.Equal(t, tc.replaces, got.Replaces)
			require.Len(t, got.Destroys, tc.destroys)
			require.Equal(t, tc.changed, got.Changes)
			require.Equal(t, tc.losesAny, got.LosesData())
		})
	}
}

// Failed policy rules come out refusing ones first, passed ones not at all.
func TestPredictedPolicyBlocks(t *testing.T) {
	t.Parallel()
	ev := policies.Evaluation{Results: []policies.Result{
		{RuleID: "a_advisory", Enforcement: policies.Advisory, Messages: []string{"a warning"}},
		{RuleID: "b_passes", Enforcement: policies.HardMandatory, Passed: true},
		{RuleID: "c_soft", Enforcement: policies.SoftMandatory, Messages: []string{"held"}},
		{RuleID: "d_hard", Enforcement: policies.HardMandatory, Messages: []string{"backup_retention_days must be at least 7"}},
	}}
	got := impactOf(Assessment{Policy: ev})
	ids := make([]string, 0, len(got.Blocks))
	for _, b := range got.Blocks {
		ids = append(ids, b.RuleID)
	}
	require.Equal(t, []string{"d_hard", "c_soft", "a_advisory"}, ids)
	require.True(t, got.Refused())
	require.Equal(t, []string{"backup_retention_days must be at least 7"}, got.Blocks[0].Messages)
	require.False(t, impactOf(Assessment{}).Refused())
}

// A dry run's headline never reads as if nothing were at stake.
func TestDryRunHeadline(t *testing.T) {
	t.Parallel()
	a := assessRisk(risk.Default(), risk.Facts{Kind: risk.KindApply, Replace: 1, Irreversible: true, Tier: "development"})
	got := DryRunHeadline(&a)
	require.Contains(t, got, "nobody decides")
	require.Contains(t, got, "Applied, the same change would be risk 3 (replace or destroy of an irreversible (data-bearing) resource): an owner")
	require.Contains(t, DryRunHeadline(nil), "its plan will tell")
	none := assessRisk(risk.Default(), risk.Facts{Kind: risk.KindApply})
	require.Contains(t, DryRunHeadline(&none), "would change nothing")
}

type planChange struct {
	address, typ string
	actions      []string
	replacePaths []string
}

// planDoc is a `tofu show -json` plan holding changes.
func planDoc(t *testing.T, changes []planChange) []byte {
	t.Helper()
	rcs := make([]map[string]any, 0, len(changes))
	for _, c := range changes {
		ch := map[string]any{"actions": c.actions}
		var paths [][]string
		for _, p := range c.replacePaths {
			paths = append(paths, []string{p})
		}
		if paths != nil {
			ch["replace_paths"] = paths
		}
		rcs = append(rcs, map[string]any{"address": c.address, "type": c.typ, "name": "this", "mode": "managed", "change": ch})
	}
	doc, err := json.Marshal(map[string]any{"format_version": "1.2", "resource_changes": rcs})
	require.NoError(t, err)
	return doc
}
