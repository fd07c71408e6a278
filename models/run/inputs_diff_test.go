package run

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestDiffInputs: a run's inputs against those of the workspace's last applied run, as
// the review shows them. A masked (sensitive) value is never shown and never said to be
// unchanged; without a last applied run every input is new.
func TestDiffInputs(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name     string
		was, now string // "" for was: nothing applied before
		want     []InputDiff
	}{
		{"unchanged", `{"name":"invoices","versioning":true}`, `{"versioning":true,"name":"invoices"}`, []InputDiff{
			{Name: "name", Was: "invoices", Now: "invoices", Status: InputUnchanged},
			{Name: "versioning", Was: "true", Now: "true", Status: InputUnchanged}}},
		{"changed", `{"name":"invoices","retention_days":7}`, `{"name":"invoices-eu","retention_days":30}`, []InputDiff{
			{Name: "name", Was: "invoices", Now: "invoices-eu", Status: InputChanged},
			{Name: "retention_days", Was: "7", Now: "30", Status: InputChanged}}},
		{"same number written differently", `{"size":3}`, `{"size":3.0}`, []InputDiff{
			{Name: "size", Was: "3", Now: "3", Status: InputUnchanged}}},
		{"list and map by value", `{"tags":{"a":"1","b":"2"},"zones":["a","b"]}`, `{"tags":{"b":"2","a":"1"},"zones":["b","a"]}`, []InputDiff{
			{Name: "tags", Was: `{"a":"1","b":"2"}`, Now: `{"a":"1","b":"2"}`, Status: InputUnchanged},
			{Name: "zones", Was: `["a","b"]`, Now: `["b","a"]`, Status: InputChanged}}},
		{"added", `{"name":"invoices"}`, `{"name":"invoices","tier":"cold"}`, []InputDiff{
			{Name: "name", Was: "invoices", Now: "invoices", Status: InputUnchanged},
			{Name: "tier", Now: "cold", Status: InputAdded}}},
		{"removed", `{"name":"invoices","tier":"cold"}`, `{"name":"invoices"}`, []InputDiff{
			{Name: "name", Was: "invoices", Now: "invoices", Status: InputUnchanged},
			{Name: "tier", Was: "cold", Status: InputRemoved}}},
		{"sensitive on both sides is never unchanged", `{"password":"(sensitive)"}`, `{"password":"(sensitive)"}`, []InputDiff{
			{Name: "password", Status: InputSensitive, Sensitive: true}}},
		{"sensitive on one side only", `{"token":"plain"}`, `{"token":"(sensitive)"}`, []InputDiff{
			{Name: "token", Status: InputSensitive, Sensitive: true}}},
		{"sensitive added: known, value hidden", `{}`, `{"password":"(sensitive)"}`, []InputDiff{
			{Name: "password", Status: InputAdded, Sensitive: true}}},
		{"sensitive removed: known, value hidden", `{"password":"(sensitive)"}`, `{}`, []InputDiff{
			{Name: "password", Status: InputRemoved, Sensitive: true}}},
		{"first run", "", `{"name":"invoices","password":"(sensitive)"}`, []InputDiff{
			{Name: "name", Now: "invoices", Status: InputNew},
			{Name: "password", Status: InputNew, Sensitive: true}}},
		{"first run without inputs", "", `null`, []InputDiff{}},
		{"previous run stored no inputs", `null`, `{"name":"a"}`, []InputDiff{
			{Name: "name", Now: "a", Status: InputAdded}}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			var was json.RawMessage
			if tc.was != "" {
				was = json.RawMessage(tc.was)
			}
			got, err := DiffInputs(was, json.RawMessage(tc.now))
			require.NoError(t, err)
			require.Equal(t, tc.want, got)
			for _, d := range got {
				if d.Sensitive {
					require.Empty(t, d.Was+d.Now, "a sensitive value is never shown")
				}
			}
		})
	}
}

// TestDiffInputsChanged: only a known change counts as one.
func TestDiffInputsChanged(t *testing.T) {
	t.Parallel()
	for s, want := range map[InputStatus]bool{InputChanged: true, InputAdded: true, InputRemoved: true,
		InputUnchanged: false, InputSensitive: false, InputNew: false} {
		require.Equal(t, want, InputDiff{Status: s}.Changed(), s)
	}
}

// TestDiffInputsBadJSON: stored inputs that are not a JSON object are an error, not an
// empty comparison.
func TestDiffInputsBadJSON(t *testing.T) {
	t.Parallel()
	_, err := DiffInputs(json.RawMessage(`{}`), json.RawMessage(`[1]`))
	require.Error(t, err)
	_, err = DiffInputs(json.RawMessage(`{`), json.RawMessage(`{}`))
	require.Error(t, err)
}
