package policies

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/open-policy-agent/opa/v1/ast"
	"github.com/stretchr/testify/require"
)

// The clear values that testdata/database_sensitive.json marks as sensitive.
var sensitiveFixtureSecrets = []string{
	"hunter2-Sup3r-s3cret",                // the new password (after, planned values, a variable)
	"old-pa55word-2025",                   // the old one (before, prior state)
	`tok"en<ü>-9f8e7d`,                    // in the sensitive connection map
	`tok"en<ü>-0a1b2c`,                    // the same, before
	"app_admin_user",                      // the connection map's username
	"ssh-ed25519 AAAA-private-deploy-key", // one sensitive element of a list
	"ssh-ed25519 AAAA-old-deploy-key",     // the same, before
}

// at walks a JSON value by object keys and array indexes.
func at(t *testing.T, v any, path ...any) any {
	t.Helper()
	for _, p := range path {
		switch k := p.(type) {
		case string:
			m, ok := v.(map[string]any)
			require.True(t, ok, "%v: not an object at %q", path, k)
			v, ok = m[k]
			require.True(t, ok, "%v: no key %q", path, k)
		case int:
			a, ok := v.([]any)
			require.True(t, ok, "%v: not an array at %d", path, k)
			require.Less(t, k, len(a), "%v", path)
			v = a[k]
		}
	}
	return v
}

func maskedFixture(t *testing.T) (map[string]any, []string) {
	t.Helper()
	plan, secrets, err := planValue(readPlan(t, "database_sensitive.json"))
	require.NoError(t, err)
	v, err := ast.JSON(plan)
	require.NoError(t, err)
	return v.(map[string]any), secrets
}

// input.plan has every value OpenTofu marks as sensitive replaced by "(sensitive
// value)", in resource changes, planned values, prior state, outputs and variables,
// and nothing else changed.
func TestMaskSensitivePlan(t *testing.T) {
	plan, secrets := maskedFixture(t)
	const m = SensitiveMask

	db := at(t, plan, "resource_changes", 0, "change")
	for _, side := range []string{"before", "after"} {
		require.Equal(t, m, at(t, db, side, "password"), side)
		require.Equal(t, m, at(t, db, side, "connection"), "a sensitive map becomes the string (%s)", side)
		require.Equal(t, "ssh-ed25519 AAAA-public-key", at(t, db, side, "allowed_keys", 0), side)
		require.Equal(t, m, at(t, db, side, "allowed_keys", 1), side)
		// The rest is as it was.
		require.Equal(t, "orders", at(t, db, side, "name"), side)
		require.Equal(t, false, at(t, db, side, "encrypted"), side)
		require.Equal(t, map[string]any{"managed_by": "gantry", "template": "postgres"}, at(t, db, side, "labels"), side)
		require.Equal(t, json.Number("20"), at(t, db, side, "storage_gb"), side)
	}
	require.Equal(t, map[string]any{"allowed_keys": []any{false, true}, "connection": true, "labels": map[string]any{}, "password": true},
		at(t, db, "after_sensitive"), "the markers stay")
	require.Equal(t, "orders-net", at(t, plan, "resource_changes", 1, "change", "after", "name"))

	out := at(t, plan, "output_changes", "connection_string")
	require.Equal(t, m, at(t, out, "before"))
	require.Equal(t, m, at(t, out, "after"))
	require.Equal(t, "db-0001", at(t, plan, "output_changes", "database_id", "after"))

	for _, state := range [][]any{{"planned_values"}, {"prior_state", "values"}} {
		res := at(t, plan, append(state, "root_module", "child_modules", 0, "resources", 0, "values")...)
		require.Equal(t, m, at(t, res, "password"), state)
		require.Equal(t, m, at(t, res, "connection"), state)
		require.Equal(t, m, at(t, res, "allowed_keys", 1), state)
		require.Equal(t, "ssh-ed25519 AAAA-public-key", at(t, res, "allowed_keys", 0), state)
		require.Equal(t, "small", at(t, res, "size"), state)
		require.Equal(t, m, at(t, plan, append(state, "outputs", "connection_string", "value")...), state)
		require.Equal(t, "db-0001", at(t, plan, append(state, "outputs", "database_id", "value")...), state)
	}
	require.Equal(t, "eu-west", at(t, plan, "prior_state", "values", "root_module", "child_modules", 0, "resources", 1, "values", "region"))

	require.Equal(t, m, at(t, plan, "variables", "db_password", "value"))
	require.Equal(t, "orders", at(t, plan, "variables", "name", "value"))
	vars := at(t, plan, "configuration", "root_module", "variables")
	require.Equal(t, m, at(t, vars, "db_password", "default"))
	require.Equal(t, "orders", at(t, vars, "name", "default"))

	// A string the plan does not mark stays, even where the same string is masked
	// elsewhere (the parser shares equal strings: nothing is changed in place).
	config := at(t, plan, "configuration", "root_module", "module_calls", "postgres", "module", "resources", 0, "expressions")
	require.Equal(t, "ssh-ed25519 AAAA-private-deploy-key", at(t, config, "deploy_key", "constant_value"))

	// Nothing else holds a secret.
	delete(plan, "configuration")
	data, err := json.Marshal(plan)
	require.NoError(t, err)
	for _, s := range sensitiveFixtureSecrets {
		require.NotContains(t, string(data), s)
		require.Contains(t, secrets, s, "the masked strings are returned")
	}
	require.NotContains(t, string(data), "tok\\\"en")
	require.Contains(t, secrets, "postgres://app_admin_user:old-pa55word-2025@db.internal.example/orders")
	require.NotContains(t, secrets, "orders", "only masked strings")
}

// The markers' shapes: true masks a whole value (not a null), objects and arrays
// mirror the value, false and empty markers mask nothing, and a marker that does
// not fit the value masks all of it if it marks anything.
func TestMaskSensitiveShapes(t *testing.T) {
	for _, c := range []struct {
		name, value, marks, want string
		secrets                  []string
	}{
		{"true", `{"a": "s3cret", "b": [1, {"c": "deep-secret"}]}`, `true`, `"(sensitive value)"`, []string{"deep-secret", "s3cret"}},
		{"number", `1234`, `true`, `"(sensitive value)"`, nil},
		{"null stays", `null`, `true`, `null`, nil},
		{"false", `{"a": "s3cret"}`, `false`, `{"a": "s3cret"}`, nil},
		{"empty", `{"a": "s3cret", "l": [1]}`, `{"a": false, "l": [false]}`, `{"a": "s3cret", "l": [1]}`, nil},
		{"short strings are not remembered", `{"a": "abc", "b": "abcd"}`, `{"a": true, "b": true}`, `{"a": "(sensitive value)", "b": "(sensitive value)"}`, []string{"abcd"}},
		{"nested", `{"a": {"b": "s3cret", "c": "plain"}, "d": null}`, `{"a": {"b": true}, "d": true, "x": true}`, `{"a": {"b": "(sensitive value)", "c": "plain"}, "d": null}`, []string{"s3cret"}},
		{"list of objects", `[{"k": "key-1", "n": 1}, {"k": "key-2", "n": 2}]`, `[{"k": true}, {}]`, `[{"k": "(sensitive value)", "n": 1}, {"k": "key-2", "n": 2}]`, []string{"key-1"}},
		{"longer marker", `["a-secret"]`, `[true, true]`, `["(sensitive value)"]`, []string{"a-secret"}},
		{"mismatch", `{"a": "s3cret"}`, `{"a": {"b": true}}`, `{"a": "(sensitive value)"}`, []string{"s3cret"}},
		{"mismatch unmarked", `{"a": ["s3cret"]}`, `{"a": {}}`, `{"a": ["s3cret"]}`, nil},
	} {
		t.Run(c.name, func(t *testing.T) {
			doc := `{"resource_changes": [{"address": "x.y", "change": {"after": ` + c.value + `, "after_sensitive": ` + c.marks + `}}]}`
			plan, secrets, err := planValue([]byte(doc))
			require.NoError(t, err)
			got, err := plan.Find(ast.MustParseRef("_.resource_changes[0].change.after")[1:])
			require.NoError(t, err)
			want, err := parseJSON([]byte(c.want))
			require.NoError(t, err)
			require.Equal(t, 0, want.Compare(got), "want %v\n got %v", want, got)
			require.Equal(t, want.Hash(), got.Hash(), "rebuilt values have their hashes")
			require.Equal(t, c.secrets, secrets)

			// The whole input is consistent: what it is equal to, it hashes as.
			fresh, err := parseJSON([]byte(`{"resource_changes": [{"address": "x.y", "change": {"after": ` + c.want + `, "after_sensitive": ` + c.marks + `}}]}`))
			require.NoError(t, err)
			require.Equal(t, 0, fresh.Compare(plan))
			require.Equal(t, fresh.Hash(), plan.Hash())
		})
	}
	// The interned values the parser shares are untouched.
	require.Equal(t, ast.Boolean(true), ast.InternedTerm(true).Value)
}

// A plan without sensitive values is given to the rules as it is.
func TestMaskSensitiveNothingMarked(t *testing.T) {
	data := readPlan(t, "catalog_postgres.json")
	masked, secrets, err := planValue(data)
	require.NoError(t, err)
	require.Nil(t, secrets)
	raw, err := parseJSON(data)
	require.NoError(t, err)
	require.Equal(t, 0, raw.Compare(masked))
}

func TestRedactor(t *testing.T) {
	r := newRedactor([]string{"hunter22", "hunter22-and-more", "abcdefgh", "xabc", `qu"ote<&>`})
	for in, want := range map[string]string{
		"":                             "",
		"no secret here":               "no secret here",
		"pw=hunter22.":                 "pw=(sensitive value).",
		"hunter22 and hunter22":        "(sensitive value) and (sensitive value)",
		"hunter2":                      "hunter2",
		"x hunter22-and-more y":        "x (sensitive value) y", // the longest of those starting there
		"xxabcdefgh!":                  "x(sensitive value)!",   // overlapping: one mask over both
		"abcdefghhunter22":             "(sensitive value)",     // adjacent
		`sprintf: {"p": "qu\"ote<&>"}`: `sprintf: {"p": "(sensitive value)"}`,
		`json: {"p":"qu\"ote\u003c\u0026\u003e"}`: `json: {"p":"(sensitive value)"}`,
		`raw: qu"ote<&>`: `raw: (sensitive value)`,
	} {
		require.Equal(t, want, r.redact(in), in)
	}
	require.Nil(t, newRedactor(nil))
	var none *redactor
	require.Equal(t, "hunter22", none.redact("hunter22"))
}

// leakValuesRego is an organization policy written carelessly: its messages show
// whole values of the plan.
const leakValuesRego = `package gantry.org.leak_values

metadata := {
	"id": "org.leak_values",
	"title": "Shows the values it checks",
	"description": "Reports every resource's values (a careless policy).",
	"enforcement": "advisory",
}

deny contains msg if {
	some rc in input.plan.resource_changes
	msg := sprintf("%s: %v", [rc.address, rc.change.after])
}

deny contains msg if {
	some rc in input.plan.resource_changes
	msg := sprintf("%s was: %v", [rc.address, rc.change.before])
}

deny contains sprintf("prior state: %v", [input.plan.prior_state])

deny contains sprintf("planned values: %v", [input.plan.planned_values])

deny contains sprintf("output changes: %v", [input.plan.output_changes])

deny contains sprintf("variables: %v", [input.plan.variables])
`

// leakConfigRego shows the configuration, which OpenTofu does not mark: a secret
// written there as a literal is masked in the messages only.
const leakConfigRego = `package gantry.org.leak_config

metadata := {
	"id": "org.leak_config",
	"title": "Shows the configuration",
	"enforcement": "advisory",
}

deny contains sprintf("configuration: %v", [input.plan.configuration])

deny contains {"as json": input.plan.configuration.root_module.module_calls.postgres.module.resources[0].expressions}
`

func evaluateSensitiveFixture(t *testing.T, org ...OrgPolicy) Evaluation {
	t.Helper()
	b, err := NewBundle(org)
	require.NoError(t, err)
	plan := readPlan(t, "database_sensitive.json")
	ev, err := b.Evaluate(context.Background(), plan, runFor(t, plan, "apply", "staging", templateFacts["postgres"]), nil)
	require.NoError(t, err)
	return ev
}

// requireNoSecret fails if the JSON of the evaluation holds any of the fixture's
// sensitive strings, as is or as its renderings quote it.
func requireNoSecret(t *testing.T, ev Evaluation) {
	t.Helper()
	data, err := json.Marshal(ev)
	require.NoError(t, err)
	for _, s := range append(sensitiveFixtureSecrets, "9f8e7d", "0a1b2c") {
		require.NotContains(t, string(data), s)
		require.NotContains(t, string(data), strings.Trim(string(must(json.Marshal(s))), `"`))
	}
}

func must[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}

// A policy that copies values into its messages gets the masked ones: no secret
// reaches the evaluation (which is stored and shown), the other values do, and the
// built-in rules see the plan as before.
func TestEvaluateMasksSensitiveValues(t *testing.T) {
	ev := evaluateSensitiveFixture(t, OrgPolicy{Name: "leak_values", Version: 1, Rego: leakValuesRego})
	requireNoSecret(t, ev)

	msgs := failed(ev)["org.leak_values"]
	require.Len(t, msgs, 8)
	byPrefix := func(prefix string) string {
		for _, m := range msgs {
			if strings.HasPrefix(m, prefix) {
				return m
			}
		}
		t.Fatalf("no message %q… in %q", prefix, msgs)
		return ""
	}
	after := byPrefix("module.postgres.sandbox_database.this: ")
	require.Contains(t, after, `"password": "(sensitive value)"`)
	require.Contains(t, after, `"connection": "(sensitive value)"`, "the map is masked whole")
	require.Contains(t, after, `"allowed_keys": ["ssh-ed25519 AAAA-public-key", "(sensitive value)"]`)
	require.Contains(t, after, `"name": "orders"`)
	require.Contains(t, after, `"engine": "postgres"`)
	before := byPrefix("module.postgres.sandbox_database.this was: ")
	require.Contains(t, before, `"password": "(sensitive value)"`)
	require.Contains(t, before, `"connection": "(sensitive value)"`)

	prior := byPrefix("prior state: ")
	require.Contains(t, prior, `"password": "(sensitive value)"`)
	require.Contains(t, prior, `"connection": "(sensitive value)"`, "masked in the input, not only in the message")
	require.Contains(t, prior, `"connection_string": {"sensitive": true, "type": "string", "value": "(sensitive value)"}`)
	require.Contains(t, prior, `"region": "eu-west"`)
	require.Contains(t, byPrefix("planned values: "), `"connection": "(sensitive value)"`)
	require.Contains(t, byPrefix("planned values: "), `"connection_string": {"sensitive": true, "type": "string", "value": "(sensitive value)"}`)
	require.Contains(t, byPrefix("output changes: "), `"after": "(sensitive value)"`)
	require.Contains(t, byPrefix("output changes: "), `"after": "db-0001"`)
	require.Contains(t, byPrefix("variables: "), `"db_password": {"value": "(sensitive value)"}`)

	// A built-in rule reads the same plan's non-sensitive values as before.
	require.Equal(t, []string{
		"module.postgres.sandbox_database.this: the database must be encrypted (encrypted = true) in staging",
	}, failed(ev)["database_protection"])
	require.Len(t, failed(ev), 2)
}

// Defence in depth: a sensitive string that reaches a message some other way (here a
// literal in the configuration, which OpenTofu does not mark) is masked in the
// message, as a string or as JSON.
func TestEvaluateRedactsSensitiveStrings(t *testing.T) {
	ev := evaluateSensitiveFixture(t, OrgPolicy{Name: "leak_config", Version: 1, Rego: leakConfigRego})
	requireNoSecret(t, ev)
	msgs := failed(ev)["org.leak_config"]
	require.Len(t, msgs, 2)
	require.Contains(t, msgs[0], `"constant_value": "(sensitive value)"`)
	require.Contains(t, msgs[1], `"as json"`)
	require.Contains(t, msgs[1], `"constant_value":"(sensitive value)"`)
	require.Contains(t, msgs[1], `"constant_value":"postgres"`)
	require.Equal(t, msgs, sortDistinct(append([]string(nil), msgs...)), "still sorted")
}

// Every place OpenTofu marks values is masked, at any module depth; a lookalike of
// a marker anywhere else is a value like any other.
func TestMaskSensitivePlaces(t *testing.T) {
	const doc = `{
	  "resource_drift": [{"address": "a.b", "change": {"before": {"k": "drift-old"}, "after": {"k": "drift-new"}, "before_sensitive": {"k": true}, "after_sensitive": {"k": true}}}],
	  "planned_values": {"root_module": {
	    "resources": [{"address": "a.root", "values": {"k": "root-secret", "n": 1}, "sensitive_values": {"k": true}}],
	    "child_modules": [{"address": "module.m", "child_modules": [{"address": "module.m.module.n",
	      "resources": [{"address": "module.m.module.n.a.deep", "values": {"k": "deep-secret", "n": 2}, "sensitive_values": {"k": true}}]}]}]}},
	  "resource_changes": [{"address": "a.c", "change": {
	    "before": null,
	    "after": {"after": "not-a-secret", "after_sensitive": {"after": true}, "sensitive": true, "value": "plain"},
	    "after_sensitive": {}, "before_sensitive": false}}],
	  "configuration": {"before": "config-value", "before_sensitive": true, "outputs": {"o": {"sensitive": true, "value": "config-output"}}},
	  "output_changes": {"o": {"before": null, "after": 12345, "before_sensitive": false, "after_sensitive": true}}
	}`
	v, secrets, err := planValue([]byte(doc))
	require.NoError(t, err)
	want := map[string]any{}
	require.NoError(t, json.Unmarshal([]byte(doc), &want))
	set := func(val any, path ...any) {
		parent := at(t, want, path[:len(path)-1]...)
		switch k := path[len(path)-1].(type) {
		case string:
			parent.(map[string]any)[k] = val
		case int:
			parent.([]any)[k] = val
		}
	}
	m := SensitiveMask
	set(m, "resource_drift", 0, "change", "before", "k")
	set(m, "resource_drift", 0, "change", "after", "k")
	set(m, "planned_values", "root_module", "resources", 0, "values", "k")
	set(m, "planned_values", "root_module", "child_modules", 0, "child_modules", 0, "resources", 0, "values", "k")
	set(m, "output_changes", "o", "after")
	data, err := json.Marshal(want)
	require.NoError(t, err)
	wantV, err := ast.ValueFromReader(strings.NewReader(string(data)))
	require.NoError(t, err)
	require.Equal(t, 0, wantV.Compare(v), "want %v\n got %v", wantV, v)
	require.Equal(t, []string{"deep-secret", "drift-new", "drift-old", "root-secret"}, secrets)
}
