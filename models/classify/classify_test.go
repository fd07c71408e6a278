package classify

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"gantry/bench"
	"gantry/models/classify/classifytest"
)

var opts = Options{
	Irreversible: []string{"sandbox_database", "sandbox_bucket"},
	OrgScoped:    []string{"sandbox_org_policy"},
}

func load(t *testing.T, name string) Result {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	res, err := Classify(b, opts)
	if err != nil {
		t.Fatalf("Classify(%s): %v", name, err)
	}
	return res
}

// want is the expected shape of one change; nil Dependents means none.
type want struct {
	addr         string
	class        Class
	cbd          bool
	reason       string
	paths        [][]any
	irreversible bool
	org          bool
	deps         []string
}

func check(t *testing.T, res Result, wants []want) {
	t.Helper()
	if len(res.Changes) != len(wants) {
		t.Fatalf("got %d changes, want %d", len(res.Changes), len(wants))
	}
	for i, w := range wants {
		c := res.Changes[i]
		if c.Address != w.addr {
			t.Errorf("change %d: address %q, want %q", i, c.Address, w.addr)
		}
		if c.Class != w.class {
			t.Errorf("%s: class %q, want %q", w.addr, c.Class, w.class)
		}
		if c.CreateBeforeDestroy != w.cbd {
			t.Errorf("%s: create_before_destroy %v, want %v", w.addr, c.CreateBeforeDestroy, w.cbd)
		}
		if c.ActionReason != w.reason {
			t.Errorf("%s: reason %q, want %q", w.addr, c.ActionReason, w.reason)
		}
		if !reflect.DeepEqual(c.ReplacePaths, w.paths) {
			t.Errorf("%s: replace paths %#v, want %#v", w.addr, c.ReplacePaths, w.paths)
		}
		if c.Irreversible != w.irreversible {
			t.Errorf("%s: irreversible %v, want %v", w.addr, c.Irreversible, w.irreversible)
		}
		if c.OrgScoped != w.org {
			t.Errorf("%s: org-scoped %v, want %v", w.addr, c.OrgScoped, w.org)
		}
		if !reflect.DeepEqual(c.Dependents, w.deps) {
			t.Errorf("%s: dependents %q, want %q", w.addr, c.Dependents, w.deps)
		}
	}
}

func TestCreateOnly(t *testing.T) {
	res := load(t, "create.json")
	check(t, res, []want{
		{addr: "sandbox_network.this", class: ClassCreate},
		{addr: "sandbox_subnet.this", class: ClassCreate},
	})
	if want := (Counts{Create: 2}); res.Counts != want {
		t.Errorf("counts %+v, want %+v", res.Counts, want)
	}
	if res.Destroys != nil || res.Replaces != nil || res.HasIrreversible || res.TouchesOrgScoped {
		t.Errorf("unexpected result flags: %+v", res)
	}
	c := res.Changes[1]
	if c.Type != "sandbox_subnet" || c.Name != "this" || c.ModuleAddress != "" || c.Index != nil ||
		!reflect.DeepEqual(c.Actions, []string{"create"}) {
		t.Errorf("fields: %+v", c)
	}
}

func TestInPlaceUpdates(t *testing.T) {
	res := load(t, "update.json")
	check(t, res, []want{
		{addr: "sandbox_network.this", class: ClassUpdate},
		{addr: "sandbox_org_policy.main", class: ClassUpdate, org: true},
		{addr: "sandbox_subnet.this", class: ClassNoOp},
	})
	if want := (Counts{Update: 2, NoOp: 1}); res.Counts != want {
		t.Errorf("counts %+v, want %+v", res.Counts, want)
	}
	if !res.TouchesOrgScoped {
		t.Error("an update of an org policy should touch org scope")
	}
	if res.HasIrreversible {
		t.Error("no irreversible change expected")
	}
}

func TestReplaceWithTransitiveDependents(t *testing.T) {
	res := load(t, "replace_network.json")
	check(t, res, []want{
		{addr: "sandbox_network.this", class: ClassReplace, reason: "replace_because_cannot_update",
			paths: [][]any{{"cidr"}},
			// subnet: direct reference; database: through the module's
			// variables; dns record: through the module's output; firewall: the
			// prior state's depends_on. Not the password, not the bucket (it
			// reads a constant output of the same module).
			deps: []string{"sandbox_subnet.this", "module.postgres.sandbox_database.this", "sandbox_dns_record.db", "sandbox_firewall.legacy"}},
		{addr: "sandbox_subnet.this", class: ClassUpdate},
		{addr: "module.postgres.sandbox_password.this", class: ClassNoOp},
		{addr: "module.postgres.sandbox_database.this", class: ClassReplace, reason: "replace_because_cannot_update",
			paths: [][]any{{"network_id"}, {"settings", float64(0), "tier"}}, irreversible: true,
			deps: []string{"sandbox_dns_record.db"}},
		{addr: "sandbox_dns_record.db", class: ClassUpdate},
		{addr: "sandbox_bucket.unrelated", class: ClassNoOp},
		{addr: "sandbox_firewall.legacy", class: ClassNoOp},
	})
	if want := (Counts{Update: 2, Replace: 2, NoOp: 3}); res.Counts != want {
		t.Errorf("counts %+v, want %+v", res.Counts, want)
	}
	if !reflect.DeepEqual(res.Replaces, []int{0, 3}) || res.Destroys != nil {
		t.Errorf("replaces %v destroys %v", res.Replaces, res.Destroys)
	}
	if !res.HasIrreversible || res.TouchesOrgScoped {
		t.Errorf("irreversible %v org %v", res.HasIrreversible, res.TouchesOrgScoped)
	}
	if db := res.Changes[3]; db.ModuleAddress != "module.postgres" || db.Type != "sandbox_database" {
		t.Errorf("database fields: %+v", db)
	}
}

func TestCreateBeforeDestroyReplace(t *testing.T) {
	res := load(t, "cbd.json")
	check(t, res, []want{
		{addr: "sandbox_subnet.this[0]", class: ClassReplace, cbd: true, reason: "replace_because_cannot_update",
			paths: [][]any{{"cidr"}},
			// Every instance of a resource that references sandbox_subnet.this;
			// never the other instance of the subnet itself.
			deps: []string{`sandbox_instance.web["a.b]"]`, `sandbox_instance.web["c"]`, "module.app[0].sandbox_vm.this", "module.app[1].sandbox_vm.this"}},
		{addr: "sandbox_subnet.this[1]", class: ClassNoOp},
		{addr: `sandbox_instance.web["a.b]"]`, class: ClassUpdate},
		{addr: `sandbox_instance.web["c"]`, class: ClassUpdate},
		{addr: "module.app[0].sandbox_vm.this", class: ClassUpdate},
		{addr: "module.app[1].sandbox_vm.this", class: ClassUpdate},
	})
	if res.Changes[0].Index != 0 || res.Changes[2].Index != "a.b]" || res.Changes[4].Index != nil {
		t.Errorf("indexes %#v %#v %#v", res.Changes[0].Index, res.Changes[2].Index, res.Changes[4].Index)
	}
	if !reflect.DeepEqual(res.Changes[0].Actions, []string{"create", "delete"}) {
		t.Errorf("actions %v", res.Changes[0].Actions)
	}
	if res.Changes[4].ModuleAddress != "module.app[0]" {
		t.Errorf("module address %q", res.Changes[4].ModuleAddress)
	}
	if want := (Counts{Replace: 1, Update: 4, NoOp: 1}); res.Counts != want {
		t.Errorf("counts %+v, want %+v", res.Counts, want)
	}
	if res.HasIrreversible {
		t.Error("a subnet is not irreversible")
	}
}

func TestDestroy(t *testing.T) {
	res := load(t, "destroy.json")
	check(t, res, []want{
		{addr: "sandbox_network.keep", class: ClassNoOp},
		{addr: "sandbox_database.old", class: ClassDestroy, reason: "delete_because_no_resource_config", irreversible: true,
			deps: []string{"sandbox_backup.old"}},
		{addr: "sandbox_backup.old", class: ClassDestroy, reason: "delete_because_no_resource_config"},
		{addr: "sandbox_subnet.extra[2]", class: ClassDestroy, reason: "delete_because_count_index",
			deps: []string{"sandbox_lb.legacy"}},
	})
	if want := (Counts{Destroy: 3, NoOp: 1}); res.Counts != want {
		t.Errorf("counts %+v, want %+v", res.Counts, want)
	}
	if !reflect.DeepEqual(res.Destroys, []int{1, 2, 3}) || res.Replaces != nil {
		t.Errorf("destroys %v replaces %v", res.Destroys, res.Replaces)
	}
	if !res.HasIrreversible {
		t.Error("destroying a database is irreversible")
	}
	if res.Changes[3].Index != 2 {
		t.Errorf("index %#v", res.Changes[3].Index)
	}
}

func TestMix(t *testing.T) {
	res := load(t, "mix.json")
	check(t, res, []want{
		{addr: "data.sandbox_image.base", class: ClassRead, reason: "read_because_config_unknown"},
		{addr: "sandbox_vm.a", class: ClassCreate},
		{addr: "module.net.sandbox_network.this", class: ClassReplace, reason: "replace_by_request",
			// vm: depends_on = [module.net]; route: in-module reference;
			// lookup: reads the module's output.
			deps: []string{"sandbox_vm.a", "module.net.sandbox_route.r", "data.sandbox_lookup.n"}},
		{addr: "sandbox_org_policy.main", class: ClassNoOp, org: true},
		{addr: "sandbox_tag.t", class: ClassUpdate},
		{addr: "sandbox_bucket.gone", class: ClassDestroy, reason: "delete_because_no_resource_config", irreversible: true},
		{addr: "module.net.sandbox_route.r", class: ClassCreate},
		{addr: "data.sandbox_lookup.n", class: ClassRead, reason: "read_because_dependency_pending"},
	})
	if want := (Counts{Create: 2, Update: 1, Replace: 1, Destroy: 1, Read: 2, NoOp: 1}); res.Counts != want {
		t.Errorf("counts %+v, want %+v", res.Counts, want)
	}
	if !reflect.DeepEqual(res.Replaces, []int{2}) || !reflect.DeepEqual(res.Destroys, []int{5}) {
		t.Errorf("replaces %v destroys %v", res.Replaces, res.Destroys)
	}
	if !res.HasIrreversible {
		t.Error("destroying a bucket is irreversible")
	}
	if res.TouchesOrgScoped {
		t.Error("a no-op on an org policy does not touch org scope")
	}
}

func TestOptionsMatter(t *testing.T) {
	b, err := os.ReadFile("testdata/mix.json")
	if err != nil {
		t.Fatal(err)
	}
	res, err := Classify(b, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if res.HasIrreversible || res.Changes[5].Irreversible || res.Changes[3].OrgScoped {
		t.Error("without options nothing is irreversible or org-scoped")
	}
}

func TestErrors(t *testing.T) {
	for name, doc := range map[string]string{
		"not json":       `{"format_version": `,
		"no version":     `{"resource_changes": []}`,
		"version 2":      `{"format_version": "2.0"}`,
		"unknown action": `{"format_version": "1.2", "resource_changes": [{"address": "a.b", "change": {"actions": ["forget"]}}]}`,
		"odd actions":    `{"format_version": "1.2", "resource_changes": [{"address": "a.b", "change": {"actions": ["delete", "update"]}}]}`,
		"no actions":     `{"format_version": "1.2", "resource_changes": [{"address": "a.b", "change": {}}]}`,
		"bad index":      `{"format_version": "1.2", "resource_changes": [{"address": "a.b", "index": 1.5, "change": {"actions": ["create"]}}]}`,
	} {
		if _, err := Classify([]byte(doc), opts); err == nil {
			t.Errorf("%s: no error", name)
		}
	}
	_, err := Classify([]byte(`[]`), opts)
	if !errors.Is(err, ErrFormat) {
		t.Errorf("want ErrFormat, got %v", err)
	}
}

func TestEmptyPlan(t *testing.T) {
	res, err := Classify([]byte(`{"format_version": "1.2", "planned_values": {"root_module": {}}, "configuration": {"root_module": {}}}`), opts)
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Changes) != 0 || res.Counts != (Counts{}) {
		t.Errorf("%+v", res)
	}
}

func TestStripKeysAndSegments(t *testing.T) {
	for in, want := range map[string]string{
		"a.b":                         "a.b",
		"a.b[0]":                      "a.b",
		`module.x["k]."].a.b["q\"]"]`: "module.x.a.b",
		"module.x[1].module.y[2].a.b": "module.x.module.y.a.b",
	} {
		if got := stripKeys(in); got != want {
			t.Errorf("stripKeys(%q) = %q, want %q", in, got, want)
		}
	}
	if h, r, _ := cutSegment(`module.x["a.b"].out.z`); h != "module" || r != `x["a.b"].out.z` {
		t.Errorf("cut: %q %q", h, r)
	}
	if h, r, _ := cutSegment(`x["a.b"].out.z`); h != "x" || r != "out.z" {
		t.Errorf("cut: %q %q", h, r)
	}
}

// ---- the 10,000-change plan ----

const groups = classifytest.Groups

func genFile(tb testing.TB) []byte { return classifytest.Plan10kFile(tb) }

func TestLargePlan(t *testing.T) {
	data := genFile(t)
	res, err := Classify(data, opts)
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Changes) != 4*groups {
		t.Fatalf("%d changes", len(res.Changes))
	}
	want := Counts{Replace: 500, Destroy: 250, Update: 250, NoOp: 4*groups - 1000}
	if res.Counts != want {
		t.Errorf("counts %+v, want %+v", res.Counts, want)
	}
	if len(res.Replaces) != 500 || len(res.Destroys) != 250 || !res.HasIrreversible || res.TouchesOrgScoped {
		t.Errorf("replaces %d destroys %d irreversible %v org %v", len(res.Replaces), len(res.Destroys), res.HasIrreversible, res.TouchesOrgScoped)
	}
	for _, i := range res.Replaces {
		c := res.Changes[i]
		g := i / 4
		switch c.Type {
		case "sandbox_network":
			deps := []string{fmt.Sprint("sandbox_subnet.s", g), fmt.Sprint("sandbox_database.d", g), fmt.Sprint("sandbox_dns_record.r", g)}
			if !reflect.DeepEqual(c.Dependents, deps) || c.Irreversible || !reflect.DeepEqual(c.ReplacePaths, [][]any{{"cidr"}}) {
				t.Fatalf("%s: %+v", c.Address, c)
			}
		case "sandbox_database":
			if !reflect.DeepEqual(c.Dependents, []string{fmt.Sprint("sandbox_dns_record.r", g)}) || !c.Irreversible ||
				c.ActionReason != "replace_because_cannot_update" || !reflect.DeepEqual(c.ReplacePaths, [][]any{{"settings", float64(0), "tier"}}) {
				t.Fatalf("%s: %+v", c.Address, c)
			}
		default:
			t.Fatalf("unexpected replace %s", c.Address)
		}
	}
	for _, i := range res.Destroys {
		c := res.Changes[i]
		if c.Type != "sandbox_dns_record" || c.Dependents != nil || c.ActionReason != "delete_because_no_resource_config" || c.Irreversible {
			t.Fatalf("%s: %+v", c.Address, c)
		}
	}
}

// BenchmarkClassify10k classifies the 10,000-change plan with dependents, against a
// plain decode of it in the same run (goal: ratio ≤ 2, bench/goals.go).
func BenchmarkClassify10k(b *testing.B) {
	data := genFile(b)
	b.SetBytes(int64(len(data)))
	bench.Ratio(b, classifytest.PlainDecode(b, data), func() {
		res, err := Classify(data, opts)
		if err != nil || len(res.Replaces) != 500 {
			b.Fatal(err)
		}
	})
}

func TestModules(t *testing.T) {
	res := load(t, "modules.json")
	check(t, res, []want{
		{addr: "sandbox_network.core", class: ClassReplace, reason: "replace_because_cannot_update", paths: [][]any{{"region"}},
			// subnet: variable of module a; vm: variable of module b, passed
			// from a; alarm: output of a, passed from b's output; thing:
			// module d's count; gone: state depends_on the subnet; log: state
			// depends_on gone (in the prior state only).
			deps: []string{"module.a.sandbox_subnet.s", "module.a.module.b.sandbox_vm.v", "sandbox_alarm.all",
				"module.d[0].sandbox_thing.t", "module.a.module.b.sandbox_old.gone", "module.a.module.b.sandbox_log.l"}},
		{addr: "module.a.sandbox_subnet.s", class: ClassUpdate},
		{addr: "module.a.module.b.sandbox_vm.v", class: ClassUpdate},
		{addr: "sandbox_bucket.logs", class: ClassReplace, reason: "replace_by_request", irreversible: true,
			// module c's depends_on reaches its instances; the alarm depends_on module.c.
			deps: []string{`module.c["k1"].sandbox_agent.x`, `module.c["k2"].sandbox_agent.x`, "sandbox_alarm.all"}},
		{addr: `module.c["k1"].sandbox_agent.x`, class: ClassNoOp},
		{addr: `module.c["k2"].sandbox_agent.x`, class: ClassNoOp},
		{addr: "sandbox_alarm.all", class: ClassUpdate},
		{addr: "module.d[0].sandbox_thing.t", class: ClassUpdate},
		{addr: "module.a.module.b.sandbox_old.gone", class: ClassDestroy, reason: "delete_because_no_resource_config",
			deps: []string{"module.a.module.b.sandbox_log.l"}},
	})
	if want := (Counts{Update: 4, Replace: 2, Destroy: 1, NoOp: 2}); res.Counts != want {
		t.Errorf("counts %+v, want %+v", res.Counts, want)
	}
	if res.Changes[7].Index != nil || res.Changes[7].ModuleAddress != "module.d[0]" {
		t.Errorf("module d: %+v", res.Changes[7])
	}
}

// A shared config resource with many instances, all replaced, gives every
// instance the same dependents without recomputing them.
func TestSharedDependents(t *testing.T) {
	var b strings.Builder
	b.WriteString(`{"format_version":"1.2","resource_changes":[`)
	for i := 0; i < 3; i++ {
		fmt.Fprintf(&b, `{"address":"sandbox_network.n[%d]","type":"sandbox_network","name":"n","index":%d,"change":{"actions":["delete","create"]}},`, i, i)
	}
	b.WriteString(`{"address":"sandbox_subnet.s","type":"sandbox_subnet","name":"s","change":{"actions":["no-op"]}}],`)
	b.WriteString(`"configuration":{"root_module":{"resources":[{"address":"sandbox_network.n"},{"address":"sandbox_subnet.s","expressions":{"x":{"references":["sandbox_network.n[0].id","sandbox_network.n[0]","sandbox_network.n"]}}}]}}}`)
	res, err := Classify([]byte(b.String()), opts)
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 3; i++ {
		if got := res.Changes[i].Dependents; !reflect.DeepEqual(got, []string{"sandbox_subnet.s"}) {
			t.Errorf("%d: %q", i, got)
		}
	}
}
