package policies

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

const retentionRego = `# Objects are kept at least 30 days.
package gantry.org.bucket_retention

metadata := {
	"id": "org.bucket_retention",
	"title": "Buckets keep objects at least 30 days",
	"description": "A sandbox_bucket that is created or updated keeps objects at least 30 days.",
	"enforcement": "soft_mandatory",
}

deny contains msg if {
	some rc in input.plan.resource_changes
	rc.type == "sandbox_bucket"
	some action in rc.change.actions
	action in {"create", "update"}
	rc.change.after.retention_days < 30
	msg := sprintf("%s: retention_days is %d; keep objects at least 30 days", [rc.address, rc.change.after.retention_days])
}
`

const retentionTests = `package gantry.org.bucket_retention_test

import data.gantry.org.bucket_retention

bucket(days) := {
	"address": "module.bucket.sandbox_bucket.this",
	"type": "sandbox_bucket",
	"change": {"actions": ["create"], "after": {"retention_days": days}},
}

test_allows_30_days if {
	count(bucket_retention.deny) == 0 with input as {"plan": {"resource_changes": [bucket(30)]}}
}

test_denies_7_days if {
	bucket_retention.deny == {"module.bucket.sandbox_bucket.this: retention_days is 7; keep objects at least 30 days"} with input as {"plan": {"resource_changes": [bucket(7)]}}
}
`

func TestValidateOrgPolicyGood(t *testing.T) {
	rule, err := ValidateOrgPolicy(context.Background(), "bucket_retention", retentionRego, retentionTests)
	require.NoError(t, err)
	require.Equal(t, Rule{
		ID:          "org.bucket_retention",
		Title:       "Buckets keep objects at least 30 days",
		Description: "A sandbox_bucket that is created or updated keeps objects at least 30 days.",
		Enforcement: SoftMandatory,
		Version:     sha256Hex(retentionRego),
		Origin:      OriginOrg,
	}, rule)

	// Tests may live in the policy's own package too.
	samePackage := strings.Replace(retentionTests, "package gantry.org.bucket_retention_test", "package gantry.org.bucket_retention", 1)
	samePackage = strings.ReplaceAll(samePackage, "bucket_retention.deny", "deny")
	samePackage = strings.Replace(samePackage, "import data.gantry.org.bucket_retention\n", "", 1)
	_, err = ValidateOrgPolicy(context.Background(), "bucket_retention", retentionRego, samePackage)
	require.NoError(t, err)
}

func TestValidateOrgPolicyErrors(t *testing.T) {
	replace := func(s, old, new string) string {
		require.Contains(t, s, old)
		return strings.Replace(s, old, new, 1)
	}
	for name, c := range map[string]struct {
		name, rego, tests string
		field, message    string
	}{
		"bad name":        {name: "Bucket-Retention", field: "name", message: "lower-case letters"},
		"short name":      {name: "ab", field: "name", message: "3 to 41"},
		"empty rego":      {rego: " \n", field: "rego", message: "empty"},
		"too large":       {rego: retentionRego + "# " + strings.Repeat("x", MaxSourceSize), field: "rego", message: "larger than 256 KiB"},
		"tests too large": {tests: retentionTests + "# " + strings.Repeat("x", MaxSourceSize), field: "tests", message: "larger than 256 KiB"},
		"wrong package": {
			rego: replace(retentionRego, "package gantry.org.bucket_retention", "package gantry.rules.bucket_retention"), field: "rego",
			message: "The package is gantry.rules.bucket_retention; it must be gantry.org.bucket_retention",
		},
		"missing metadata": {
			rego:  replace(retentionRego, "metadata := {", "meta := {"),
			field: "rego", message: "The rule has no metadata",
		},
		"wrong id": {
			rego:  replace(retentionRego, `"id": "org.bucket_retention"`, `"id": "bucket_retention"`),
			field: "rego", message: `metadata.id is "bucket_retention"; it must be "org.bucket_retention"`,
		},
		"no title": {
			rego:  replace(retentionRego, `"title": "Buckets keep objects at least 30 days",`, ""),
			field: "rego", message: "metadata.title is missing",
		},
		"bad enforcement": {
			rego:  replace(retentionRego, `"enforcement": "soft_mandatory"`, `"enforcement": "mandatory"`),
			field: "rego", message: `metadata.enforcement is "mandatory"`,
		},
		"computed metadata": {
			rego:  replace(retentionRego, `"enforcement": "soft_mandatory",`, `"enforcement": input.mode,`),
			field: "rego", message: "Line 4: metadata is not a constant object",
		},
		"missing deny": {
			rego:  replace(retentionRego, "deny contains msg if", "violation contains msg if"),
			field: "rego", message: "The rule has no deny set",
		},
		"helper rules are fine": {
			rego:  retentionRego + "\nmessages := {\"x\"}\n",
			field: "",
		},
		"complete deny": {
			rego:  replace(retentionRego, "deny contains msg if {", "deny := {msg |"),
			field: "rego", message: "deny must be a set of messages: deny contains msg if { ... }",
		},
		"syntax error": {
			rego:  replace(retentionRego, "some rc in input.plan.resource_changes", "some rc in input.plan.resource_changes {"),
			field: "rego", message: "Line 12: ",
		},
		"unsafe variable": {
			rego:  replace(retentionRego, `rc.type == "sandbox_bucket"`, `rc.type == kind`),
			field: "rego", message: "var kind is unsafe",
		},
		"http.send": {
			rego:  replace(retentionRego, `rc.type == "sandbox_bucket"`, `http.send({"method": "GET", "url": "http://169.254.169.254/"}).status_code == 200`),
			field: "rego", message: "undefined function http.send (policies may not call it",
		},
		"time.now_ns": {
			rego:  replace(retentionRego, `rc.type == "sandbox_bucket"`, `time.now_ns() > 0`),
			field: "rego", message: "time.now_ns",
		},
		"no tests": {tests: " ", field: "tests", message: "Tests are required"},
		"tests in another package": {
			tests: replace(retentionTests, "package gantry.org.bucket_retention_test", "package gantry.org.other_test"),
			field: "tests", message: "must be gantry.org.bucket_retention_test",
		},
		"no test rules": {
			tests: "package gantry.org.bucket_retention_test\n\nhelper := 1\n",
			field: "tests", message: "There are no tests",
		},
		"tests syntax error": {
			tests: replace(retentionTests, "test_allows_30_days if {", "test_allows_30_days if {{"),
			field: "tests", message: "Line ",
		},
		"tests compile error": {
			tests: replace(retentionTests, "count(bucket_retention.deny)", "count(bucket_retention.deny, 2)"),
			field: "tests", message: "count",
		},
		"failing test": {
			tests: replace(retentionTests, "retention_days is 7;", "retention_days is seven;"),
			field: "tests", message: "Failing tests: test_denies_7_days.",
		},
		"erroring test": {
			tests: retentionTests + "\nx := 1 if true\n\nx := 2 if true\n\ntest_conflict if x == 1\n",
			field: "tests", message: "test_conflict (",
		},
	} {
		t.Run(name, func(t *testing.T) {
			if c.name == "" {
				c.name = "bucket_retention"
			}
			if c.rego == "" {
				c.rego = retentionRego
			}
			if c.tests == "" {
				c.tests = retentionTests
			}
			_, err := ValidateOrgPolicy(context.Background(), c.name, c.rego, c.tests)
			if c.field == "" {
				require.NoError(t, err)
				return
			}
			var ve *ValidationError
			require.True(t, errors.As(err, &ve), "want a *ValidationError, got %v", err)
			require.NotEmpty(t, ve.Fields)
			var msgs []string
			for _, f := range ve.Fields {
				require.Equal(t, c.field, f.Field, "%v", ve.Fields)
				msgs = append(msgs, f.Message)
			}
			require.Contains(t, strings.Join(msgs, "\n"), c.message)
			require.Contains(t, err.Error(), c.field+": ")
		})
	}
}

func TestOrgPolicyInBundle(t *testing.T) {
	base := builtin(t)
	org := []OrgPolicy{{Name: "bucket_retention", Version: 3, Rego: retentionRego, Tests: retentionTests}}
	b, err := NewBundle(org)
	require.NoError(t, err)
	require.NotEqual(t, base.Digest(), b.Digest())
	require.Len(t, b.Rules(), len(base.Rules())+1)
	r := ruleByID(t, b.Rules(), "org.bucket_retention")
	require.Equal(t, OriginOrg, r.Origin)
	require.Equal(t, sha256Hex(retentionRego), r.Version)

	// Cached by digest; no org policies is the built-in bundle.
	again, err := NewBundle([]OrgPolicy{{Name: "bucket_retention", Version: 4, Rego: retentionRego}})
	require.NoError(t, err)
	require.Same(t, b, again)
	none, err := NewBundle(nil)
	require.NoError(t, err)
	require.Same(t, base, none)

	// The org rule takes part in the evaluation; the built-in ones are unchanged.
	plan := []byte(strings.ReplaceAll(string(readPlan(t, "catalog_bucket.json")), `"retention_days": 30`, `"retention_days": 7`))
	run := runFor(t, plan, "apply", "staging", templateFacts["bucket"])
	ev, err := b.Evaluate(context.Background(), plan, run, nil)
	require.NoError(t, err)
	require.Equal(t, b.Digest(), ev.BundleDigest)
	require.Equal(t, map[string][]string{
		"org.bucket_retention": {"module.bucket.sandbox_bucket.this: retention_days is 7; keep objects at least 30 days"},
	}, failed(ev))
	require.Equal(t, OutcomeSoft, ev.Outcome)
	require.Len(t, ev.Results, len(b.Rules()))

	// An environment can make it advisory like any rule.
	ev, err = b.Evaluate(context.Background(), plan, run, map[string]Enforcement{"org.bucket_retention": Advisory})
	require.NoError(t, err)
	require.Equal(t, OutcomeAdvisory, ev.Outcome)

	// A second policy changes the digest again.
	other := strings.ReplaceAll(retentionRego, "bucket_retention", "bucket_retention_strict")
	b2, err := NewBundle(append(org, OrgPolicy{Name: "bucket_retention_strict", Version: 1, Rego: other}))
	require.NoError(t, err)
	require.NotEqual(t, b.Digest(), b2.Digest())
}

func TestNewBundleRefusesBrokenPolicies(t *testing.T) {
	for name, org := range map[string][]OrgPolicy{
		"bad name":   {{Name: "Bad", Rego: retentionRego}},
		"duplicate":  {{Name: "bucket_retention", Rego: retentionRego}, {Name: "bucket_retention", Rego: retentionRego}},
		"wrong pkg":  {{Name: "other_name", Rego: retentionRego}},
		"syntax":     {{Name: "bucket_retention", Rego: retentionRego + "\ndeny contains x if {"}},
		"no compile": {{Name: "bucket_retention", Rego: strings.Replace(retentionRego, "rc.type ==", "rc.type == unknown_fn(1) ==", 1)}},
	} {
		t.Run(name, func(t *testing.T) {
			_, err := NewBundle(org)
			require.Error(t, err)
		})
	}
}

// A rule that fails at run time fails closed, alone: the other rules still report.
func TestEvaluateFailsClosedOnRuntimeError(t *testing.T) {
	conflicting := `package gantry.org.conflicting

metadata := {"id": "org.conflicting", "title": "Conflicts at run time", "enforcement": "advisory"}

size := "small" if input.run.kind == "apply"

size := "large" if input.run.kind == "apply"

deny contains "too large" if size == "large"
`
	b, err := NewBundle([]OrgPolicy{{Name: "conflicting", Version: 1, Rego: conflicting}})
	require.NoError(t, err)
	plan := readPlan(t, "bucket_violations.json")
	ev, err := b.Evaluate(context.Background(), plan, runFor(t, plan, "apply", "production", templateFacts["bucket"]), nil)
	require.NoError(t, err)
	f := failed(ev)
	require.Len(t, f["org.conflicting"], 1)
	require.Contains(t, f["org.conflicting"][0], "the rule could not be evaluated")
	require.Contains(t, f, "allowed_regions")
	require.Contains(t, f, "required_labels")
	require.Equal(t, OutcomeHard, ev.Outcome)

	// Not an apply: no conflict, and the rule passes.
	ev, err = b.Evaluate(context.Background(), plan, runFor(t, plan, "destroy", "production", templateFacts["bucket"]), nil)
	require.NoError(t, err)
	require.NotContains(t, failed(ev), "org.conflicting")
}
