package review

import (
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"gantry/models/classify"
	"gantry/models/classify/classifytest"
)

func readFile(t testing.TB, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func loadDoc(t *testing.T, path string) *Doc {
	t.Helper()
	d, err := Load(readFile(t, path))
	if err != nil {
		t.Fatalf("Load(%s): %v", path, err)
	}
	return d
}

// secrets are the sensitive strings of testdata/attrs.json, and the key of a
// map that is sensitive as a whole.
var secrets = []string{
	"hunter2", "tok-unchanged-secret", "s3cr3t-pass", "AKIA", "s1-secret", "s2-secret",
	"same-secret", "old-key-secret", "new-key-secret", "pw-secret-old", "api_key",
}

const (
	sens = SensitiveText
	unk  = UnknownText
)

func TestAttributes(t *testing.T) {
	t.Parallel()
	d := loadDoc(t, filepath.Join("testdata", "attrs.json"))
	if d.Len() != 9 {
		t.Fatalf("Len %d, want 9", d.Len())
	}
	tests := []struct {
		name string
		want []AttrChange
	}{
		{"update: changed leaves only, unknown, sensitive masked on both sides", []AttrChange{
			{Path: "endpoint", Before: `"old.example"`, After: unk, Unknown: true, Changed: true},
			{Path: "labels.team", Before: `"a"`, After: `"b"`, Changed: true},
			{Path: "password", Before: sens, After: sens, BeforeSensitive: true, AfterSensitive: true, Changed: true},
			{Path: "rules[1]", After: `"b"`, Changed: true},
		}},
		{"replace: replace_paths force, siblings do not", []AttrChange{
			{Path: "id", Before: `"db-1"`, After: unk, Unknown: true, Changed: true},
			{Path: "region", Before: `"eu"`, After: `"us"`, Changed: true, ForcesReplacement: true},
			{Path: "settings[0].tier", Before: `"small"`, After: `"large"`, Changed: true, ForcesReplacement: true},
			{Path: "zone", ForcesReplacement: true}, // named by replace_paths, absent on both sides
		}},
		{"create: every after value, nulls left out, values as JSON", []AttrChange{
			{Path: "arn", After: unk, Unknown: true, Changed: true},
			{Path: "cidr", After: `"10.0.0.0/16"`, Changed: true},
			{Path: "enabled", After: `true`, Changed: true},
			{Path: "id", After: unk, Unknown: true, Changed: true},
			{Path: "nested.a[0].b", After: `"c"`, Changed: true},
			{Path: "nested.html", After: `"<b>&</b>"`, Changed: true},
			{Path: "port", After: `8080`, Changed: true},
			{Path: "ratio", After: `1.50`, Changed: true},
			{Path: "rules", After: `[]`, Changed: true},
			{Path: "tags", After: `{}`, Changed: true},
		}},
		{"destroy: every before value, nested sensitive masked", []AttrChange{
			{Path: "conn.pass", Before: sens, BeforeSensitive: true, Changed: true},
			{Path: "conn.user", Before: `"u"`, Changed: true},
			{Path: "id", Before: `"x"`, Changed: true},
		}},
		{"whole objects and lists sensitive: one masked leaf each, unchanged omitted", []AttrChange{
			{Path: "list", Before: sens, After: sens, BeforeSensitive: true, AfterSensitive: true, Changed: true},
			{Path: "settings", Before: sens, After: sens, BeforeSensitive: true, AfterSensitive: true, Changed: true},
		}},
		{"sensitive leaf before, whole object after: the object is masked on both sides", []AttrChange{
			{Path: "settings", Before: sens, After: sens, BeforeSensitive: true, AfterSensitive: true, Changed: true},
		}},
		{"unknown subtrees and sensitive unknown", []AttrChange{
			{Path: "password", Before: sens, After: unk, BeforeSensitive: true, AfterSensitive: true, Unknown: true, Changed: true},
			{Path: "rules[0].id", Before: `"r1"`, After: unk, Unknown: true, Changed: true},
			{Path: "status", Before: `{"ip":"1.2.3.4","ports":[80]}`, After: unk, Unknown: true, Changed: true},
		}},
		{"paths: quoted keys, numeric index order, type changes, object to null", []AttrChange{
			{Path: "kind", Before: `"x"`, After: `["x"]`, Changed: true},
			{Path: `labels["k8s.io/name"]`, Before: `"a"`, After: `"b"`, Changed: true},
			{Path: "meta", Before: `{"a":1}`, After: `null`, Changed: true},
			{Path: "ports[2]", Before: `2`, After: `22`, Changed: true},
			{Path: "ports[10]", Before: `10`, After: `100`, Changed: true},
		}},
		{"no-op: nothing", nil},
	}
	for i, tt := range tests {
		got, err := d.Attributes(i)
		if err != nil {
			t.Fatalf("%s: %v", tt.name, err)
		}
		if len(got) == 0 && len(tt.want) == 0 {
			continue
		}
		if !reflect.DeepEqual(got, tt.want) {
			t.Errorf("%s:\n got %+v\nwant %+v", tt.name, got, tt.want)
		}
	}
}

func TestAttributesNeverShowSecrets(t *testing.T) {
	t.Parallel()
	data := readFile(t, filepath.Join("testdata", "attrs.json"))
	for _, s := range secrets {
		if !strings.Contains(string(data), s) {
			t.Fatalf("fixture lost secret %q: this test would prove nothing", s)
		}
	}
	d, err := Load(data)
	if err != nil {
		t.Fatal(err)
	}
	for i := range d.Len() {
		got, err := d.Attributes(i)
		if err != nil {
			t.Fatal(err)
		}
		for _, a := range got {
			for _, field := range []string{a.Path, a.Before, a.After} {
				for _, s := range secrets {
					if strings.Contains(field, s) {
						t.Errorf("change %d: %+v shows secret %q", i, a, s)
					}
				}
			}
		}
	}
}

func TestAttributesOfFixtures(t *testing.T) {
	t.Parallel()
	// destroy.json: the database's password is sensitive.
	d := loadDoc(t, filepath.Join("..", "classify", "testdata", "destroy.json"))
	got, err := d.Attributes(1)
	if err != nil {
		t.Fatal(err)
	}
	want := []AttrChange{
		{Path: "id", Before: `"db-1"`, Changed: true},
		{Path: "password", Before: sens, BeforeSensitive: true, Changed: true},
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("destroy:\n got %+v\nwant %+v", got, want)
	}
	// replace_network.json: the database's replace path settings[0].tier names no value.
	d = loadDoc(t, filepath.Join("..", "classify", "testdata", "replace_network.json"))
	got, err = d.Attributes(3)
	if err != nil {
		t.Fatal(err)
	}
	var forced []string
	for _, a := range got {
		if a.ForcesReplacement {
			forced = append(forced, a.Path)
		}
	}
	if !reflect.DeepEqual(forced, []string{"network_id", "settings[0].tier"}) {
		t.Errorf("forcing paths %q", forced)
	}
}

func TestLoadErrors(t *testing.T) {
	t.Parallel()
	for _, doc := range []string{`{`, `[]`, `{"format_version":"2.0","resource_changes":[]}`, `{"resource_changes":[]}`} {
		if _, err := Load([]byte(doc)); !errors.Is(err, classify.ErrFormat) {
			t.Errorf("Load(%s): %v, want ErrFormat", doc, err)
		}
	}
	d, err := Load([]byte(`{"format_version":"1.2"}`))
	if err != nil || d.Len() != 0 {
		t.Fatalf("empty plan: %v, %d changes", err, d.Len())
	}
	if _, err := d.Attributes(0); err == nil {
		t.Error("Attributes(0) of an empty plan: no error")
	}
	d, err = Load([]byte(`{"format_version":"1.2","resource_changes":[{"address":"a.b","change":{"actions":["update"],"before":{"x":1},"after":{"x":2},"replace_paths":"x"}}]}`))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := d.Attributes(-1); err == nil {
		t.Error("Attributes(-1): no error")
	}
	if _, err := d.Attributes(0); err == nil || !strings.Contains(err.Error(), "a.b") {
		t.Errorf("bad replace_paths: %v", err)
	}
}

// The Doc's indexes are the classification's.
func TestLoadMatchesClassify(t *testing.T) {
	t.Parallel()
	data := classifytest.Plan10kFile(t)
	res, err := classify.Classify(data, classify.Options{})
	if err != nil {
		t.Fatal(err)
	}
	d, err := Load(data)
	if err != nil {
		t.Fatal(err)
	}
	if d.Len() != len(res.Changes) {
		t.Fatalf("Len %d, classified %d", d.Len(), len(res.Changes))
	}
	for i := range res.Changes {
		if d.changes[i].Address != res.Changes[i].Address {
			t.Fatalf("change %d: %s, classified %s", i, d.changes[i].Address, res.Changes[i].Address)
		}
	}
	// A replaced network: cidr forces, nothing else changed.
	got, err := d.Attributes(res.Replaces[0])
	if err != nil {
		t.Fatal(err)
	}
	want := []AttrChange{{Path: "cidr", Before: `"10.0.0.0/16"`, After: `"10.0.0.0/16"`, ForcesReplacement: true}}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("10k replace:\n got %+v\nwant %+v", got, want)
	}
}
