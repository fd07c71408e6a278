package policies

import (
	"context"
	"io/fs"
	"os"
	"path"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/open-policy-agent/opa/v1/ast"
	"github.com/open-policy-agent/opa/v1/tester"
	"github.com/stretchr/testify/require"

	"gantry/bench"
)

// ruleSources reads rules/*.rego from disk: the rule modules and their tests, by path.
func ruleSources(t *testing.T) (rules, tests map[string]string) {
	t.Helper()
	rules, tests = map[string]string{}, map[string]string{}
	fsys := os.DirFS("rules")
	names, err := fs.Glob(fsys, "*.rego")
	require.NoError(t, err)
	require.NotEmpty(t, names)
	for _, name := range names {
		src, err := fs.ReadFile(fsys, name)
		require.NoError(t, err)
		if strings.HasSuffix(name, "_test.rego") {
			tests[path.Join("rules", name)] = string(src)
		} else {
			rules[path.Join("rules", name)] = string(src)
		}
	}
	return rules, tests
}

// TestRegoTests runs every Rego test of the built-in rules, each as a subtest, and
// requires each rule to have at least one test_allows_ and one test_denies_ test.
func TestRegoTests(t *testing.T) {
	rules, tests := ruleSources(t)
	mods := map[string]*ast.Module{}
	for _, set := range []map[string]string{rules, tests} {
		for p, src := range set {
			m, err := ast.ParseModuleWithOpts(p, src, parserOptions())
			require.NoError(t, err, p)
			mods[p] = m
		}
	}

	ctx, cancel := bench.Context(context.Background(), time.Minute)
	defer cancel()
	ch, err := tester.NewRunner().SetCompiler(newCompiler()).SetTimeout(10*time.Second).Run(ctx, mods)
	require.NoError(t, err)
	var results []*tester.Result
	for r := range ch {
		results = append(results, r)
	}
	sort.Slice(results, func(i, j int) bool {
		if results[i].Package != results[j].Package {
			return results[i].Package < results[j].Package
		}
		return results[i].Name < results[j].Name
	})

	// kinds[rule id] counts the allows and denies tests of each rule.
	kinds := map[string]map[string]int{}
	for _, r := range results {
		pkg := strings.TrimPrefix(r.Package, "data.")
		id, ok := strings.CutSuffix(strings.TrimPrefix(pkg, builtinPackage+"."), "_test")
		require.True(t, ok, "test %s is in package %s, not gantry.rules.<id>_test", r.Name, pkg)
		if kinds[id] == nil {
			kinds[id] = map[string]int{}
		}
		for _, prefix := range []string{"test_allows_", "test_denies_"} {
			if strings.HasPrefix(r.Name, prefix) {
				kinds[id][prefix]++
			}
		}
		t.Run(id+"/"+r.Name, func(t *testing.T) {
			if r.Error != nil {
				t.Fatalf("%s.%s: error: %v", pkg, r.Name, r.Error)
			}
			if r.Fail {
				where := ""
				if r.Location != nil {
					where = " (" + r.Location.String() + ")"
				}
				t.Fatalf("%s.%s failed%s", pkg, r.Name, where)
			}
			if r.Skip {
				t.Fatalf("%s.%s is skipped: rename it test_...", pkg, r.Name)
			}
		})
	}

	require.Len(t, rules, len(tests), "every rule has a _test.rego file, and every test file a rule")
	for p := range rules {
		id := strings.TrimSuffix(path.Base(p), ".rego")
		_, ok := tests["rules/"+id+"_test.rego"]
		require.True(t, ok, "rule %s has no rules/%s_test.rego", id, id)
		require.Positive(t, kinds[id]["test_allows_"], "rule %s has no test_allows_ test", id)
		require.Positive(t, kinds[id]["test_denies_"], "rule %s has no test_denies_ test", id)
	}
}

// TestBuiltinRulesStrict compiles the built-in rules and their tests in OPA's strict
// mode (no unused variables or imports, no shadowed input, no deprecated built-ins).
func TestBuiltinRulesStrict(t *testing.T) {
	rules, tests := ruleSources(t)
	mods := map[string]*ast.Module{}
	for _, set := range []map[string]string{rules, tests} {
		for p, src := range set {
			m, err := ast.ParseModuleWithOpts(p, src, parserOptions())
			require.NoError(t, err, p)
			mods[p] = m
		}
	}
	c := newCompiler().WithStrict(true)
	c.Compile(mods)
	require.False(t, c.Failed(), "%v", c.Errors)
}

// TestEmbeddedRulesMatchDisk guards the go:embed pattern: the bundle holds exactly the
// rule files on disk.
func TestEmbeddedRulesMatchDisk(t *testing.T) {
	rules, _ := ruleSources(t)
	b, err := Builtin()
	require.NoError(t, err)
	var ids []string
	for p := range rules {
		ids = append(ids, strings.TrimSuffix(path.Base(p), ".rego"))
	}
	sort.Strings(ids)
	var got []string
	for _, r := range b.Rules() {
		got = append(got, r.ID)
	}
	require.Equal(t, ids, got)
}
