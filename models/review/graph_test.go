package review

import (
	"encoding/xml"
	"fmt"
	"io"
	"path/filepath"
	"strings"
	"testing"

	"gantry/models/classify"
)

var classifyOpts = classify.Options{Irreversible: []string{"sandbox_database"}}

func classifyFile(t *testing.T, name string) classify.Result {
	t.Helper()
	res, err := classify.Classify(readFile(t, filepath.Join("..", "classify", "testdata", name)), classifyOpts)
	if err != nil {
		t.Fatal(err)
	}
	return res
}

// svgDoc is what the tests read back from a Graph.
type svgDoc struct {
	root       map[string]string
	ids        map[string]string // id -> text content
	nodes      []svgNode
	edges      map[[2]string]int // from, to -> count
	texts      []string          // every <text> content
	hasStyleEl bool
}

type svgNode struct {
	class, title, label string
}

// parseSVG checks that the SVG is well-formed XML and collects its parts.
func parseSVG(t *testing.T, svg string) svgDoc {
	t.Helper()
	doc := svgDoc{root: map[string]string{}, ids: map[string]string{}, edges: map[[2]string]int{}}
	dec := xml.NewDecoder(strings.NewReader(svg))
	var stack []xml.StartElement
	var cur *svgNode
	var text strings.Builder
	for {
		tok, err := dec.Token()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatalf("SVG is not well-formed: %v\n%s", err, svg)
		}
		switch tok := tok.(type) {
		case xml.StartElement:
			attrs := map[string]string{}
			for _, a := range tok.Attr {
				attrs[a.Name.Local] = a.Value
			}
			if len(stack) == 0 {
				if tok.Name.Local != "svg" || tok.Name.Space != "http://www.w3.org/2000/svg" {
					t.Fatalf("root %v, want svg in the SVG namespace", tok.Name)
				}
				doc.root = attrs
			}
			switch tok.Name.Local {
			case "style":
				doc.hasStyleEl = true
			case "g":
				if strings.HasPrefix(attrs["class"], "node ") {
					doc.nodes = append(doc.nodes, svgNode{class: attrs["class"]})
					cur = &doc.nodes[len(doc.nodes)-1]
				}
			case "path":
				if attrs["class"] == "edge" {
					if attrs["marker-end"] == "" || attrs["d"] == "" {
						t.Errorf("edge without d or marker: %v", attrs)
					}
					doc.edges[[2]string{attrs["data-from"], attrs["data-to"]}]++
				}
			}
			stack = append(stack, tok)
			text.Reset()
		case xml.CharData:
			text.Write(tok)
		case xml.EndElement:
			start := stack[len(stack)-1]
			stack = stack[:len(stack)-1]
			for _, a := range start.Attr {
				if a.Name.Local == "id" {
					doc.ids[a.Value] = text.String()
				}
			}
			switch start.Name.Local {
			case "title":
				if cur != nil && cur.title == "" {
					cur.title = text.String()
				}
			case "text":
				doc.texts = append(doc.texts, text.String())
				if cur != nil && cur.label == "" {
					cur.label = text.String()
				}
			case "g":
				cur = nil
			}
		}
	}
	return doc
}

func (d svgDoc) count(class string) int {
	n := 0
	for _, node := range d.nodes {
		if strings.Contains(" "+node.class+" ", " "+class+" ") {
			n++
		}
	}
	return n
}

func checkCommon(t *testing.T, svg string, doc svgDoc, desc string) {
	t.Helper()
	if doc.root["role"] != "img" {
		t.Errorf("role %q", doc.root["role"])
	}
	for _, attr := range []string{"viewBox", "width", "height"} {
		if doc.root[attr] == "" {
			t.Errorf("no %s", attr)
		}
	}
	if vb := fmt.Sprintf("0 0 %s %s", doc.root["width"], doc.root["height"]); doc.root["viewBox"] != vb {
		t.Errorf("viewBox %q, want %q", doc.root["viewBox"], vb)
	}
	ids := strings.Fields(doc.root["aria-labelledby"])
	if len(ids) != 2 {
		t.Fatalf("aria-labelledby %q", doc.root["aria-labelledby"])
	}
	if !strings.Contains(svg, `<title id="`+ids[0]+`">`) || !strings.Contains(svg, `<desc id="`+ids[1]+`">`) {
		t.Errorf("aria-labelledby %q does not name the <title> and <desc>", ids)
	}
	if got := doc.ids[ids[1]]; got != desc {
		t.Errorf("desc %q, want %q", got, desc)
	}
	if strings.Contains(svg, "style=") || doc.hasStyleEl || strings.Contains(svg, "<style") {
		t.Error("inline style: the page's CSP forbids it")
	}
	if !strings.Contains(svg, `<marker id="`) || !strings.Contains(svg, `<defs>`) {
		t.Error("no arrowhead marker in <defs>")
	}
}

// checkEdges wants one edge per (replaced or destroyed, dependent) pair, and no other.
func checkEdges(t *testing.T, res classify.Result, doc svgDoc) {
	t.Helper()
	want := 0
	for _, list := range [][]int{res.Replaces, res.Destroys} {
		for _, i := range list {
			for _, d := range res.Changes[i].Dependents {
				want++
				if n := doc.edges[[2]string{res.Changes[i].Address, d}]; n != 1 {
					t.Errorf("edge %s -> %s drawn %d times, want 1", res.Changes[i].Address, d, n)
				}
			}
		}
	}
	got := 0
	for _, n := range doc.edges {
		got += n
	}
	if got != want {
		t.Errorf("%d edges, want %d: %v", got, want, doc.edges)
	}
}

func TestGraphReplaceNetwork(t *testing.T) {
	t.Parallel()
	res := classifyFile(t, "replace_network.json")
	svg := Graph(res, 60)
	doc := parseSVG(t, svg)
	// The network and the database are replaced; the database, also a
	// dependent of the network, is drawn once, in column 1.
	checkCommon(t, svg, doc, "2 replaced, 0 destroyed, 3 dependents")
	if len(doc.nodes) != 5 || doc.count("replace") != 2 || doc.count("destroy") != 0 ||
		doc.count("dependent") != 3 || doc.count("irreversible") != 1 {
		t.Errorf("nodes %+v", doc.nodes)
	}
	for _, n := range doc.nodes {
		if n.title == "module.postgres.sandbox_database.this" && n.class != "node replace irreversible" {
			t.Errorf("database class %q", n.class)
		}
	}
	checkEdges(t, res, doc)
	if strings.Contains(svg, "more resource") {
		t.Error("nothing was left out")
	}
	if again := Graph(res, 60); again != svg {
		t.Error("Graph is not deterministic")
	}
}

func TestGraphCreateBeforeDestroy(t *testing.T) {
	t.Parallel()
	res := classifyFile(t, "cbd.json")
	svg := Graph(res, 60)
	doc := parseSVG(t, svg)
	checkCommon(t, svg, doc, "1 replaced, 0 destroyed, 4 dependents")
	if doc.count("replace") != 1 || doc.count("dependent") != 4 || doc.count("irreversible") != 0 {
		t.Errorf("nodes %+v", doc.nodes)
	}
	checkEdges(t, res, doc)
	// The for_each key `"a.b]"` survives escaping in titles and attributes.
	if doc.edges[[2]string{"sandbox_subnet.this[0]", `sandbox_instance.web["a.b]"]`}] != 1 {
		t.Errorf("edges %v", doc.edges)
	}
	found := false
	for _, n := range doc.nodes {
		found = found || n.title == `sandbox_instance.web["a.b]"]` && n.label == n.title
	}
	if !found {
		t.Errorf("nodes %+v", doc.nodes)
	}
}

func TestGraphDestroy(t *testing.T) {
	t.Parallel()
	res := classifyFile(t, "destroy.json")
	svg := Graph(res, 0)
	doc := parseSVG(t, svg)
	// The backup is destroyed and a dependent of the database: drawn once, as a destroy.
	checkCommon(t, svg, doc, "0 replaced, 3 destroyed, 1 dependent")
	if doc.count("destroy") != 3 || doc.count("irreversible") != 1 || doc.count("dependent") != 1 {
		t.Errorf("nodes %+v", doc.nodes)
	}
	checkEdges(t, res, doc)
}

func TestGraphNothingToDraw(t *testing.T) {
	t.Parallel()
	for _, f := range []string{"create.json", "update.json"} {
		if svg := Graph(classifyFile(t, f), 60); svg != "" {
			t.Errorf("%s: %q", f, svg)
		}
	}
	if svg := Graph(classify.Result{}, 60); svg != "" {
		t.Errorf("empty result: %q", svg)
	}
}

func TestGraphEscapes(t *testing.T) {
	t.Parallel()
	evil := `sandbox_x.a["<&\">"]`
	dep := `sandbox_y.b["</svg><script>alert(1)</script>"]`
	long := `module.very_long_module_name["` + strings.Repeat("k", 40) + `"].sandbox_resource_type.name`
	res := classify.Result{
		Changes: []classify.Change{
			{Address: evil, Type: "sandbox_x", Class: classify.ClassReplace, Irreversible: true, Dependents: []string{dep, long}},
			{Address: dep, Type: "sandbox_y", Class: classify.ClassUpdate},
			{Address: long, Type: "sandbox_resource_type", Class: classify.ClassUpdate},
		},
		Replaces: []int{0},
	}
	svg := Graph(res, 10)
	doc := parseSVG(t, svg)
	checkCommon(t, svg, doc, "1 replaced, 0 destroyed, 2 dependents")
	if strings.Contains(svg, "<script") || strings.Contains(svg, `<&"`) {
		t.Errorf("unescaped address in %s", svg)
	}
	if doc.edges[[2]string{evil, dep}] != 1 || doc.edges[[2]string{evil, long}] != 1 {
		t.Errorf("edges %v", doc.edges)
	}
	titles := map[string]svgNode{}
	for _, n := range doc.nodes {
		titles[n.title] = n
	}
	if titles[evil].label != evil || titles[evil].class != "node replace irreversible" {
		t.Errorf("evil node %+v", titles[evil])
	}
	// A long address is cut with an ellipsis; its <title> keeps it whole.
	l := titles[long].label
	if !strings.Contains(l, "…") || len([]rune(l)) > 40 || !strings.HasSuffix(l, ".name") || !strings.HasPrefix(l, "module.") {
		t.Errorf("long label %q", l)
	}
}

func TestGraphTruncates(t *testing.T) {
	t.Parallel()
	// 5 replaces in plan order (interleaved with their dependents); each has
	// 3 dependents, 2 of them shared with the next: 5 + 11 resources in all.
	var res classify.Result
	dep := func(k int) string { return fmt.Sprintf("sandbox_dep.d%d", k) }
	for r := range 5 {
		res.Replaces = append(res.Replaces, len(res.Changes))
		res.Changes = append(res.Changes, classify.Change{
			Address: fmt.Sprintf("sandbox_net.n%d", r), Class: classify.ClassReplace,
			Dependents: []string{dep(2 * r), dep(2*r + 1), dep(2*r + 2)},
		})
		res.Changes = append(res.Changes, classify.Change{Address: dep(2 * r), Class: classify.ClassUpdate})
	}
	all := parseSVG(t, Graph(res, 0))
	if len(all.nodes) != 16 || all.count("dependent") != 11 {
		t.Fatalf("unlimited: %d nodes, %d dependents", len(all.nodes), all.count("dependent"))
	}
	checkEdges(t, res, all)

	for _, tt := range []struct {
		max, replaces, dependents, edges int
		more                             string
	}{
		{max: 16, replaces: 5, dependents: 11, edges: 15},
		{max: 7, replaces: 5, dependents: 2, edges: 2, more: "and 9 more resources"}, // d0, d1
		{max: 3, replaces: 3, dependents: 0, edges: 0, more: "and 13 more resources"},
		{max: 15, replaces: 5, dependents: 10, edges: 14, more: "and 1 more resource"},
	} {
		svg := Graph(res, tt.max)
		doc := parseSVG(t, svg)
		checkCommon(t, svg, doc, "5 replaced, 0 destroyed, 11 dependents")
		if len(doc.nodes) != tt.replaces+tt.dependents || doc.count("replace") != tt.replaces || doc.count("dependent") != tt.dependents {
			t.Errorf("max %d: nodes %+v", tt.max, doc.nodes)
		}
		// Replaces come first, in plan order.
		for k := range tt.replaces {
			if want := fmt.Sprintf("sandbox_net.n%d", k); doc.nodes[k].title != want {
				t.Errorf("max %d: node %d is %q, want %q", tt.max, k, doc.nodes[k].title, want)
			}
		}
		n := 0
		for _, c := range doc.edges {
			n += c
		}
		if n != tt.edges {
			t.Errorf("max %d: %d edges, want %d", tt.max, n, tt.edges)
		}
		last := doc.texts[len(doc.texts)-1]
		if tt.more == "" && strings.Contains(svg, "more resource") || tt.more != "" && last != tt.more {
			t.Errorf("max %d: last text %q, want %q", tt.max, last, tt.more)
		}
	}
}
