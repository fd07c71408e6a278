package policies

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"sync"
	"testing"

	"github.com/open-policy-agent/opa/v1/ast"
	"github.com/stretchr/testify/require"

	"gantry/models/classify"
	"gantry/models/classify/classifytest"
)

func readPlan(t testing.TB, name string) []byte {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("testdata", name))
	require.NoError(t, err)
	return data
}

// templateFacts are the catalog templates' manifests, as far as the rules see them.
var templateFacts = map[string]Template{
	"bucket":   {Name: "bucket", Version: "1.1.1", Source: "catalog", ModuleDigest: "sha256:2e4598c10d937a15ff060d2c7ea8e3ac98167940b2a22af98d7d3d3fe02a56ee", Irreversible: []string{"sandbox_bucket"}, OrgScoped: []string{}},
	"network":  {Name: "network", Version: "1.1.1", Source: "catalog", ModuleDigest: "sha256:2b9573d6d98a72874d63188c3e289664072a948fe5837794b4e46c4f62eadb8e", Irreversible: []string{}, OrgScoped: []string{}},
	"postgres": {Name: "postgres", Version: "1.1.1", Source: "catalog", ModuleDigest: "sha256:ab591c3fe46df42d05200a7b9ed56c04094524286f32bee88793366343dd5b27", Irreversible: []string{"sandbox_database"}, OrgScoped: []string{}},
	// Planned by OpenTofu with the real hashicorp/kubernetes 1.13.4 provider.
	"team-namespace": {Name: "team-namespace", Version: "1.0.0", Source: "catalog", ModuleDigest: "sha256:c409d391127920ae4ec06e721416fc1c7454616fd7fab8e273879428edcb15e5",
		Irreversible: []string{"kubernetes_namespace"}, OrgScoped: []string{"kubernetes_cluster_role", "kubernetes_cluster_role_binding"}},
}

// runFor builds the run context the portal would: the environment of a tier (approval
// required in production), the template, and the plan's classification.
func runFor(t testing.TB, plan []byte, kind, tier string, tmpl Template) RunContext {
	t.Helper()
	res, err := classify.Classify(plan, classify.Options{Irreversible: tmpl.Irreversible, OrgScoped: tmpl.OrgScoped})
	require.NoError(t, err)
	return RunContext{
		ID: "run-0001", Kind: kind, Organization: "org-acme",
		Actor:          Actor{ID: "usr-alice", Name: "Alice Example", Role: "operator"},
		Environment:    Environment{ID: "env-" + tier, Name: tier, Tier: tier, RequiresApproval: tier == "production"},
		Template:       tmpl,
		Risk:           Risk{Class: 1, Rule: "create or update only", Approver: "system"},
		Classification: classification(res),
	}
}

func builtin(t testing.TB) *Bundle {
	t.Helper()
	b, err := Builtin()
	require.NoError(t, err)
	return b
}

// failed maps the failed rules of an evaluation to their messages.
func failed(ev Evaluation) map[string][]string {
	out := map[string][]string{}
	for _, r := range ev.Results {
		if !r.Passed {
			out[r.RuleID] = r.Messages
		}
	}
	return out
}

// The catalog's own templates, planned with their default inputs (by the mock runner,
// testdata/catalog_*.json), pass every rule in every tier.
func TestCatalogTemplatesPassEveryRule(t *testing.T) {
	b := builtin(t)
	for name, tmpl := range templateFacts {
		plan := readPlan(t, "catalog_"+name+".json")
		for _, tier := range []string{"development", "staging", "production"} {
			t.Run(name+"/"+tier, func(t *testing.T) {
				ev, err := b.Evaluate(context.Background(), plan, runFor(t, plan, "apply", tier, tmpl), nil)
				require.NoError(t, err)
				require.Empty(t, failed(ev))
				require.Equal(t, OutcomePass, ev.Outcome)
				require.Len(t, ev.Results, len(b.Rules()))
			})
		}
	}
}

func TestEvaluateViolations(t *testing.T) {
	b := builtin(t)
	plan := readPlan(t, "bucket_violations.json")
	ev, err := b.Evaluate(context.Background(), plan, runFor(t, plan, "apply", "production", templateFacts["bucket"]), nil)
	require.NoError(t, err)

	require.Equal(t, map[string][]string{
		"allowed_regions": {`module.bucket.sandbox_bucket.this: region "us-east" is not allowed (allowed: eu-central, eu-west)`},
		"data_deletion_via_destroy": {
			"module.bucket.sandbox_bucket.archive: deleting a data-bearing sandbox_bucket loses its data; only a destroy run may delete it (run kind: apply)",
		},
		"no_public_buckets": {"module.bucket.sandbox_bucket.this: the bucket would be public (anonymous reads); set public = false"},
		"required_labels":   {`module.bucket.sandbox_bucket.this: the label "template" is missing or empty (required: managed_by, template)`},
	}, failed(ev))
	require.Equal(t, OutcomeHard, ev.Outcome)
	require.Equal(t, b.Digest(), ev.BundleDigest)

	// Results: one per rule, sorted, with the rule's title, version and default mode.
	rules := b.Rules()
	require.Len(t, ev.Results, len(rules))
	for i, r := range ev.Results {
		require.Equal(t, rules[i].ID, r.RuleID)
		require.Equal(t, rules[i].Title, r.Title)
		require.Equal(t, rules[i].Version, r.RuleVersion)
		require.Equal(t, rules[i].Enforcement, r.Enforcement)
		require.Equal(t, len(r.Messages) == 0, r.Passed)
		require.NotNil(t, r.Messages)
	}

	// A destroy run may delete the data-bearing bucket.
	ev, err = b.Evaluate(context.Background(), plan, runFor(t, plan, "destroy", "production", templateFacts["bucket"]), nil)
	require.NoError(t, err)
	require.NotContains(t, failed(ev), "data_deletion_via_destroy")
}

// The outcome is the worst enforcement among the failed rules.
func TestEvaluateOutcomeLadder(t *testing.T) {
	b := builtin(t)
	plan := readPlan(t, "database_unprotected.json")
	tmpl := templateFacts["postgres"]
	for tier, want := range map[string]struct {
		outcome Outcome
		failed  []string
	}{
		"development": {OutcomeAdvisory, []string{"development_sizes"}},
		"staging":     {OutcomeSoft, []string{"database_protection"}},
		"production":  {OutcomeSoft, []string{"database_protection"}},
	} {
		t.Run(tier, func(t *testing.T) {
			ev, err := b.Evaluate(context.Background(), plan, runFor(t, plan, "apply", tier, tmpl), nil)
			require.NoError(t, err)
			var got []string
			for id := range failed(ev) {
				got = append(got, id)
			}
			require.ElementsMatch(t, want.failed, got)
			require.Equal(t, want.outcome, ev.Outcome)
		})
	}
	ev, err := b.Evaluate(context.Background(), plan, runFor(t, plan, "apply", "staging", tmpl), nil)
	require.NoError(t, err)
	require.Equal(t, []string{
		"module.postgres.sandbox_database.this: backup_retention_days must be at least 7 in staging",
		"module.postgres.sandbox_database.this: the database must be encrypted (encrypted = true) in staging",
	}, failed(ev)["database_protection"], "messages are sorted")
}

func TestEvaluateModes(t *testing.T) {
	b := builtin(t)
	plan := readPlan(t, "bucket_violations.json")
	run := runFor(t, plan, "apply", "production", templateFacts["bucket"])
	ctx := context.Background()

	base, err := b.Evaluate(ctx, plan, run, nil)
	require.NoError(t, err)

	// Hard rules made soft: the outcome drops to soft_failed.
	soft := map[string]Enforcement{"allowed_regions": SoftMandatory, "no_public_buckets": SoftMandatory, "data_deletion_via_destroy": SoftMandatory}
	ev, err := b.Evaluate(ctx, plan, run, soft)
	require.NoError(t, err)
	require.Equal(t, OutcomeSoft, ev.Outcome)
	for _, r := range ev.Results {
		if m, ok := soft[r.RuleID]; ok {
			require.Equal(t, m, r.Enforcement, r.RuleID)
		}
	}
	require.NotEqual(t, base.Digest, ev.Digest, "the mode in force is part of the result digest")

	// Everything failing made advisory: advisory; and an unknown rule id is ignored.
	adv := map[string]Enforcement{"allowed_regions": Advisory, "no_public_buckets": Advisory, "data_deletion_via_destroy": Advisory, "required_labels": Advisory, "org.gone": HardMandatory}
	ev, err = b.Evaluate(ctx, plan, run, adv)
	require.NoError(t, err)
	require.Equal(t, OutcomeAdvisory, ev.Outcome)

	// A passing rule made hard changes nothing but its mode.
	ev, err = b.Evaluate(ctx, plan, run, map[string]Enforcement{"private_network_ranges": HardMandatory})
	require.NoError(t, err)
	require.Equal(t, OutcomeHard, ev.Outcome)

	_, err = b.Evaluate(ctx, plan, run, map[string]Enforcement{"required_labels": "mandatory"})
	require.ErrorContains(t, err, `invalid enforcement "mandatory"`)
}

func TestEvaluateDigest(t *testing.T) {
	b := builtin(t)
	plan := readPlan(t, "bucket_violations.json")
	run := runFor(t, plan, "apply", "production", templateFacts["bucket"])
	ctx := context.Background()

	first, err := b.Evaluate(ctx, plan, run, nil)
	require.NoError(t, err)
	for range 3 {
		again, err := b.Evaluate(ctx, plan, run, nil)
		require.NoError(t, err)
		require.Equal(t, first.Digest, again.Digest)
		require.Equal(t, first.Results, again.Results)
	}
	want, err := ResultDigest(first.Results)
	require.NoError(t, err)
	require.Equal(t, want, first.Digest)
	require.Len(t, first.Digest, 64)

	// Another region: the same rules fail, with another message.
	require.Contains(t, string(plan), `"region": "us-east"`)
	moved := bytes.ReplaceAll(plan, []byte(`"region": "us-east"`), []byte(`"region": "eu-north"`))
	other, err := b.Evaluate(ctx, moved, run, nil)
	require.NoError(t, err)
	require.Equal(t, first.Outcome, other.Outcome)
	require.NotEqual(t, first.Digest, other.Digest)

	// The digest is over the JSON of the results, so a stored copy verifies.
	data, err := json.Marshal(first.Results)
	require.NoError(t, err)
	var stored []Result
	require.NoError(t, json.Unmarshal(data, &stored))
	again, err := ResultDigest(stored)
	require.NoError(t, err)
	require.Equal(t, first.Digest, again)
	require.Contains(t, string(data), `"rule_id":"allowed_regions"`)
	require.Contains(t, string(data), `"messages":[]`)
}

func TestRulesMetadata(t *testing.T) {
	b := builtin(t)
	rules, _ := ruleSources(t)
	want := map[string]Enforcement{
		"required_labels":           SoftMandatory,
		"allowed_regions":           HardMandatory,
		"no_public_buckets":         HardMandatory,
		"database_protection":       SoftMandatory,
		"development_sizes":         Advisory,
		"data_deletion_via_destroy": HardMandatory,
		"org_policy_changes_gated":  HardMandatory,
		"catalog_only_production":   HardMandatory,
		"private_network_ranges":    Advisory,
		"namespace_role_bindings":   SoftMandatory,
	}
	got := b.Rules()
	require.Len(t, got, len(want))
	for i, r := range got {
		if i > 0 {
			require.Less(t, got[i-1].ID, r.ID, "sorted by id")
		}
		require.Equal(t, want[r.ID], r.Enforcement, r.ID)
		require.NotEmpty(t, r.Title, r.ID)
		require.NotEmpty(t, r.Description, r.ID)
		require.Equal(t, OriginBuiltin, r.Origin)
		require.Equal(t, sha256Hex(rules["rules/"+r.ID+".rego"]), r.Version, r.ID)
	}
	require.Equal(t, "Buckets are never public", ruleByID(t, got, "no_public_buckets").Title)

	// Rules returns a copy.
	got[0].ID = "changed"
	require.NotEqual(t, "changed", b.Rules()[0].ID)

	// Builtin is compiled once.
	again, err := Builtin()
	require.NoError(t, err)
	require.Same(t, b, again)
	require.Len(t, b.Digest(), 64)
}

func ruleByID(t *testing.T, rules []Rule, id string) Rule {
	t.Helper()
	for _, r := range rules {
		if r.ID == id {
			return r
		}
	}
	t.Fatalf("no rule %s", id)
	return Rule{}
}

func TestEvaluateRejectsBadPlans(t *testing.T) {
	b := builtin(t)
	run := RunContext{Kind: "apply"}
	for name, plan := range map[string]string{
		"empty":     ``,
		"array":     `[]`,
		"truncated": `{"format_version": "1.2", "resource_changes": [`,
		"trailing":  `{} {}`,
	} {
		t.Run(name, func(t *testing.T) {
			_, err := b.Evaluate(context.Background(), []byte(plan), run, nil)
			require.ErrorIs(t, err, ErrPlan)
		})
	}
}

func TestEvaluateCancelled(t *testing.T) {
	b := builtin(t)
	plan := readPlan(t, "bucket_violations.json")
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err := b.Evaluate(ctx, plan, runFor(t, plan, "apply", "production", templateFacts["bucket"]), nil)
	require.ErrorIs(t, err, context.Canceled)
}

// One bundle serves concurrent evaluations (run with -race).
func TestEvaluateConcurrently(t *testing.T) {
	b := builtin(t)
	plan := readPlan(t, "bucket_violations.json")
	run := runFor(t, plan, "apply", "production", templateFacts["bucket"])
	want, err := b.Evaluate(context.Background(), plan, run, nil)
	require.NoError(t, err)
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for range 8 {
		wg.Go(func() {
			ev, err := b.Evaluate(context.Background(), plan, run, nil)
			if err == nil && ev.Digest != want.Digest {
				err = errors.New("another digest")
			}
			errs <- err
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		require.NoError(t, err)
	}
}

// input.run is what the JSON encoding of RunContext gives.
func TestRunValueMatchesJSON(t *testing.T) {
	run := RunContext{
		ID: "run-1", Kind: "destroy", Organization: "org-acme",
		Actor:       Actor{ID: "usr-1", Name: "Ann \"the owner\"", Role: "owner"},
		Environment: Environment{ID: "env-1", Name: "prod", Tier: "production", RequiresApproval: true, Restricted: true},
		Template:    Template{Name: "postgres", Version: "1.1.1", Source: "catalog", ModuleDigest: "sha256:00", Irreversible: []string{"sandbox_database"}, OrgScoped: []string{"sandbox_org_policy"}},
		Risk:        Risk{Class: 3, Rule: "destroy run", Approver: "owner"},
		Classification: Classification{
			Counts: map[string]int{"create": 0, "update": 1, "replace": 0, "destroy": 2, "read": 0, "no_op": 3},
			Changes: []ClassifiedChange{
				{Address: "module.postgres.sandbox_database.this", Type: "sandbox_database", Class: "destroy", Irreversible: true, ActionReason: "delete_because_no_resource_config", Dependents: []string{"module.postgres.sandbox_dns_record.this"}},
				{Address: "module.postgres.sandbox_network.this", Type: "sandbox_network", Class: "update", Dependents: []string{}},
			},
		},
	}
	data, err := json.Marshal(run)
	require.NoError(t, err)
	want, err := ast.ValueFromReader(bytes.NewReader(data))
	require.NoError(t, err)
	require.Equal(t, 0, want.Compare(runValue(&run)), "want %v\n got %v", want, runValue(&run))

	// Absent lists are empty arrays and every count key is present.
	empty := runValue(&RunContext{})
	v, err := empty.Find(ast.MustParseRef("_.template.irreversible_types")[1:])
	require.NoError(t, err)
	require.Equal(t, 0, v.Compare(ast.NewArray()))
	v, err = empty.Find(ast.MustParseRef("_.classification.counts.no_op")[1:])
	require.NoError(t, err)
	require.Equal(t, 0, v.Compare(ast.InternedTerm(0).Value))
}

// The 10,000-change plan of the benchmarks: every rule walks it and the failures are
// the ones its shape implies.
func TestEvaluate10k(t *testing.T) {
	plan := classifytest.Plan10k()
	run := bench10kRun(t, plan)
	ev, err := builtin(t).Evaluate(context.Background(), plan, run, nil)
	require.NoError(t, err)
	f := failed(ev)
	replaced := classifytest.Groups / 10 // networks replaced, and as many databases
	require.Len(t, f["required_labels"], 2*2*replaced, "two labels missing on each replaced network and database")
	require.Len(t, f["database_protection"], 2*replaced, "not encrypted, no backups")
	require.Len(t, f, 2)
	require.Equal(t, OutcomeSoft, ev.Outcome)
}
