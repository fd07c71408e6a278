package review

import (
	"bytes"
	"encoding/json"
	"encoding/xml"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"gantry/models/classify"
)

// canary replaces every value a fuzzed plan marks sensitive: no rendering may show it.
const canary = "CANARY-d0-not-sh0w-7f3a"

// maxFuzzChanges bounds the changes whose attributes one input renders.
const maxFuzzChanges = 64

// FuzzReview reads any bytes as a plan the way the review page does: Load never
// panics and refuses only with classify.ErrFormat, it accepts every plan Classify
// accepts with the same number of changes, and for every change the attribute diff
// keeps its promises: a sensitive side renders as "(sensitive value)", an unknown
// after as "(known after apply)", only changed, unknown or replacement-forcing leaves
// are listed, and a value the plan marks sensitive (replaced here by a canary) never
// shows. The blast-radius SVG of the classified plan is well-formed XML that draws at
// most maxNodes boxes, and every edge joins two of them.
func FuzzReview(f *testing.F) {
	var seeds []string
	for _, dir := range []string{"testdata", filepath.Join("..", "classify", "testdata")} {
		paths, err := filepath.Glob(filepath.Join(dir, "*.json"))
		if err != nil || len(paths) == 0 {
			f.Fatalf("no seeds in %s: %v", dir, err)
		}
		seeds = append(seeds, paths...)
	}
	for _, p := range seeds {
		data, err := os.ReadFile(p)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(data, uint8(0))
		f.Add(data, uint8(2))
	}
	f.Add([]byte(`{"format_version":"1.2","resource_changes":[{"address":"a.b","change":{"actions":["update"],"before":"s3cret","after":{"k":[1,{"x":null}]},"before_sensitive":true,"after_sensitive":{"k":[false,{"x":true}]},"after_unknown":{"k":[true]},"replace_paths":[["k",0],["z"]]}}]}`), uint8(1))
	f.Add([]byte(`{"format_version":"1.2","resource_changes":[{"address":"a.b","change":{"actions":["delete","create"],"before":{"m":{"a.b":"v","0":1}},"after":{"m":[]},"before_sensitive":{"m":{"a.b":true}},"after_sensitive":[true]}}]}`), uint8(1))
	f.Fuzz(func(t *testing.T, data []byte, maxNodes uint8) {
		d, err := Load(data)
		res, cerr := classify.Classify(data, classify.Options{Irreversible: []string{"sandbox_database"}})
		if err != nil {
			if !errors.Is(err, classify.ErrFormat) {
				t.Fatalf("Load: %v, want a classify.ErrFormat error", err)
			}
			if cerr == nil {
				t.Fatalf("Classify accepts what Load refuses: %v", err)
			}
			return
		}
		if cerr == nil {
			if d.Len() != len(res.Changes) {
				t.Fatalf("Load has %d changes, Classify %d", d.Len(), len(res.Changes))
			}
			checkGraph(t, res, int(maxNodes))
			EstimateCost(res, map[string]float64{"sandbox_database": 12.5, "sandbox_network": 0})
		}
		for _, i := range []int{-1, d.Len()} {
			if _, err := d.Attributes(i); err == nil {
				t.Fatalf("Attributes(%d) of %d changes: no error", i, d.Len())
			}
		}
		for i := range min(d.Len(), maxFuzzChanges) {
			if attrs, err := d.Attributes(i); err == nil {
				checkAttrs(t, attrs)
			}
		}

		// The same plan with every marked value replaced by the canary.
		marked, ok := withCanaries(data)
		if !ok || bytes.Contains(data, []byte(canary)) {
			return
		}
		d, err = Load(marked)
		if err != nil {
			t.Fatalf("Load of the marked plan: %v", err)
		}
		for i := range min(d.Len(), maxFuzzChanges) {
			attrs, err := d.Attributes(i)
			if err != nil {
				continue
			}
			checkAttrs(t, attrs)
			for _, a := range attrs {
				if strings.Contains(a.Before, canary) || strings.Contains(a.After, canary) || strings.Contains(a.Path, canary) {
					t.Fatalf("change %d shows a sensitive value: %+v\nplan %s", i, a, marked)
				}
			}
		}
	})
}

func checkAttrs(t *testing.T, attrs []AttrChange) {
	t.Helper()
	for _, a := range attrs {
		switch {
		case a.BeforeSensitive && a.Before != SensitiveText:
			t.Fatalf("%q: sensitive before rendered %q", a.Path, a.Before)
		case a.Unknown && a.After != UnknownText:
			t.Fatalf("%q: unknown after rendered %q", a.Path, a.After)
		case a.AfterSensitive && !a.Unknown && a.After != SensitiveText:
			t.Fatalf("%q: sensitive after rendered %q", a.Path, a.After)
		case !a.Changed && !a.Unknown && !a.ForcesReplacement:
			t.Fatalf("%q: listed but neither changed, unknown nor forcing: %+v", a.Path, a)
		}
	}
}

// withCanaries rewrites a plan: wherever a resource change's before_sensitive or
// after_sensitive marks a present value `true`, the value becomes the canary. It
// reports false when the plan has no such value (or is not an object).
func withCanaries(data []byte) ([]byte, bool) {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	var doc map[string]any
	if dec.Decode(&doc) != nil {
		return nil, false
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, false
	}
	rcs, _ := doc["resource_changes"].([]any)
	n := 0
	for _, rc := range rcs {
		rcm, _ := rc.(map[string]any)
		change, _ := rcm["change"].(map[string]any)
		if change == nil {
			continue
		}
		for _, side := range [][2]string{{"before", "before_sensitive"}, {"after", "after_sensitive"}} {
			v, ok := change[side[0]]
			if !ok {
				continue
			}
			change[side[0]] = inject(v, change[side[1]], &n)
		}
	}
	if n == 0 {
		return nil, false
	}
	out, err := json.Marshal(doc)
	if err != nil {
		return nil, false
	}
	return out, true
}

// inject replaces the parts of v that mask marks `true` by the canary.
func inject(v, mask any, n *int) any {
	switch m := mask.(type) {
	case bool:
		if m && v != nil {
			*n++
			return canary
		}
	case map[string]any:
		if obj, ok := v.(map[string]any); ok {
			for k, sub := range m {
				if x, ok := obj[k]; ok {
					obj[k] = inject(x, sub, n)
				}
			}
		}
	case []any:
		if list, ok := v.([]any); ok {
			for i := range min(len(m), len(list)) {
				list[i] = inject(list[i], m[i], n)
			}
		}
	}
	return v
}

// checkGraph draws the classified plan and reads the SVG back.
func checkGraph(t *testing.T, res classify.Result, maxNodes int) {
	t.Helper()
	svg := Graph(res, maxNodes)
	if len(res.Replaces)+len(res.Destroys) == 0 {
		if svg != "" {
			t.Fatalf("nothing replaced or destroyed, but a graph: %s", svg)
		}
		return
	}
	// The nodes the picture should hold: the replaced and destroyed changes, and
	// every other dependent once.
	col1 := map[string]bool{}
	for _, i := range append(append([]int(nil), res.Replaces...), res.Destroys...) {
		col1[res.Changes[i].Address] = true
	}
	others := map[string]bool{}
	for _, i := range append(append([]int(nil), res.Replaces...), res.Destroys...) {
		for _, d := range res.Changes[i].Dependents {
			if !col1[d] {
				others[d] = true
			}
		}
	}
	total := len(res.Replaces) + len(res.Destroys) + len(others)
	want := total
	if maxNodes > 0 {
		want = min(total, maxNodes)
	}

	dec := xml.NewDecoder(strings.NewReader(svg))
	titles := map[string]bool{}
	var edges [][2]string
	nodes, depth := 0, 0
	inNode, inTitle := false, false
	var title strings.Builder
	for {
		tok, err := dec.Token()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatalf("the graph is not well-formed XML: %v\n%s", err, svg)
		}
		switch el := tok.(type) {
		case xml.StartElement:
			depth++
			attr := func(name string) (string, bool) {
				for _, a := range el.Attr {
					if a.Name.Local == name {
						return a.Value, true
					}
				}
				return "", false
			}
			if el.Name.Local == "style" {
				t.Fatalf("a style element: %s", svg)
			}
			if _, ok := attr("style"); ok {
				t.Fatalf("a style attribute: %s", svg)
			}
			class, _ := attr("class")
			switch {
			case el.Name.Local == "g" && strings.HasPrefix(class, "node "):
				nodes++
				inNode = true
			case el.Name.Local == "title" && inNode:
				inTitle = true
				title.Reset()
			case el.Name.Local == "path" && class == "edge":
				from, _ := attr("data-from")
				to, _ := attr("data-to")
				edges = append(edges, [2]string{from, to})
			}
		case xml.EndElement:
			depth--
			switch el.Name.Local {
			case "g":
				inNode = false
			case "title":
				if inTitle {
					titles[title.String()] = true // an empty address has an empty title
				}
				inTitle = false
			}
		case xml.CharData:
			if inTitle {
				title.Write(el)
			}
		}
	}
	if depth != 0 {
		t.Fatalf("unbalanced graph: %s", svg)
	}
	if nodes != want {
		t.Fatalf("%d nodes drawn, want %d of %d (maxNodes %d)", nodes, want, total, maxNodes)
	}
	for _, e := range edges {
		if !titles[e[0]] || !titles[e[1]] {
			t.Fatalf("edge %q -> %q joins a node that is not drawn (%v)", e[0], e[1], titles)
		}
	}
}
