package handlers

import (
	"testing"

	"github.com/stretchr/testify/require"
)

// TestDataText: an audit event's values read as a person would write them, not as one
// line of escaped JSON.
func TestDataText(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name string
		in   any
		want string
	}{
		{"text as written", "approved <after> review", "approved <after> review"},
		{"a number", float64(3), "3"},
		{"yes", true, "yes"},
		{"no", false, "no"},
		{"nothing", nil, "none"},
		{"an object, indented", map[string]any{"serial": float64(2), "id": "sv-1"}, "{\n  \"id\": \"sv-1\",\n  \"serial\": 2\n}"},
		{"a list", []any{"a", "b"}, "[\n  \"a\",\n  \"b\"\n]"},
		{"text holding JSON, indented", `{"a":1}`, "{\n  \"a\": 1\n}"},
		{"text that only looks like JSON", "{not json", "{not json"},
	}
	for _, tc := range cases {
		require.Equal(t, tc.want, dataText(tc.in), tc.name)
	}
}
