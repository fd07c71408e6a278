package policies

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/open-policy-agent/opa/v1/ast"
	"github.com/open-policy-agent/opa/v1/util"
)

// FuzzPlanValue turns any bytes into input.plan as Evaluate does: planValue never
// panics, refuses only with ErrPlan (and only what is no JSON object), and its value is
// exactly what a plain reading of the document gives with the masking rules of
// masker applied by a second, naive implementation here (on encoding/json's values):
// every value a marker marks is "(sensitive value)", nothing else changed, the
// rebuilt terms hash as they compare, and the strings it reports as masked include
// every masked string of four runes or more.
func FuzzPlanValue(f *testing.F) {
	paths, err := filepath.Glob(filepath.Join("testdata", "*.json"))
	if err != nil || len(paths) == 0 {
		f.Fatalf("no seeds: %v", err)
	}
	more, _ := filepath.Glob(filepath.Join("..", "models", "classify", "testdata", "*.json"))
	for _, p := range append(paths, more...) {
		data, err := os.ReadFile(p)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(data)
	}
	for _, doc := range []string{
		`{"resource_changes":[{"change":{"before":{"a":["s3cret",{"b":"deep-s3cret"}]},"before_sensitive":{"a":[true,{"b":true}]},"after":"x","after_sensitive":[true]}}]}`,
		`{"resource_drift":[{"change":{"after":null,"after_sensitive":true}}],"output_changes":{"o":{"before":{"k":"v-secret"},"before_sensitive":{"k":{"deeper":true}}}}}`,
		`{"planned_values":{"outputs":{"o":{"sensitive":true,"value":{"x":"out-secret"}}},"root_module":{"resources":[{"values":{"k":"res-secret","n":1},"sensitive_values":{"k":true,"n":false}}],"child_modules":[{"child_modules":[{"resources":[{"values":["a-secret"],"sensitive_values":[true,true]}]}]}]}}}`,
		`{"prior_state":{"values":{"outputs":{"o":{"sensitive":"true","value":"kept"}},"root_module":{"resources":[{"values":"whole-secret","sensitive_values":{"k":true}}]}}}}`,
		`{"variables":{"pw":{"value":"var-secret"},"n":{"value":"plain"}},"configuration":{"root_module":{"variables":{"pw":{"sensitive":true,"default":"def-secret"},"n":{}}}}}`,
		`{"resource_changes":[{"change":{"before":"first-secret","before_sensitive":true,"before":"second-secret"}}]}`,
		`{"resource_changes":[{"change":{"before_sensitive":true,"before_sensitive":false,"before":"kept-value"}}]}`,
		`{"resource_changes":{"change":{"before":"not-masked","before_sensitive":true}}}`,
		`[]`, `"plan"`, `{"a":1}{}`,
	} {
		f.Add([]byte(doc))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		plan, secrets, err := planValue(data)
		doc, refErr := refDecode(data)
		obj, isObj := doc.(map[string]any)
		if err != nil {
			if !errors.Is(err, ErrPlan) {
				t.Fatalf("planValue: %v, want ErrPlan", err)
			}
			if refErr == nil && isObj {
				t.Fatalf("planValue refuses a JSON object: %v", err)
			}
			return
		}
		if refErr != nil || !isObj {
			t.Fatalf("planValue accepts what is no JSON object (%v)", refErr)
		}

		m := &refMasker{secrets: map[string]bool{}}
		m.plan(obj)
		want, err := ast.InterfaceToValue(obj)
		if err != nil {
			t.Fatal(err)
		}
		if want.Compare(plan) != 0 {
			t.Fatalf("masked plan differs:\nwant %v\n got %v", want, plan)
		}
		if want.Hash() != plan.Hash() {
			t.Fatalf("the masked plan compares equal but hashes %d, want %d", plan.Hash(), want.Hash())
		}
		if !slices.IsSorted(secrets) || len(slices.Compact(slices.Clone(secrets))) != len(secrets) {
			t.Fatalf("secrets not sorted and distinct: %q", secrets)
		}
		for s := range m.secrets {
			if _, found := slices.BinarySearch(secrets, s); !found {
				t.Fatalf("masked %q, but it is not among the secrets %q", s, secrets)
			}
		}
	})
}

// refDecode is encoding/json's reading of one document, numbers as json.Number.
func refDecode(data []byte) (any, error) {
	if !json.Valid(data) {
		return nil, errors.New("invalid JSON")
	}
	var x any
	err := util.UnmarshalJSON(data, &x)
	return x, err
}

// refMasker applies the masking rules of masker's documentation to a decoded plan,
// in place. It shares no code with masker.
type refMasker struct {
	secrets map[string]bool
}

func (m *refMasker) plan(doc map[string]any) {
	for _, key := range []string{"resource_changes", "resource_drift"} {
		list, _ := doc[key].([]any)
		for _, rc := range list {
			if rc, ok := rc.(map[string]any); ok {
				if change, ok := rc["change"].(map[string]any); ok {
					m.change(change)
				}
			}
		}
	}
	if outs, ok := doc["output_changes"].(map[string]any); ok {
		for _, o := range outs {
			if o, ok := o.(map[string]any); ok {
				m.change(o)
			}
		}
	}
	m.state(doc["planned_values"])
	if prior, ok := doc["prior_state"].(map[string]any); ok {
		m.state(prior["values"])
	}
	// Sensitive root module variables: their value and their declared default.
	config, _ := doc["configuration"].(map[string]any)
	root, _ := config["root_module"].(map[string]any)
	decls, _ := root["variables"].(map[string]any)
	vars, _ := doc["variables"].(map[string]any)
	for name, d := range decls {
		if d, ok := d.(map[string]any); !ok || d["sensitive"] != true {
			continue
		}
		if v, ok := vars[name].(map[string]any); ok {
			m.wholeAt(v, "value")
		}
		m.wholeAt(d.(map[string]any), "default")
	}
}

func (m *refMasker) change(c map[string]any) {
	m.maskBy(c, "before", "before_sensitive")
	m.maskBy(c, "after", "after_sensitive")
}

func (m *refMasker) state(v any) {
	s, ok := v.(map[string]any)
	if !ok {
		return
	}
	if root, ok := s["root_module"].(map[string]any); ok {
		m.module(root)
	}
	if outs, ok := s["outputs"].(map[string]any); ok {
		for _, o := range outs {
			if o, ok := o.(map[string]any); ok && o["sensitive"] == true {
				m.wholeAt(o, "value")
			}
		}
	}
}

func (m *refMasker) module(mod map[string]any) {
	resources, _ := mod["resources"].([]any)
	for _, r := range resources {
		if r, ok := r.(map[string]any); ok {
			m.maskBy(r, "values", "sensitive_values")
		}
	}
	children, _ := mod["child_modules"].([]any)
	for _, c := range children {
		if c, ok := c.(map[string]any); ok {
			m.module(c)
		}
	}
}

func (m *refMasker) maskBy(obj map[string]any, key, markerKey string) {
	marks, hasMarks := obj[markerKey]
	v, hasValue := obj[key]
	if hasMarks && hasValue && refMarksAny(marks) {
		obj[key] = m.mask(v, marks)
	}
}

func (m *refMasker) wholeAt(obj map[string]any, key string) {
	if v, ok := obj[key]; ok {
		obj[key] = m.whole(v)
	}
}

// mask: true masks the whole value; an object or array marker masks the members it
// marks; a marker of another shape than the value masks it whole if it marks anything.
func (m *refMasker) mask(v, marks any) any {
	switch mk := marks.(type) {
	case bool:
		if mk {
			return m.whole(v)
		}
	case map[string]any:
		obj, ok := v.(map[string]any)
		if !ok {
			return m.mismatch(v, marks)
		}
		for k, sub := range mk {
			if old, ok := obj[k]; ok && refMarksAny(sub) {
				obj[k] = m.mask(old, sub)
			}
		}
	case []any:
		list, ok := v.([]any)
		if !ok {
			return m.mismatch(v, marks)
		}
		for i := range min(len(mk), len(list)) {
			if refMarksAny(mk[i]) {
				list[i] = m.mask(list[i], mk[i])
			}
		}
	}
	return v
}

func (m *refMasker) mismatch(v, marks any) any {
	if refMarksAny(marks) {
		return m.whole(v)
	}
	return v
}

// whole masks v (a null stays null) and remembers its strings of four runes or more.
func (m *refMasker) whole(v any) any {
	if v == nil {
		return nil
	}
	var collect func(any)
	collect = func(x any) {
		switch x := x.(type) {
		case string:
			if x != SensitiveMask && utf8.RuneCountInString(x) >= 4 {
				m.secrets[x] = true
			}
		case map[string]any:
			for _, e := range x {
				collect(e)
			}
		case []any:
			for _, e := range x {
				collect(e)
			}
		}
	}
	collect(v)
	return SensitiveMask
}

func refMarksAny(marks any) bool {
	switch mk := marks.(type) {
	case bool:
		return mk
	case map[string]any:
		for _, sub := range mk {
			if refMarksAny(sub) {
				return true
			}
		}
	case []any:
		for _, sub := range mk {
			if refMarksAny(sub) {
				return true
			}
		}
	}
	return false
}

// FuzzRunValue builds input.run from fuzzed run facts: runValue never panics and gives
// what the JSON encoding of RunContext gives (the documented input), except that absent
// lists are empty arrays and every count key is present. Strings are valid UTF-8, as
// everything that reaches a RunContext is (PostgreSQL text, or decoded JSON).
func FuzzRunValue(f *testing.F) {
	f.Add("run-1", "destroy", "Ann \"the owner\"", "production", "postgres", true, true, 3,
		"module.postgres.sandbox_database.this\nmodule.postgres.sandbox_network.this", "module.postgres.sandbox_dns_record.this,x.y", "replace", 2, "")
	f.Add("", "", "", "", "", false, false, 0, "", "", "", 0, "")
	f.Add("run-é", "plan_only", "<b>&amp;</b>", "dev\u2028", "t", false, true, -1, "a.b\n\na.c[\"k\"]", ",,", "weird", 1<<40, "create")
	f.Fuzz(func(t *testing.T, id, kind, actor, tier, tmpl string, approval, restricted bool, class int,
		addrs, deps, extraKey string, n int, class2 string) {
		v := func(s string) string { return strings.ToValidUTF8(s, "\uFFFD") }
		r := RunContext{ID: v(id), Kind: v(kind), Organization: "org-" + v(id),
			Actor:       Actor{ID: "usr-1", Name: v(actor), Role: "owner"},
			Environment: Environment{ID: "env-1", Name: v(tier), Tier: v(tier), RequiresApproval: approval, Restricted: restricted},
			Template:    Template{Name: v(tmpl), Version: "1.0.0", Source: "catalog"},
			Risk:        Risk{Class: class, Rule: v(kind), Approver: v(actor)},
		}
		if n%2 == 0 {
			r.Template.Irreversible = strings.Split(v(deps), ",")
		}
		if n%3 == 0 {
			r.Template.OrgScoped = []string{}
		}
		if n != 0 {
			r.Classification.Counts = map[string]int{"create": n, "destroy": -n, "no_op": n / 2}
			if extraKey != "" {
				r.Classification.Counts[v(extraKey)] = class
			}
		}
		for i, a := range strings.Split(v(addrs), "\n") {
			if i >= 16 {
				break
			}
			c := ClassifiedChange{Address: a, Type: strings.SplitN(a, ".", 2)[0], Class: v(class2), Irreversible: i%2 == 0,
				OrgScoped: approval, ActionReason: v(kind)}
			if i%3 != 1 {
				c.Dependents = strings.Split(v(deps), ",")
			}
			r.Classification.Changes = append(r.Classification.Changes, c)
		}

		got := runValue(&r)

		// The documented input: the JSON of RunContext, lists never null, every count.
		ref := r
		ref.Template.Irreversible = orEmpty(r.Template.Irreversible)
		ref.Template.OrgScoped = orEmpty(r.Template.OrgScoped)
		ref.Classification.Counts = map[string]int{}
		for _, k := range countKeys {
			ref.Classification.Counts[k] = 0
		}
		for k, c := range r.Classification.Counts {
			ref.Classification.Counts[k] = c
		}
		ref.Classification.Changes = slices.Clone(r.Classification.Changes)
		if ref.Classification.Changes == nil {
			ref.Classification.Changes = []ClassifiedChange{}
		}
		for i := range ref.Classification.Changes {
			ref.Classification.Changes[i].Dependents = orEmpty(ref.Classification.Changes[i].Dependents)
		}
		data, err := json.Marshal(ref)
		if err != nil {
			t.Fatal(err)
		}
		want, err := ast.ValueFromReader(strings.NewReader(string(data)))
		if err != nil {
			t.Fatal(err)
		}
		if want.Compare(got) != 0 {
			t.Fatalf("input.run differs from the JSON of the run context:\nwant %v\n got %v", want, got)
		}
		if want.Hash() != got.Hash() {
			t.Fatalf("input.run compares equal but hashes %d, want %d", got.Hash(), want.Hash())
		}
	})
}

func orEmpty(xs []string) []string {
	if xs == nil {
		return []string{}
	}
	return xs
}
