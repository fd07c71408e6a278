package run_test

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"

	"gantry/models/run"
)

// TestRedactPlan: every value OpenTofu marks sensitive in a plan (root variables the
// configuration declares sensitive, and values by their *_sensitive and
// sensitive_values markers) becomes "(sensitive)"; everything else is kept as written.
func TestRedactPlan(t *testing.T) {
	t.Parallel()
	const s = `"(sensitive)"`
	for _, tc := range []struct {
		name, in, want string
	}{{
		name: "sensitive root variable: its value and default",
		in: `{"variables":{"secret":{"value":"hunter2-canary"},"region":{"value":"eu-west"}},
			"configuration":{"root_module":{"variables":{"secret":{"sensitive":true,"default":"d3fault"},"region":{}}}}}`,
		want: `{"variables":{"secret":{"value":` + s + `},"region":{"value":"eu-west"}},
			"configuration":{"root_module":{"variables":{"secret":{"sensitive":true,"default":` + s + `},"region":{}}}}}`,
	}, {
		name: "a variable the configuration does not declare sensitive is kept",
		in:   `{"variables":{"secret":{"value":"x"}},"configuration":{"root_module":{"variables":{"secret":{"sensitive":false}}}}}`,
		want: `{"variables":{"secret":{"value":"x"}},"configuration":{"root_module":{"variables":{"secret":{"sensitive":false}}}}}`,
	}, {
		name: "resource change: a map element after, the whole before",
		in: `{"resource_changes":[{"address":"a","change":{"actions":["update"],
			"before":{"labels":{"key_digest":"abc","team":"x"},"name":"n"},"after":{"labels":{"key_digest":"def","team":"x"},"name":"n"},
			"before_sensitive":true,"after_sensitive":{"labels":{"key_digest":true}}}}]}`,
		want: `{"resource_changes":[{"address":"a","change":{"actions":["update"],
			"before":` + s + `,"after":{"labels":{"key_digest":` + s + `,"team":"x"},"name":"n"},
			"before_sensitive":true,"after_sensitive":{"labels":{"key_digest":true}}}}]}`,
	}, {
		name: "list elements by an array marker; false and absent markers mask nothing",
		in:   `{"resource_drift":[{"change":{"before":{"l":["a","b","c"],"n":1},"after":null,"before_sensitive":{"l":[false,true],"n":false},"after_sensitive":false}}]}`,
		want: `{"resource_drift":[{"change":{"before":{"l":["a",` + s + `,"c"],"n":1},"after":null,"before_sensitive":{"l":[false,true],"n":false},"after_sensitive":false}}]}`,
	}, {
		name: "a marker of another shape masks the whole value",
		in:   `{"resource_changes":[{"change":{"after":"flat","after_sensitive":{"x":true}}},{"change":{"after":{"k":1},"after_sensitive":[true]}}]}`,
		want: `{"resource_changes":[{"change":{"after":` + s + `,"after_sensitive":{"x":true}}},{"change":{"after":` + s + `,"after_sensitive":[true]}}]}`,
	}, {
		name: "a null stays null",
		in:   `{"resource_changes":[{"change":{"before":null,"after":{"p":null,"q":"v"},"before_sensitive":true,"after_sensitive":{"p":true,"q":true}}}]}`,
		want: `{"resource_changes":[{"change":{"before":null,"after":{"p":null,"q":` + s + `},"before_sensitive":true,"after_sensitive":{"p":true,"q":true}}}]}`,
	}, {
		name: "output changes",
		in:   `{"output_changes":{"dsn":{"actions":["create"],"before":null,"after":"postgres://u:pw@h","after_sensitive":true,"before_sensitive":true},"url":{"after":"https://x","after_sensitive":false}}}`,
		want: `{"output_changes":{"dsn":{"actions":["create"],"before":null,"after":` + s + `,"after_sensitive":true,"before_sensitive":true},"url":{"after":"https://x","after_sensitive":false}}}`,
	}, {
		name: "planned values and the prior state: resources at any depth, sensitive outputs",
		in: `{"planned_values":{"outputs":{"dsn":{"sensitive":true,"value":"pw"},"url":{"sensitive":false,"value":"u"}},
			"root_module":{"child_modules":[{"address":"module.b","resources":[{"values":{"labels":{"key_digest":"abc"}},"sensitive_values":{"labels":{"key_digest":true}}}],
			"child_modules":[{"resources":[{"values":{"x":"deep"},"sensitive_values":{"x":true}}]}]}]}},
			"prior_state":{"format_version":"1.0","values":{"root_module":{"resources":[{"values":{"name":"old"},"sensitive_values":{"name":true}}]}}}}`,
		want: `{"planned_values":{"outputs":{"dsn":{"sensitive":true,"value":` + s + `},"url":{"sensitive":false,"value":"u"}},
			"root_module":{"child_modules":[{"address":"module.b","resources":[{"values":{"labels":{"key_digest":` + s + `}},"sensitive_values":{"labels":{"key_digest":true}}}],
			"child_modules":[{"resources":[{"values":{"x":` + s + `},"sensitive_values":{"x":true}}]}]}]}},
			"prior_state":{"format_version":"1.0","values":{"root_module":{"resources":[{"values":{"name":` + s + `},"sensitive_values":{"name":true}}]}}}}`,
	}, {
		name: "numbers are copied as written",
		in:   `{"variables":{"n":{"value":12345678901234567890123}},"resource_changes":[{"change":{"after":{"big":1.0000000000000000001,"s":"x"},"after_sensitive":{"s":true}}}]}`,
		want: `{"variables":{"n":{"value":12345678901234567890123}},"resource_changes":[{"change":{"after":{"big":1.0000000000000000001,"s":` + s + `},"after_sensitive":{"s":true}}}]}`,
	}} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			got, err := run.RedactPlan([]byte(tc.in))
			require.NoError(t, err)
			require.JSONEq(t, tc.want, string(got))
			again, err := run.RedactPlan(got)
			require.NoError(t, err)
			require.Equal(t, string(got), string(again), "redacting twice changes nothing")
		})
	}
}

// TestRedactPlanKeepsPlansWithoutSecrets: a plan with nothing sensitive is stored as
// the runner wrote it, byte for byte (its digest, spacing and key order kept).
func TestRedactPlanKeepsPlansWithoutSecrets(t *testing.T) {
	t.Parallel()
	in := []byte(`{"z":1,  "resource_changes":[{"change":{"after":{"a":"<b>"},"after_sensitive":{}}}],"a":2}` + "\n")
	got, err := run.RedactPlan(in)
	require.NoError(t, err)
	require.Equal(t, string(in), string(got))

	masked, err := run.RedactPlan([]byte(`{"resource_changes":[{"change":{"after":{"a":"<b>&","s":"x"},"after_sensitive":{"s":true}}}]}`))
	require.NoError(t, err)
	require.Contains(t, string(masked), `"<b>&"`, "a rewritten plan is not HTML-escaped")
	var doc map[string]any
	require.NoError(t, json.Unmarshal(masked, &doc))
}

// TestRedactPlanRefusesWhatIsNotAPlan: anything but one JSON object is an error (the
// plan gates then fail the phase), never a plan stored unredacted.
func TestRedactPlanRefusesWhatIsNotAPlan(t *testing.T) {
	t.Parallel()
	for _, in := range []string{``, `not json`, `[1,2]`, `null`, `"plan"`, `{"a":1} {"b":2}`, `{"a":1} x`, `{"a":`} {
		_, err := run.RedactPlan([]byte(in))
		require.Error(t, err, "%q", in)
	}
}
