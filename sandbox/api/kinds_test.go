package api

import (
	"encoding/json"
	"strings"
	"testing"
)

func TestKindInvariants(t *testing.T) {
	seen := map[string]bool{}
	for _, k := range Kinds() {
		if seen[k.Name] || seen["prefix:"+k.IDPrefix] {
			t.Errorf("%s: duplicate name or id prefix", k.Name)
		}
		seen[k.Name], seen["prefix:"+k.IDPrefix] = true, true
		id, ok := k.Attr("id")
		if !ok || !id.Computed || id.Type != String {
			t.Errorf("%s: id must be a computed string", k.Name)
		}
		names := map[string]bool{}
		for _, a := range k.Attrs {
			if names[a.Name] {
				t.Errorf("%s.%s: duplicate", k.Name, a.Name)
			}
			names[a.Name] = true
			if a.Computed && (a.Required || a.ForceNew || a.Check.Fn != nil) {
				t.Errorf("%s.%s: a computed attribute is neither required, replace-forcing nor checked", k.Name, a.Name)
			}
			if a.Description == "" || (a.Check.Fn != nil && a.Check.Rule == "") {
				t.Errorf("%s.%s: needs a description and a rule text", k.Name, a.Name)
			}
		}
		if !k.ValidID(k.IDPrefix+"-0123abcd") || k.ValidID(k.IDPrefix+"-0123ABCD") || k.ValidID("x"+k.IDPrefix+"-0123abcd") || k.ValidID(k.IDPrefix+"-0123abcd/..") {
			t.Errorf("%s: ValidID", k.Name)
		}
	}
}

func TestNormalize(t *testing.T) {
	k, _ := Lookup("database")
	var in map[string]any
	_ = json.Unmarshal([]byte(`{"name":"a","storage_gb":20,"labels":{"x":"y"},"encrypted":null}`), &in)
	out, err := k.Normalize(in, false)
	if err != nil {
		t.Fatal(err)
	}
	if out["storage_gb"] != int64(20) || out["labels"].(map[string]string)["x"] != "y" || out["encrypted"] != nil {
		t.Errorf("%#v", out)
	}
	if _, ok := out["endpoint"]; ok {
		t.Errorf("computed attribute in configurable set")
	}
	if _, ok := out["engine"]; !ok {
		t.Errorf("missing attributes are not filled with null")
	}
	if out, err := k.Normalize(map[string]any{"storage_gb": json.Number("20.0")}, false); err != nil || out["storage_gb"] != int64(20) {
		t.Errorf("20.0: %v %v", out, err)
	}
	_, err = k.Normalize(map[string]any{"storage_gb": json.Number("1.5"), "endpoint": "x", "bogus": 1, "labels": map[string]any{"a": 1}}, false)
	ve, ok := err.(*ValidationError)
	if !ok || len(ve.Fields) != 4 {
		t.Fatalf("%v", err)
	}
}

func TestParseCIDR(t *testing.T) {
	for s, want := range map[string]string{
		"10.20.0.0/16": "", "10.20.0.1/16": "did you mean \"10.20.0.0/16\"", "10.0.0.0/30": "prefix length",
		"fd00::/64": "not an IPv4", "nonsense": "not an IPv4",
	} {
		_, err := ParseCIDR(s)
		if (want == "") != (err == nil) || (err != nil && !strings.Contains(err.Error(), want)) {
			t.Errorf("%s: %v", s, err)
		}
	}
}
