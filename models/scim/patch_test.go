package scim_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"gantry/models/scim"
)

// TestApply: the PATCH shapes Entra and Okta send, applied to a document.
func TestApply(t *testing.T) {
	t.Parallel()
	doc := func() map[string]any {
		return map[string]any{"userName": "a", "active": true, "emails": []any{map[string]any{"type": "work", "value": "a@x"}},
			"members": []any{map[string]any{"value": "u1"}}}
	}
	for _, c := range []struct {
		name string
		ops  []scim.Op
		want func(map[string]any)
		err  error
	}{
		{"without path", []scim.Op{{Op: "replace", Value: map[string]any{"active": false}}}, func(d map[string]any) { d["active"] = false }, nil},
		{"filtered sub-attribute", []scim.Op{{Op: "replace", Attr: "emails", Filter: &scim.Match{Attr: "type", Value: "work"}, Sub: "value", Value: "b@x"}},
			func(d map[string]any) { d["emails"] = []any{map[string]any{"type": "work", "value": "b@x"}} }, nil},
		{"add member", []scim.Op{{Op: "add", Attr: "members", Value: []any{map[string]any{"value": "u2"}}}},
			func(d map[string]any) {
				d["members"] = []any{map[string]any{"value": "u1"}, map[string]any{"value": "u2"}}
			}, nil},
		{"remove member by filter", []scim.Op{{Op: "remove", Attr: "members", Filter: &scim.Match{Attr: "value", Value: "u1"}}},
			func(d map[string]any) { d["members"] = []any{} }, nil},
		{"remove member by value", []scim.Op{{Op: "remove", Attr: "members", Value: []any{map[string]any{"value": "u1"}}}},
			func(d map[string]any) { d["members"] = []any{} }, nil},
		{"sub-attribute", []scim.Op{{Op: "replace", Attr: "name", Sub: "familyName", Value: "F"}},
			func(d map[string]any) { d["name"] = map[string]any{"familyName": "F"} }, nil},
		{"remove without path", []scim.Op{{Op: "remove"}}, nil, scim.ErrNoTarget},
		{"unknown op", []scim.Op{{Op: "explode", Attr: "active"}}, nil, scim.ErrInvalidValue},
	} {
		t.Run(c.name, func(t *testing.T) {
			got := doc()
			err := scim.Apply(got, c.ops)
			if c.err != nil {
				require.ErrorIs(t, err, c.err)
				return
			}
			require.NoError(t, err)
			want := doc()
			c.want(want)
			require.Equal(t, want, got)
		})
	}
}

// TestBool: booleans as directories send them.
func TestBool(t *testing.T) {
	t.Parallel()
	for in, want := range map[any]bool{true: true, false: false, "False": false, "TRUE": true, "true": true} {
		got, err := scim.Bool(in)
		require.NoError(t, err)
		require.Equal(t, want, got, "%v", in)
	}
	_, err := scim.Bool("maybe")
	require.ErrorIs(t, err, scim.ErrInvalidValue)
}
