package provider

import (
	"go/ast"
	"go/parser"
	"go/token"
	"go/types"
	"path/filepath"
	"runtime"
	"slices"
	"sort"
	"strconv"
	"testing"

	"github.com/hashicorp/terraform-plugin-go/tfprotov6"
	"github.com/hashicorp/terraform-plugin-go/tftypes"

	"gantry/sandbox/api"
)

// mockAttr is one attribute of the MockTofuRunner's copy of the schema.
type mockAttr struct {
	typ               string // as written: cty.String, cty.Map(cty.String), ...
	computed          bool
	forcesReplacement bool
}

type mockSchema struct {
	idPrefix string
	attrs    map[string]mockAttr
}

// mockSchemas reads the `schemas` table of runner/mock/schema.go. The table is unexported, so the
// test parses the source: the mock and the provider must agree, and this keeps them honest
// without a hand-kept third copy.
func mockSchemas(t *testing.T) map[string]mockSchema {
	t.Helper()
	_, self, _, _ := runtime.Caller(0)
	file := filepath.Join(filepath.Dir(self), "..", "..", "runner", "mock", "schema.go")
	f, err := parser.ParseFile(token.NewFileSet(), file, nil, 0)
	if err != nil {
		t.Fatalf("the mock runner's schema (%s) must exist and parse: %v", file, err)
	}
	named := map[string]mockAttr{} // str, strNew, num, ...
	var table *ast.CompositeLit
	for _, decl := range f.Decls {
		gd, ok := decl.(*ast.GenDecl)
		if !ok || gd.Tok != token.VAR {
			continue
		}
		for _, spec := range gd.Specs {
			vs := spec.(*ast.ValueSpec)
			for i, name := range vs.Names {
				if i >= len(vs.Values) {
					continue
				}
				lit, ok := vs.Values[i].(*ast.CompositeLit)
				if !ok {
					continue
				}
				switch {
				case name.Name == "schemas":
					table = lit
				case types.ExprString(lit.Type) == "attribute":
					named[name.Name] = parseMockAttr(t, lit)
				}
			}
		}
	}
	if table == nil || len(named) == 0 {
		t.Fatalf("%s: found no `schemas` table or attribute shorthands; update this test's parser", file)
	}
	out := map[string]mockSchema{}
	for _, elt := range table.Elts {
		kv := elt.(*ast.KeyValueExpr)
		typeName := unquote(t, kv.Key)
		s := mockSchema{attrs: map[string]mockAttr{}}
		for _, field := range kv.Value.(*ast.CompositeLit).Elts {
			fkv := field.(*ast.KeyValueExpr)
			switch fkv.Key.(*ast.Ident).Name {
			case "idPrefix":
				s.idPrefix = unquote(t, fkv.Value)
			case "attrs":
				for _, a := range fkv.Value.(*ast.CompositeLit).Elts {
					akv := a.(*ast.KeyValueExpr)
					switch v := akv.Value.(type) {
					case *ast.Ident:
						ma, ok := named[v.Name]
						if !ok {
							t.Fatalf("%s.%s: unknown shorthand %s", typeName, unquote(t, akv.Key), v.Name)
						}
						s.attrs[unquote(t, akv.Key)] = ma
					case *ast.CompositeLit:
						s.attrs[unquote(t, akv.Key)] = parseMockAttr(t, v)
					default:
						t.Fatalf("%s: cannot read %s", typeName, types.ExprString(v))
					}
				}
			}
		}
		out[typeName] = s
	}
	return out
}

func parseMockAttr(t *testing.T, lit *ast.CompositeLit) mockAttr {
	t.Helper()
	var a mockAttr
	for _, e := range lit.Elts {
		kv := e.(*ast.KeyValueExpr)
		switch kv.Key.(*ast.Ident).Name {
		case "typ":
			a.typ = types.ExprString(kv.Value)
		case "computed":
			a.computed = types.ExprString(kv.Value) == "true"
		case "forcesReplacement":
			a.forcesReplacement = types.ExprString(kv.Value) == "true"
		default:
			t.Fatalf("unknown attribute field %s", types.ExprString(kv.Key))
		}
	}
	return a
}

func unquote(t *testing.T, e ast.Expr) string {
	t.Helper()
	s, err := strconv.Unquote(e.(*ast.BasicLit).Value)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

var ctyOf = map[api.Type]string{
	api.String: "cty.String", api.Int: "cty.Number", api.Bool: "cty.Bool",
	api.StringMap: "cty.Map(cty.String)", api.StringList: "cty.List(cty.String)",
}

var tftypeOf = map[api.Type]tftypes.Type{
	api.String: tftypes.String, api.Int: tftypes.Number, api.Bool: tftypes.Bool,
	api.StringMap: tftypes.Map{ElementType: tftypes.String}, api.StringList: tftypes.List{ElementType: tftypes.String},
}

// TestKindsMatchMockSchema: the api table (which drives the provider and the cloud) has the same
// resource types, id prefixes, attributes, types, computed attributes and replace-forcing
// attributes as the mock runner.
func TestKindsMatchMockSchema(t *testing.T) {
	mock := mockSchemas(t)
	var mockTypes, ourTypes []string
	for name := range mock {
		mockTypes = append(mockTypes, name)
	}
	for _, k := range api.Kinds() {
		ourTypes = append(ourTypes, k.TypeName())
	}
	sort.Strings(mockTypes)
	sort.Strings(ourTypes)
	if !slices.Equal(mockTypes, ourTypes) {
		t.Fatalf("resource types: mock %v, provider %v", mockTypes, ourTypes)
	}
	for _, k := range api.Kinds() {
		m := mock[k.TypeName()]
		if m.idPrefix != k.IDPrefix {
			t.Errorf("%s: id prefix mock %q, provider %q", k.TypeName(), m.idPrefix, k.IDPrefix)
		}
		var ourReplace, mockReplace []string
		for _, a := range k.Attrs {
			ma, ok := m.attrs[a.Name]
			if !ok {
				t.Errorf("%s.%s: not in the mock's schema", k.TypeName(), a.Name)
				continue
			}
			if ma.typ != ctyOf[a.Type] || ma.computed != a.Computed || ma.forcesReplacement != a.ForceNew {
				t.Errorf("%s.%s: mock %+v, provider type %s computed %v forces replacement %v", k.TypeName(), a.Name, ma, ctyOf[a.Type], a.Computed, a.ForceNew)
			}
			if a.ForceNew {
				ourReplace = append(ourReplace, a.Name)
			}
		}
		for name, ma := range m.attrs {
			if _, ok := k.Attr(name); !ok {
				t.Errorf("%s.%s: in the mock's schema only", k.TypeName(), name)
			}
			if ma.forcesReplacement {
				mockReplace = append(mockReplace, name)
			}
		}
		sort.Strings(ourReplace)
		sort.Strings(mockReplace)
		if !slices.Equal(ourReplace, mockReplace) {
			t.Errorf("%s: replace-forcing attributes mock %v, provider %v", k.TypeName(), mockReplace, ourReplace)
		}
	}
}

// TestProviderSchema checks the schema OpenTofu sees over the protocol.
func TestProviderSchema(t *testing.T) {
	h := newHarness(t)
	if len(h.schemas) != len(api.Kinds()) {
		t.Errorf("%d resource types", len(h.schemas))
	}
	for _, k := range api.Kinds() {
		s := h.schemas[k.TypeName()]
		if s == nil {
			t.Fatalf("no schema for %s", k.TypeName())
		}
		if len(s.Block.Attributes) != len(k.Attrs) || len(s.Block.BlockTypes) != 0 {
			t.Errorf("%s: %d attributes, %d blocks", k.TypeName(), len(s.Block.Attributes), len(s.Block.BlockTypes))
		}
		for _, sa := range s.Block.Attributes {
			a, ok := k.Attr(sa.Name)
			if !ok {
				t.Errorf("%s.%s: unexpected", k.TypeName(), sa.Name)
				continue
			}
			if !sa.Type.Equal(tftypeOf[a.Type]) {
				t.Errorf("%s.%s: type %s", k.TypeName(), sa.Name, sa.Type)
			}
			wantOptional := !a.Required && !a.Computed
			if sa.Computed != a.Computed || sa.Required != a.Required || sa.Optional != wantOptional || sa.Sensitive {
				t.Errorf("%s.%s: computed %v required %v optional %v sensitive %v", k.TypeName(), sa.Name, sa.Computed, sa.Required, sa.Optional, sa.Sensitive)
			}
			if sa.Description == "" {
				t.Errorf("%s.%s: no description", k.TypeName(), sa.Name)
			}
		}
	}
	want := map[string]bool{"endpoint": false, "token": true, "token_file": false} // name: sensitive
	for _, sa := range h.prov.Block.Attributes {
		sens, ok := want[sa.Name]
		if !ok || sa.Sensitive != sens || !sa.Optional || sa.Required {
			t.Errorf("provider attribute %s: optional %v sensitive %v", sa.Name, sa.Optional, sa.Sensitive)
		}
		delete(want, sa.Name)
	}
	if len(want) != 0 {
		t.Errorf("provider attributes missing: %v", want)
	}
}

// samples are two valid values of every configurable attribute, to plan a change of each.
var samples = map[string][2]any{
	"name":                  {"alpha", "beta"},
	"cidr":                  {"10.20.0.0/16", "10.21.0.0/16"},
	"region":                {"eu-west", "us-east"},
	"labels":                {map[string]string{"team": "a"}, map[string]string{"team": "b"}},
	"network_id":            {"net-00000001", "net-00000002"},
	"subnet_id":             {"subnet-00000001", "subnet-00000002"},
	"engine":                {"postgres", "mysql"},
	"engine_version":        {"16", "8.0"},
	"size":                  {"small", "large"},
	"storage_gb":            {20, 40},
	"backup_retention_days": {7, 14},
	"encrypted":             {true, false},
	"versioning":            {true, false},
	"retention_days":        {30, 60},
	"public":                {false, true},
	"image":                 {"debian-12", "debian-13"},
	"rules":                 {[]string{"a"}, []string{"a", "b"}},
}

// TestPlanReplacement plans, for every configurable attribute of every type, a change of that
// attribute alone against an existing object, and checks that the provider asks for replacement
// exactly when the mock runner's schema says so, and that computed attributes keep their values
// (UseStateForUnknown) on in-place updates, as the mock assumes.
func TestPlanReplacement(t *testing.T) {
	h := newHarness(t)
	mock := mockSchemas(t)
	for _, k := range api.Kinds() {
		typ := h.typ(k.TypeName())
		base := map[string]any{}
		prior := map[string]any{}
		for _, a := range k.Attrs {
			if a.Computed {
				prior[a.Name] = k.IDPrefix + "-computed-" + a.Name
				continue
			}
			s, ok := samples[a.Name]
			if !ok {
				t.Fatalf("no sample for %s.%s", k.TypeName(), a.Name)
			}
			base[a.Name], prior[a.Name] = s[0], s[0]
		}
		priorState := object(t, typ, prior)

		// No change: a no-op plan equal to the prior state.
		p := h.plan(k.TypeName(), priorState, base)
		if d := errorsOf(p.diags); d != "" || len(p.replace) != 0 || !p.state.Equal(priorState) {
			t.Errorf("%s: unchanged config planned %s (replace %v, diags %s)", k.TypeName(), fmtAttrs(p.attrs), p.replace, d)
		}
		for _, a := range k.Attrs {
			if a.Computed {
				continue
			}
			cfg := map[string]any{}
			for n, v := range base {
				cfg[n] = v
			}
			cfg[a.Name] = samples[a.Name][1]
			p := h.plan(k.TypeName(), priorState, cfg)
			if d := errorsOf(p.diags); d != "" {
				t.Errorf("%s.%s: %s", k.TypeName(), a.Name, d)
				continue
			}
			wantReplace := mock[k.TypeName()].attrs[a.Name].forcesReplacement
			if gotReplace := slices.Equal(p.replace, []string{a.Name}); gotReplace != wantReplace || (!wantReplace && len(p.replace) > 0) {
				t.Errorf("%s.%s: requires replace %v, mock says forces replacement %v", k.TypeName(), a.Name, p.replace, wantReplace)
			}
			if !wantReplace {
				for _, c := range k.Attrs {
					if c.Computed && p.attrs[c.Name] != prior[c.Name] {
						t.Errorf("%s.%s changed in place: computed %s planned as %v, want the prior value", k.TypeName(), a.Name, c.Name, p.attrs[c.Name])
					}
				}
			}
		}

		// Unset optional attributes plan as null (no defaults), and removing one is an update.
		for _, a := range k.Attrs {
			if a.Required || a.Computed {
				continue
			}
			cfg := map[string]any{}
			for n, v := range base {
				cfg[n] = v
			}
			delete(cfg, a.Name)
			p := h.plan(k.TypeName(), priorState, cfg)
			if p.attrs[a.Name] != nil {
				t.Errorf("%s.%s: unset planned as %v, want null", k.TypeName(), a.Name, p.attrs[a.Name])
			}
			if wantReplace := a.ForceNew; slices.Contains(p.replace, a.Name) != wantReplace {
				t.Errorf("%s.%s: unsetting it requires replace %v", k.TypeName(), a.Name, p.replace)
			}
		}

		// Create: computed attributes are unknown, configured values as given.
		p = h.plan(k.TypeName(), tftypes.Value{}, base)
		if d := errorsOf(p.diags); d != "" {
			t.Fatalf("%s create: %s", k.TypeName(), d)
		}
		for _, a := range k.Attrs {
			if a.Computed && p.attrs[a.Name] != unknown {
				t.Errorf("%s create: computed %s planned as %v", k.TypeName(), a.Name, p.attrs[a.Name])
			}
		}
	}
}

// TestValidateConfig: the cloud's rules fail validation with messages on the attribute.
func TestValidateConfig(t *testing.T) {
	h := newHarness(t)
	db := func(over map[string]any) map[string]any {
		m := map[string]any{"name": "orders", "engine": "postgres", "engine_version": "16", "size": "small", "storage_gb": 20}
		for k, v := range over {
			m[k] = v
		}
		return m
	}
	cases := []struct {
		name, typ string
		config    map[string]any
		attr      string // "" means valid
	}{
		{"valid database", "sandbox_database", db(nil), ""},
		{"unknown values are not checked", "sandbox_database", db(map[string]any{"engine": unknown, "engine_version": unknown, "labels": unknown}), ""},
		{"bad engine", "sandbox_database", db(map[string]any{"engine": "oracle"}), "engine"},
		{"version of another engine", "sandbox_database", db(map[string]any{"engine": "mysql"}), "engine_version"},
		{"storage below minimum", "sandbox_database", db(map[string]any{"storage_gb": 5}), "storage_gb"},
		{"bad size", "sandbox_database", db(map[string]any{"size": "huge"}), "size"},
		{"bad label key", "sandbox_database", db(map[string]any{"labels": map[string]string{"Bad Key": "x"}}), "labels"},
		{"non-canonical cidr", "sandbox_network", map[string]any{"name": "n", "cidr": "10.20.0.1/16"}, "cidr"},
		{"bad region", "sandbox_bucket", map[string]any{"name": "b", "region": "mars"}, "region"},
		{"bad name", "sandbox_bucket", map[string]any{"name": "Bucket_1"}, "name"},
		{"bad network id", "sandbox_subnet", map[string]any{"name": "s", "cidr": "10.20.1.0/24", "network_id": "db-00000001"}, "network_id"},
		{"empty rules", "sandbox_org_policy", map[string]any{"name": "p", "rules": []string{}}, "rules"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			diags := h.validate(tc.typ, tc.config)
			if tc.attr == "" {
				if d := errorsOf(diags); d != "" {
					t.Fatalf("unexpected: %s", d)
				}
				return
			}
			for _, d := range diags {
				if d.Severity == tfprotov6.DiagnosticSeverityError && d.Attribute != nil && d.Attribute.Equal(tftypes.NewAttributePath().WithAttributeName(tc.attr)) {
					return
				}
			}
			t.Errorf("no error on %s: %v", tc.attr, errorsOf(diags))
		})
	}
}
