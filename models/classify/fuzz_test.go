package classify

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
)

// addFileSeeds adds every file of dir as a seed.
func addFileSeeds(f *testing.F, dir string) {
	f.Helper()
	paths, err := filepath.Glob(filepath.Join(dir, "*.json"))
	if err != nil || len(paths) == 0 {
		f.Fatalf("no seeds in %s: %v", dir, err)
	}
	for _, p := range paths {
		data, err := os.ReadFile(p)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(data, byte(0))
		f.Add(data, byte(3)) // every type data-bearing and org-scoped
	}
}

// FuzzClassify reads any bytes as a `tofu show -json` plan: Classify never panics, an
// error leaves no result, and a result keeps its promises: one change per resource
// change in plan order, the class the action list names, counts and the replace and
// destroy index lists that match the classes, the irreversible and org-scoped flags
// the options imply, and dependents that are other instances of the plan, in plan
// order, without repeats, closed under "depends on" — the same on every run, however
// the configuration's maps iterate.
func FuzzClassify(f *testing.F) {
	addFileSeeds(f, "testdata")
	addFileSeeds(f, filepath.Join("..", "review", "testdata"))
	for _, doc := range []string{
		`{"format_version":"1.2"}`,
		`{"format_version":"1.0","resource_changes":[{"address":"a.b[\"k\"]","index":"k","change":{"actions":["delete"]}}]}`,
		`{"format_version":"1.2","resource_changes":[{"address":"a.b[0]","index":0,"change":{"actions":["create","delete"]}},{"address":"a.b[1]","index":1,"change":{"actions":["delete"]}},{"address":"c.d","change":{"actions":["update"]}}],` +
			`"configuration":{"root_module":{"resources":[{"address":"a.b"},{"address":"c.d","expressions":{"x":{"references":["a.b[0].id","a.b"]}},"depends_on":["module.m"]}],` +
			`"module_calls":{"m":{"expressions":{"v":{"references":["c.d.id"]}},"module":{"resources":[{"address":"e.f","expressions":{"y":{"references":["var.v"]}}}],"outputs":{"o":{"expression":{"references":["e.f.id"]}}}}}}}},` +
			`"prior_state":{"values":{"root_module":{"resources":[{"address":"g.h","depends_on":["a.b","module.m"]}],"child_modules":[{"resources":[{"address":"module.m.e.f","depends_on":["c.d"]}]}]}}}}`,
		`{"format_version":"1.2","resource_changes":[{"address":"module.x[\"a.b\"].t.n[0]","change":{"actions":["delete","create"]}}],"prior_state":{"values":{"root_module":{"resources":[{"address":"z.z","depends_on":["module.x"]}]}}}}`,
		`{"format_version":"2.0"}`,
		`[]`,
	} {
		f.Add([]byte(doc), byte(1))
	}
	f.Fuzz(func(t *testing.T, data []byte, optBits byte) {
		types := planTypes(data)
		var opts Options
		if optBits&1 != 0 {
			opts.Irreversible = types
		}
		if optBits&2 != 0 {
			opts.OrgScoped = types
		}
		res, err := Classify(data, opts)
		if err != nil {
			if !reflect.DeepEqual(res, Result{}) {
				t.Fatalf("error %v with a result %+v", err, res)
			}
			if !strings.HasPrefix(err.Error(), "classify") {
				t.Fatalf("error %q does not say where it comes from", err)
			}
			var doc map[string]json.RawMessage
			if json.Unmarshal(data, &doc) != nil && !errors.Is(err, ErrFormat) {
				t.Fatalf("a document that is not a JSON object: %v, want ErrFormat", err)
			}
			return
		}
		checkResult(t, data, opts, res)

		// The same bytes give the same result: the graph is built by iterating maps.
		again, err := Classify(data, opts)
		if err != nil || !reflect.DeepEqual(res, again) {
			t.Fatalf("second run differs: %v\nfirst  %+v\nsecond %+v", err, res, again)
		}
	})
}

// planTypes lists the resource types of the plan's resource changes (nil when it is no plan).
func planTypes(data []byte) []string {
	var doc struct {
		ResourceChanges []struct {
			Type string `json:"type"`
		} `json:"resource_changes"`
	}
	if json.Unmarshal(data, &doc) != nil {
		return nil
	}
	var out []string
	for _, rc := range doc.ResourceChanges {
		out = append(out, rc.Type)
	}
	return out
}

// wantClass is the class of an action list as the feasibility notes (§3) define it.
func wantClass(actions []string) (Class, bool, bool) {
	switch strings.Join(actions, ",") {
	case "create":
		return ClassCreate, false, true
	case "update":
		return ClassUpdate, false, true
	case "delete":
		return ClassDestroy, false, true
	case "read":
		return ClassRead, false, true
	case "no-op":
		return ClassNoOp, false, true
	case "delete,create":
		return ClassReplace, false, true
	case "create,delete":
		return ClassReplace, true, true
	}
	return "", false, false
}

func checkResult(t *testing.T, data []byte, opts Options, res Result) {
	t.Helper()
	// The plan as an independent decoding sees it.
	var doc struct {
		ResourceChanges []struct {
			Address string `json:"address"`
			Type    string `json:"type"`
			Change  struct {
				Actions []string `json:"actions"`
			} `json:"change"`
		} `json:"resource_changes"`
		PriorState *struct {
			Values *struct {
				RootModule stateModule `json:"root_module"`
			} `json:"values"`
		} `json:"prior_state"`
	}
	if err := json.Unmarshal(data, &doc); err != nil {
		t.Fatalf("Classify accepted what encoding/json refuses: %v", err)
	}
	if len(res.Changes) != len(doc.ResourceChanges) {
		t.Fatalf("%d changes for %d resource changes", len(res.Changes), len(doc.ResourceChanges))
	}
	// Every instance address the plan names, in the order dependents use.
	order := map[string]int{}
	for _, rc := range doc.ResourceChanges {
		if _, ok := order[rc.Address]; !ok {
			order[rc.Address] = len(order)
		}
	}
	if doc.PriorState != nil && doc.PriorState.Values != nil {
		var walk func(m *stateModule)
		walk = func(m *stateModule) {
			for _, r := range m.Resources {
				if _, ok := order[r.Address]; !ok {
					order[r.Address] = len(order)
				}
			}
			for i := range m.ChildModules {
				walk(&m.ChildModules[i])
			}
		}
		walk(&doc.PriorState.Values.RootModule)
	}

	var counts Counts
	var replaces, destroys []int
	irreversible, orgScoped := false, false
	for i, c := range res.Changes {
		rc := doc.ResourceChanges[i]
		if c.Address != rc.Address || c.Type != rc.Type || !slices.Equal(c.Actions, rc.Change.Actions) {
			t.Fatalf("change %d is %q %q %q, the plan says %q %q %q", i, c.Address, c.Type, c.Actions, rc.Address, rc.Type, rc.Change.Actions)
		}
		class, cbd, ok := wantClass(c.Actions)
		if !ok || c.Class != class || c.CreateBeforeDestroy != cbd {
			t.Fatalf("%s: actions %q classified %s (cbd %v), want %s (cbd %v, known %v)", c.Address, c.Actions, c.Class, c.CreateBeforeDestroy, class, cbd, ok)
		}
		switch c.Class {
		case ClassCreate:
			counts.Create++
		case ClassUpdate:
			counts.Update++
		case ClassReplace:
			counts.Replace++
			replaces = append(replaces, i)
		case ClassDestroy:
			counts.Destroy++
			destroys = append(destroys, i)
		case ClassRead:
			counts.Read++
		case ClassNoOp:
			counts.NoOp++
		}
		removes := c.Class == ClassReplace || c.Class == ClassDestroy
		if c.Irreversible != (removes && slices.Contains(opts.Irreversible, c.Type)) {
			t.Fatalf("%s: irreversible %v for a %s of type %q", c.Address, c.Irreversible, c.Class, c.Type)
		}
		if c.OrgScoped != slices.Contains(opts.OrgScoped, c.Type) {
			t.Fatalf("%s: org-scoped %v for type %q", c.Address, c.OrgScoped, c.Type)
		}
		irreversible = irreversible || c.Irreversible
		orgScoped = orgScoped || (c.OrgScoped && c.Class != ClassRead && c.Class != ClassNoOp)

		if !removes && c.Dependents != nil {
			t.Fatalf("%s: a %s has dependents %q", c.Address, c.Class, c.Dependents)
		}
		last := -1
		for _, d := range c.Dependents {
			k, ok := order[d]
			switch {
			case !ok:
				t.Fatalf("%s: dependent %q is no instance of the plan", c.Address, d)
			case k <= last:
				t.Fatalf("%s: dependents %q not in plan order, or repeated", c.Address, c.Dependents)
			case stripKeys(d) == stripKeys(c.Address):
				t.Fatalf("%s: depends on itself (%q)", c.Address, d)
			}
			last = k
		}
	}
	if res.Counts != counts || !slices.Equal(res.Replaces, replaces) || !slices.Equal(res.Destroys, destroys) {
		t.Fatalf("counts %+v replaces %v destroys %v, the changes say %+v %v %v", res.Counts, res.Replaces, res.Destroys, counts, replaces, destroys)
	}
	if res.HasIrreversible != irreversible || res.TouchesOrgScoped != orgScoped {
		t.Fatalf("HasIrreversible %v TouchesOrgScoped %v, the changes say %v %v", res.HasIrreversible, res.TouchesOrgScoped, irreversible, orgScoped)
	}

	// Transitive: what depends on a dependent depends on the change too (except the
	// change's own instances, which nothing lists as its own dependent).
	removed := map[string]*Change{}
	for _, i := range append(slices.Clone(replaces), destroys...) {
		removed[res.Changes[i].Address] = &res.Changes[i]
	}
	for _, i := range append(slices.Clone(replaces), destroys...) {
		c := &res.Changes[i]
		for _, d := range c.Dependents {
			dc, ok := removed[d]
			if !ok {
				continue
			}
			for _, dd := range dc.Dependents {
				if stripKeys(dd) != stripKeys(c.Address) && !slices.Contains(c.Dependents, dd) {
					t.Fatalf("%s -> %s -> %s, but %s is not a dependent of %s (%q)", c.Address, d, dd, dd, c.Address, c.Dependents)
				}
			}
		}
	}
}
