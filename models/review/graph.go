package review

import (
	"encoding/xml"
	"slices"
	"strconv"
	"strings"

	"gantry/models/words"

	"gantry/models/classify"
)

// Geometry of the picture, in SVG user units (pixels at 1:1).
const (
	gPad       = 16  // around everything
	gGutter    = 40  // left of column 1, for edges between two replaced/destroyed resources
	gHead      = 28  // column headings
	gNodeW     = 300 // a node's box
	gNodeH     = 40
	gGapY      = 12  // between boxes
	gColGap    = 120 // between the columns, where the edges run
	gFoot      = 28  // the "and N more resources" line
	gLabelMax  = 38  // runes of an address that fit a box at font-size 12
	gLabelHead = 14  // runes kept before the ellipsis of a long address
)

// IDs inside the SVG. The page draws one graph, inline: they must not clash
// with the page's own ids.
const (
	gTitleID = "blast-title"
	gDescID  = "blast-desc"
	gArrowID = "blast-arrow"
)

// Graph draws, on the server, the replaced and destroyed resources and their dependents as SVG:
// replace/destroy nodes highlighted (CSS classes "node replace", "node destroy", "node dependent",
// "node irreversible" added for data-bearing ones), an edge from each replaced/destroyed resource to each
// dependent. At most maxNodes nodes are drawn (replaces/destroys first, in plan order); the rest are
// summarised in a final text "and N more resources". Returns "" when nothing is replaced or destroyed.
//
// Column 1 holds the replaced and destroyed resources in plan order, column 2
// the other dependents in order of first appearance, each drawn once however
// many resources it depends on. A dependent that is itself replaced or
// destroyed stays in column 1; its incoming edges curve through the gutter on
// the left. Every edge carries data-from and data-to with the two addresses.
//
// The SVG has no style attribute or element (the page's CSP forbids inline
// styles): only classes, geometry and neutral presentation attributes
// (fill, stroke, font) that the page's stylesheet overrides. Every text is
// XML-escaped. maxNodes <= 0 draws every node.
func Graph(res classify.Result, maxNodes int) string {
	nRepl, nDest := len(res.Replaces), len(res.Destroys)
	if nRepl+nDest == 0 {
		return ""
	}
	// Column 1: the replaces and destroys, merged back into plan order.
	col1 := make([]int, 0, nRepl+nDest)
	col1 = append(append(col1, res.Replaces...), res.Destroys...)
	slices.Sort(col1)
	inCol1 := make(map[string]int, len(col1)) // address -> position in col1
	for k, i := range col1 {
		inCol1[res.Changes[i].Address] = k
	}
	// Column 2: every other dependent, once.
	var col2 []string
	inCol2 := map[string]int{}
	for _, i := range col1 {
		for _, d := range res.Changes[i].Dependents {
			if _, ok := inCol1[d]; ok {
				continue
			}
			if _, ok := inCol2[d]; !ok {
				inCol2[d] = len(col2)
				col2 = append(col2, d)
			}
		}
	}
	total := len(col1) + len(col2)
	draw1, draw2 := len(col1), len(col2)
	if maxNodes > 0 && total > maxNodes {
		draw1 = min(draw1, maxNodes)
		draw2 = maxNodes - draw1
	}
	more := total - draw1 - draw2

	// Edges between drawn nodes. Column-1 to column-1 edges need the gutter.
	type edge struct {
		from, to    string
		within      bool // both ends in column 1
		y1, y2      int
		x1, x2, via int // via: the control points' x
	}
	x1 := gPad
	var edges []edge
	gutter := false
	for k := range draw1 {
		for _, d := range res.Changes[col1[k]].Dependents {
			if j, ok := inCol1[d]; ok && j < draw1 {
				gutter = true
				edges = append(edges, edge{from: res.Changes[col1[k]].Address, to: d, within: true, y1: nodeY(k), y2: nodeY(j)})
			} else if j, ok := inCol2[d]; ok && j < draw2 {
				edges = append(edges, edge{from: res.Changes[col1[k]].Address, to: d, y1: nodeY(k), y2: nodeY(j)})
			}
		}
	}
	if gutter {
		x1 += gGutter
	}
	x2 := x1 + gNodeW + gColGap
	for k := range edges {
		e := &edges[k]
		e.y1 += gNodeH / 2
		e.y2 += gNodeH / 2
		if e.within { // leave and enter on the left; longer arcs bulge further
			e.x1, e.x2 = x1, x1
			e.via = x1 - min(gGutter-4, 12+4*abs(e.y2-e.y1)/(gNodeH+gGapY))
		} else {
			e.x1, e.x2 = x1+gNodeW, x2
			e.via = x1 + gNodeW + gColGap/2
		}
	}

	width := x1 + gNodeW + gPad
	if draw2 > 0 {
		width = x2 + gNodeW + gPad
	}
	rows := max(draw1, draw2)
	height := nodeY(rows) - gGapY + gPad
	if more > 0 {
		height += gFoot
	}

	var b strings.Builder
	b.Grow(1024 + 400*(draw1+draw2) + 200*len(edges))
	w, h := strconv.Itoa(width), strconv.Itoa(height)
	b.WriteString(`<svg xmlns="http://www.w3.org/2000/svg" class="blast-radius" role="img" aria-labelledby="` +
		gTitleID + ` ` + gDescID + `" viewBox="0 0 ` + w + ` ` + h + `" width="` + w + `" height="` + h +
		`" font-family="ui-monospace, SFMono-Regular, Menlo, Consolas, monospace" font-size="12">`)
	b.WriteString(`<title id="` + gTitleID + `">`)
	if more > 0 {
		escape(&b, "Blast radius of the plan ("+strconv.Itoa(draw1+draw2)+" of "+strconv.Itoa(total)+" resources drawn)")
	} else {
		b.WriteString("Blast radius of the plan")
	}
	b.WriteString(`</title><desc id="` + gDescID + `">`)
	b.WriteString(strconv.Itoa(nRepl) + " replaced, " + strconv.Itoa(nDest) + " destroyed, " + words.Count(len(col2), "dependent", "dependents"))
	b.WriteString(`</desc><defs><marker id="` + gArrowID + `" viewBox="0 0 10 10" refX="10" refY="5" markerWidth="8" markerHeight="8" orient="auto-start-reverse">` +
		`<path class="arrow" d="M0,0 L10,5 L0,10 z" fill="currentColor"/></marker></defs>`)

	// Headings.
	ty := strconv.Itoa(gPad + 14)
	b.WriteString(`<text class="heading" x="` + strconv.Itoa(x1) + `" y="` + ty + `" fill="currentColor">Replaced and destroyed</text>`)
	if draw2 > 0 {
		b.WriteString(`<text class="heading" x="` + strconv.Itoa(x2) + `" y="` + ty + `" fill="currentColor">Dependents</text>`)
	}

	// Edges first, so the boxes cover their ends.
	for _, e := range edges {
		b.WriteString(`<path class="edge" d="M`)
		b.WriteString(strconv.Itoa(e.x1) + "," + strconv.Itoa(e.y1) + " C" + strconv.Itoa(e.via) + "," + strconv.Itoa(e.y1) + " " +
			strconv.Itoa(e.via) + "," + strconv.Itoa(e.y2) + " " + strconv.Itoa(e.x2) + "," + strconv.Itoa(e.y2))
		b.WriteString(`" fill="none" stroke="currentColor" marker-end="url(#` + gArrowID + `)" data-from="`)
		escape(&b, e.from)
		b.WriteString(`" data-to="`)
		escape(&b, e.to)
		b.WriteString(`"/>`)
	}

	for k := range draw1 {
		c := &res.Changes[col1[k]]
		class, kind := "node destroy", "destroy"
		if c.Class == classify.ClassReplace {
			class, kind = "node replace", "replace"
			if c.CreateBeforeDestroy {
				kind = "replace (create first)"
			}
		}
		if c.Irreversible {
			class += " irreversible"
			kind += " · data loss"
		}
		writeNode(&b, class, kind, c.Address, x1, nodeY(k))
	}
	for j := range draw2 {
		writeNode(&b, "node dependent", "dependent", col2[j], x2, nodeY(j))
	}
	if more > 0 {
		b.WriteString(`<text class="more" x="` + strconv.Itoa(x1) + `" y="` + strconv.Itoa(height-gPad-8) + `" fill="currentColor">and ` +
			words.Count(more, "more resource", "more resources") + `</text>`)
	}
	b.WriteString(`</svg>`)
	return b.String()
}

func abs(x int) int {
	if x < 0 {
		return -x
	}
	return x
}

// nodeY is the top of the box in row k.
func nodeY(k int) int { return gPad + gHead + k*(gNodeH+gGapY) }

// writeNode draws one box: the address (shortened if long; the full address is
// its <title>, shown on hover) and a line saying what happens to it.
func writeNode(b *strings.Builder, class, kind, addr string, x, y int) {
	b.WriteString(`<g class="` + class + `"><title>`)
	escape(b, addr)
	b.WriteString(`</title><rect x="` + strconv.Itoa(x) + `" y="` + strconv.Itoa(y) + `" width="` + strconv.Itoa(gNodeW) +
		`" height="` + strconv.Itoa(gNodeH) + `" rx="4" fill="#ffffff" stroke="currentColor"/>`)
	b.WriteString(`<text class="label" x="` + strconv.Itoa(x+10) + `" y="` + strconv.Itoa(y+17) + `" fill="currentColor">`)
	escape(b, shorten(addr))
	b.WriteString(`</text><text class="kind" x="` + strconv.Itoa(x+10) + `" y="` + strconv.Itoa(y+32) + `" font-size="10" fill="currentColor">`)
	escape(b, kind)
	b.WriteString(`</text></g>`)
}

// shorten cuts a long address in the middle, keeping the module path's start
// and the resource's type, name and key.
func shorten(addr string) string {
	r := []rune(addr)
	if len(r) <= gLabelMax {
		return addr
	}
	return string(r[:gLabelHead]) + "…" + string(r[len(r)-(gLabelMax-gLabelHead-1):])
}

// escape writes s as XML character data, also safe inside a double-quoted attribute.
func escape(b *strings.Builder, s string) {
	_ = xml.EscapeText(b, []byte(s)) // a strings.Builder never fails
}
