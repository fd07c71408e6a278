package catalog

import (
	"math"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"

	"gantry/models/errs"
)

// shippedManifests reads the manifests of the templates shipped in catalog/.
func shippedManifests(f *testing.F) map[string][]byte {
	f.Helper()
	paths, err := filepath.Glob(filepath.Join("..", "..", "catalog", "templates", "*", manifestFile))
	if err != nil || len(paths) == 0 {
		f.Fatalf("no manifests: %v", err)
	}
	out := map[string][]byte{}
	for _, p := range paths {
		data, err := os.ReadFile(p)
		if err != nil {
			f.Fatal(err)
		}
		out[filepath.Base(filepath.Dir(p))] = data
	}
	return out
}

// shippedTemplates parses and checks the shipped manifests, as Load does.
func shippedTemplates(f *testing.F) []Template {
	f.Helper()
	var out []Template
	for dir, data := range shippedManifests(f) {
		t, err := parseManifest(data)
		if err != nil {
			f.Fatalf("%s: %v", dir, err)
		}
		if problems := t.check(dir); len(problems) > 0 {
			f.Fatalf("%s: %q", dir, problems)
		}
		out = append(out, t)
	}
	slices.SortFunc(out, func(a, b Template) int { return strings.Compare(a.Name, b.Name) })
	return out
}

// FuzzParseManifest reads any bytes as a template.yaml: parsing and checking never
// panic, and a manifest they accept is normalised as Template promises (a divergence,
// a default of the input's type that passes the input's own rules), holds only finite
// numbers, has patterns the form can anchor, survives a YAML round trip unchanged, and
// its defaults validate and generate a root module that parses.
func FuzzParseManifest(f *testing.F) {
	for _, data := range shippedManifests(f) {
		f.Add(data)
	}
	for _, doc := range []string{
		"name: t\nversion: 1.0.0\ntitle: T\nowner: o\n",
		"name: t\nversion: 1.0.0-rc.1\ntitle: T\nowner: o\ninputs:\n  - name: n\n    type: number\n    integer: true\n    min: -3\n    max: 3e2\n    default: 7\n    enum: ['7', '8.0']\n",
		"name: t\nversion: 1.0.0\ntitle: T\nowner: o\ninputs:\n  - name: s\n    type: string\n    pattern: '[a-z]+(x|y)?'\n    default: abx\n    label: \"S \\u00e9\"\n  - name: b\n    type: bool\n    default: false\n    divergence: scaling\nprices: {sandbox_a: 0.5}\norg_scoped: [sandbox_p]\norg_policy: [sandbox_p]\n",
		"name: t\nversion: 1.0.0\ntitle: T\nowner: o\ninputs:\n  - name: s\n    type: string\n    requried: true\n",
		"name: t\nversion: 1.0.0\ntitle: T\nowner: o\ninputs: &a\n  - name: s\n    type: string\nirreversible: *a\n",
		"",
		"- a\n",
	} {
		f.Add([]byte(doc))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		tmpl, err := parseManifest(data)
		if err != nil {
			if err.Error() == "" {
				t.Fatal("an error without a message")
			}
			return
		}
		problems := tmpl.check(tmpl.Name)
		if len(problems) > 0 {
			for _, p := range problems {
				if p == "" {
					t.Fatalf("an empty problem in %q", problems)
				}
			}
			return
		}
		checkTemplate(t, tmpl)

		// Checking again finds nothing and changes nothing.
		again := cloneTemplate(tmpl)
		if p := again.check(again.Name); len(p) > 0 || !reflect.DeepEqual(again, tmpl) {
			t.Fatalf("a second check: %q\n%+v\n%+v", p, again, tmpl)
		}

		// What Gantry accepted reads back the same.
		out, err := yaml.Marshal(tmpl)
		if err != nil {
			t.Fatalf("marshalling an accepted manifest: %v", err)
		}
		back, err := parseManifest(out)
		if err != nil {
			t.Fatalf("re-reading an accepted manifest: %v\n%s", err, out)
		}
		if p := back.check(back.Name); len(p) > 0 {
			t.Fatalf("the re-read manifest is refused: %q\n%s", p, out)
		}
		if a, b := normalized(tmpl), normalized(back); !reflect.DeepEqual(a, b) {
			t.Fatalf("round trip changed the manifest:\n%#v\n%#v\n%s", a, b, out)
		}

		// The defaults are values a person could have typed.
		for _, in := range tmpl.Inputs {
			if in.Default == nil {
				continue
			}
			one := in
			one.Required = false
			single := Template{Name: "t", Inputs: []Input{one}}
			got, v := single.ValidateInputs(map[string]string{in.Name: formatValue(in.Default)})
			if v != nil || !reflect.DeepEqual(got, map[string]any{in.Name: in.Default}) {
				t.Fatalf("default %#v typed in: %v, %v", in.Default, got, v)
			}
		}
		raw := map[string]string{}
		for _, in := range tmpl.Inputs {
			if in.Required {
				raw = nil
				break
			}
		}
		if raw != nil {
			got, v := tmpl.ValidateInputs(raw)
			if v != nil {
				t.Fatalf("a template without required inputs refuses its defaults: %v", v)
			}
			checkAccepted(t, tmpl, raw, got)
		}
	})
}

// FuzzValidateInputs validates any form values, against the shipped templates and
// against a fuzzed input spec the manifest check accepts: ValidateInputs never panics,
// returns either values or field errors, every error names an "inputs.<name>" field
// and is that field's own (the same with the other fields left out), and accepted
// values satisfy the spec (type, required, range, whole numbers, enum, anchored
// pattern), read back the same when typed in again and generate a main.tf that parses.
func FuzzValidateInputs(f *testing.F) {
	shipped := shippedTemplates(f)
	f.Add(uint8(0), "name", "core-net", uint8(0), false, false, "", 0.0, 0.0, uint8(0), "", "")
	f.Add(uint8(1), "subnet_count", " 3 ", uint8(1), true, true, "", 1.0, 6.0, uint8(3), "", "2")
	f.Add(uint8(0x82), "region", "us-east", uint8(0), false, false, `[a-z]+-[a-z]+`, 0.0, 0.0, uint8(0), "eu-west,us-east", "eu-west")
	f.Add(uint8(3), "retention_days", "12.5", uint8(1), false, false, "", -1.5, 1e3, uint8(1), "1,2.5,-0", "2.50")
	f.Add(uint8(4), "versioning", "TRUE", uint8(2), false, true, "", 0.0, 0.0, uint8(0), "", "false")
	f.Add(uint8(5), "colour", "Bad_Name", uint8(0), false, false, `^10\.[0-9]{1,3}\.0\.0/16$`, 0.0, 0.0, uint8(0), "", "")
	f.Add(uint8(0x86), "name", "1e3", uint8(1), false, false, "", 0.0, 0.0, uint8(2), "", "")
	f.Fuzz(func(t *testing.T, which uint8, name, value string, typ uint8, integer, required bool, pattern string,
		lo, hi float64, bounds uint8, enum, def string) {
		// A shipped template, with one value (or every input set to it).
		tmpl := shipped[int(which&0x7f)%len(shipped)]
		raw := map[string]string{name: value}
		if which&0x80 != 0 {
			for _, in := range tmpl.Inputs {
				raw[in.Name] = value
			}
		}
		checkValidation(t, tmpl, raw)

		// One input of a fuzzed spec, as the manifest check leaves it.
		in := Input{Name: "x", Type: []string{TypeString, TypeNumber, TypeBool}[int(typ)%3], Integer: integer, Required: required, Pattern: pattern}
		if bounds&1 != 0 {
			in.Min = &lo
		}
		if bounds&2 != 0 {
			in.Max = &hi
		}
		if enum != "" {
			in.Enum = strings.Split(enum, ",")
		}
		if def != "" {
			switch in.Type {
			case TypeString:
				in.Default = def
			case TypeNumber:
				if n, err := strconv.ParseFloat(def, 64); err == nil {
					in.Default = n
				}
			case TypeBool:
				in.Default = def == "true"
			}
		}
		if problems := in.check(); len(problems) > 0 {
			return
		}
		spec := Template{Name: "fuzz", Inputs: []Input{in}}
		checkTemplate(t, spec)
		checkValidation(t, spec, map[string]string{"x": value})
		checkValidation(t, spec, map[string]string{"x": value, name: def})
	})
}

// checkTemplate holds what a checked manifest promises.
func checkTemplate(t *testing.T, tmpl Template) {
	t.Helper()
	finite := func(what string, f float64) {
		if math.IsNaN(f) || math.IsInf(f, 0) {
			t.Fatalf("%s: %v accepted", what, f)
		}
	}
	for rt, p := range tmpl.Prices {
		finite("price of "+rt, p)
	}
	for _, in := range tmpl.Inputs {
		switch in.Divergence {
		case DivergenceFixed, DivergenceCapacity, DivergenceCount, DivergenceRetention, DivergenceScaling:
		default:
			t.Fatalf("%s: divergence %q", in.Name, in.Divergence)
		}
		if in.Min != nil {
			finite(in.Name+": min", *in.Min)
		}
		if in.Max != nil {
			finite(in.Name+": max", *in.Max)
		}
		if in.Pattern != "" {
			if _, err := compilePattern(in.Pattern); err != nil {
				t.Fatalf("%s: pattern %q accepted, but the form cannot use it: %v", in.Name, in.Pattern, err)
			}
		}
		if in.Default != nil {
			checkValue(t, in, in.Default)
		}
	}
}

// checkValue holds what a typed value of input in (a default or an accepted value)
// must satisfy.
func checkValue(t *testing.T, in Input, v any) {
	t.Helper()
	switch in.Type {
	case TypeString:
		s, ok := v.(string)
		if !ok {
			t.Fatalf("%s: %#v is not a string", in.Name, v)
		}
		if len(in.Enum) > 0 && !slices.Contains(in.Enum, s) {
			t.Fatalf("%s: %q is not one of %q", in.Name, s, in.Enum)
		}
		if in.Pattern != "" {
			re, err := compilePattern(in.Pattern)
			if err != nil || !re.MatchString(s) {
				t.Fatalf("%s: %q does not match %q (%v)", in.Name, s, in.Pattern, err)
			}
		}
	case TypeNumber:
		f, ok := v.(float64)
		if !ok {
			t.Fatalf("%s: %#v is not a float64", in.Name, v)
		}
		switch {
		case math.IsNaN(f) || math.IsInf(f, 0):
			t.Fatalf("%s: %v accepted", in.Name, f)
		case in.Integer && f != math.Trunc(f):
			t.Fatalf("%s: %v is not whole", in.Name, f)
		case in.Min != nil && !(f >= *in.Min):
			t.Fatalf("%s: %v is below min %v", in.Name, f, *in.Min)
		case in.Max != nil && !(f <= *in.Max):
			t.Fatalf("%s: %v is above max %v", in.Name, f, *in.Max)
		}
		if len(in.Enum) > 0 && !slices.ContainsFunc(in.Enum, func(e string) bool {
			n, err := strconv.ParseFloat(e, 64)
			return err == nil && n == f
		}) {
			t.Fatalf("%s: %v is not one of %q", in.Name, f, in.Enum)
		}
	case TypeBool:
		if _, ok := v.(bool); !ok {
			t.Fatalf("%s: %#v is not a bool", in.Name, v)
		}
	default:
		t.Fatalf("%s: type %q", in.Name, in.Type)
	}
}

// checkValidation validates raw against tmpl and checks the answer.
func checkValidation(t *testing.T, tmpl Template, raw map[string]string) {
	t.Helper()
	got, v := tmpl.ValidateInputs(raw)
	if (got == nil) == (v == nil) {
		t.Fatalf("ValidateInputs(%q) = %v, %v: want exactly one", raw, got, v)
	}
	if v == nil {
		checkAccepted(t, tmpl, raw, got)
		return
	}
	if len(v.Fields) == 0 || errs.CodeOf(v) != errs.CodeInvalidInput {
		t.Fatalf("an empty or untyped validation error: %#v", v)
	}
	for field, msg := range v.Fields {
		name, ok := strings.CutPrefix(field, "inputs.")
		if !ok || msg == "" {
			t.Fatalf("field %q: message %q", field, msg)
		}
		if !slices.ContainsFunc(tmpl.Inputs, func(in Input) bool { return in.Name == name }) {
			if _, sent := raw[name]; !sent {
				t.Fatalf("field %q is neither an input nor sent", field)
			}
			continue
		}
		// The message is the field's own: the same with the other fields left out.
		alone := map[string]string{}
		if s, ok := raw[name]; ok {
			alone[name] = s
		}
		_, v2 := tmpl.ValidateInputs(alone)
		if v2 == nil || v2.Fields[field] != msg {
			t.Fatalf("%s: %q among %q, but alone %v", field, msg, raw, v2)
		}
	}
}

// checkAccepted checks values ValidateInputs accepted for raw.
func checkAccepted(t *testing.T, tmpl Template, raw map[string]string, got map[string]any) {
	t.Helper()
	for name := range raw {
		if !slices.ContainsFunc(tmpl.Inputs, func(in Input) bool { return in.Name == name }) {
			t.Fatalf("unknown input %q accepted", name)
		}
	}
	for name := range got {
		if !slices.ContainsFunc(tmpl.Inputs, func(in Input) bool { return in.Name == name }) {
			t.Fatalf("a value for %q, which is no input", name)
		}
	}
	for _, in := range tmpl.Inputs {
		s := raw[in.Name]
		if in.Type != TypeString {
			s = strings.TrimSpace(s)
		}
		v, ok := got[in.Name]
		if s == "" {
			switch {
			case in.Required:
				t.Fatalf("required %s accepted empty", in.Name)
			case ok != (in.Default != nil) || !reflect.DeepEqual(v, in.Default):
				t.Fatalf("empty %s gives %#v, its default is %#v", in.Name, v, in.Default)
			}
			if !ok {
				continue
			}
		}
		if !ok {
			t.Fatalf("%s=%q accepted but missing", in.Name, raw[in.Name])
		}
		checkValue(t, in, v)
		switch x := v.(type) {
		case string:
			if s != "" && x != s {
				t.Fatalf("%s: %q typed, %q kept", in.Name, s, x)
			}
		case bool:
			if s != "" && !strings.EqualFold(s, strconv.FormatBool(x)) {
				t.Fatalf("%s: %q typed, %v kept", in.Name, s, x)
			}
		}
	}

	// Typed in again, the values read back the same.
	again := map[string]string{}
	for name, v := range got {
		again[name] = formatValue(v)
	}
	back, v := tmpl.ValidateInputs(again)
	if v != nil || !reflect.DeepEqual(back, got) {
		t.Fatalf("%v typed in again: %v, %v", got, back, v)
	}

	// Accepted values always make a root module.
	if _, err := rootModule(tmpl, moduleInfo{}, GenerateInput{WorkspaceID: "ws-1", Inputs: got,
		StateAddress: "https://gantry.example/state/ws-1"}); err != nil {
		t.Fatalf("generating with %v: %v", got, err)
	}
}

// formatValue writes a typed value as a person would type it.
func formatValue(v any) string {
	switch x := v.(type) {
	case string:
		return x
	case float64:
		return formatNumber(x)
	case bool:
		return strconv.FormatBool(x)
	}
	panic("unexpected value type")
}

func cloneTemplate(t Template) Template {
	c := t
	c.Inputs = slices.Clone(t.Inputs)
	for i := range c.Inputs {
		c.Inputs[i].Enum = slices.Clone(t.Inputs[i].Enum)
	}
	return c
}

// normalized is t with empty lists and maps as nil, for comparing round trips.
func normalized(t Template) Template {
	t = cloneTemplate(t)
	if len(t.Inputs) == 0 {
		t.Inputs = nil
	}
	if len(t.Prices) == 0 {
		t.Prices = nil
	}
	for _, l := range []*[]string{&t.Irreversible, &t.OrgScoped, &t.OrgPolicy} {
		if len(*l) == 0 {
			*l = nil
		}
	}
	for i := range t.Inputs {
		if len(t.Inputs[i].Enum) == 0 {
			t.Inputs[i].Enum = nil
		}
	}
	return t
}
