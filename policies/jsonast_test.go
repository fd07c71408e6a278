package policies

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/open-policy-agent/opa/v1/ast"
	"github.com/open-policy-agent/opa/v1/util"
	"github.com/stretchr/testify/require"

	"gantry/models/classify/classifytest"
)

// reference decodes data the slow, obviously right way: encoding/json with
// json.Number, then OPA's conversion. (json.Valid first: util.UnmarshalJSON takes
// `0null` for a valid document.)
func reference(data []byte) (ast.Value, error) {
	if !json.Valid(data) {
		return nil, errors.New("invalid JSON")
	}
	var x any
	if err := util.UnmarshalJSON(data, &x); err != nil {
		return nil, err
	}
	return ast.InterfaceToValue(x)
}

func requireSameAsReference(t *testing.T, data []byte) {
	t.Helper()
	want, wantErr := reference(data)
	got, err := parseJSON(data)
	if wantErr != nil {
		require.Error(t, err, "encoding/json says: %v", wantErr)
		return
	}
	require.NoError(t, err)
	require.Equal(t, 0, want.Compare(got), "want %v\n got %v", want, got)
	require.Equal(t, want.Hash(), got.Hash())
}

func TestParseJSONPlans(t *testing.T) {
	files, err := filepath.Glob("testdata/*.json")
	require.NoError(t, err)
	more, err := filepath.Glob("../models/classify/testdata/*.json")
	require.NoError(t, err)
	for _, f := range append(files, more...) {
		t.Run(filepath.Base(f), func(t *testing.T) {
			data, err := os.ReadFile(f)
			require.NoError(t, err)
			requireSameAsReference(t, data)
		})
	}
	t.Run("plan10k", func(t *testing.T) {
		requireSameAsReference(t, classifytest.Plan10k())
	})
}

var jsonCases = []string{
	`{}`, `[]`, `{"a":[]}`, `null`, `true`, `false`, `0`, `-0`, `12`, `-12.5e+3`, `1E2`, `3.0`,
	`123456789012345678901234567890`, `1e400`, `1e99999999999`,
	`"plain"`, `""`, `"esc\"aped\\ \/ \b\f\n\r\t"`, `"\u00e9\u4e2d\ud83d\ude00"`, `"caf\u00e9 – naïve"`,
	"\"bad utf8 \xff\xfe\"", `"\ud800 lone surrogate"`,
	` { "a" : 1 , "b" : [ true , null , { } ] } `, "{\n\t\"x\":\r\n1}",
	`{"dup": 1, "other": 2, "dup": 3}`,
	`{"k": {"nested": {"deeper": [1, [2, [3, {"x": "y"}]]]}}}`,
	// Invalid documents.
	``, ` `, `{`, `}`, `[1,]`, `{"a":1,}`, `{"a" 1}`, `{a:1}`, `[1 2]`, `01`, `1.`, `.5`, `-`, `1e`, `1e+`,
	`tru`, `nul`, `"unterminated`, `"bad \x escape"`, `"\u12"`, "\"tab\tinside\"", `{} {}`, `[] x`, "\ufeff{}",
	`{"a":1}}`, `[`, `"\`, `0null000000`,
}

func TestParseJSONCases(t *testing.T) {
	for _, c := range jsonCases {
		t.Run(c, func(t *testing.T) { requireSameAsReference(t, []byte(c)) })
	}
	// Later duplicate keys win, as with encoding/json.
	v, err := parseJSON([]byte(`{"dup": 1, "dup": 3}`))
	require.NoError(t, err)
	require.Equal(t, 1, v.(ast.Object).Len())
	require.Equal(t, "3", v.(ast.Object).Get(ast.InternedTerm("dup")).String())

	// Nesting is bounded.
	deep := strings.Repeat("[", maxDepth+1) + strings.Repeat("]", maxDepth+1)
	_, err = parseJSON([]byte(deep))
	require.ErrorContains(t, err, "max depth")
	ok := strings.Repeat("[", 100) + strings.Repeat("]", 100)
	requireSameAsReference(t, []byte(ok))
}

func FuzzParseJSON(f *testing.F) {
	for _, c := range jsonCases {
		f.Add([]byte(c))
	}
	f.Add(readPlan(f, "bucket_violations.json"))
	f.Fuzz(func(t *testing.T, data []byte) {
		want, wantErr := reference(data)
		got, err := parseJSON(data)
		if (wantErr == nil) != (err == nil) {
			t.Fatalf("encoding/json: %v; parseJSON: %v", wantErr, err)
		}
		if err == nil && want.Compare(got) != 0 {
			t.Fatalf("want %v, got %v", want, got)
		}
	})
}
