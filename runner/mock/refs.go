package mock

import (
	"fmt"
	"strings"

	"github.com/hashicorp/hcl/v2"
	"github.com/zclconf/go-cty/cty"
)

// referenceStrings lists the references of an expression the way tofu's
// configuration JSON does: each reference with its remaining attribute steps,
// then unwrapped one step at a time down to the referenced object, e.g.
// sandbox_network.this.id gives ["sandbox_network.this.id", "sandbox_network.this"].
// A reader finds a resource's dependencies by matching these strings.
func referenceStrings(expr hcl.Expression) []string {
	var out []string
	for _, trav := range expr.Variables() {
		subject, rest, container := splitReference(trav)
		for n := len(rest); n > 0; n-- {
			out = append(out, subject+traversalString(rest[:n]))
		}
		out = append(out, subject)
		if container != "" {
			out = append(out, container)
		}
	}
	return out
}

// splitReference splits a traversal into the referenced object's address, the
// steps into that object, and (for an indexed resource or a module output) the
// address of the object containing it.
func splitReference(trav hcl.Traversal) (subject string, rest hcl.Traversal, container string) {
	n := 2 // var.x, local.x, count.index, path.module, type.name
	switch {
	case trav.RootName() == "module" && len(trav) >= 3:
		n = 3 // module.name.output
		container = traversalString(trav[:2])
	case trav.RootName() != "var" && trav.RootName() != "local" && len(trav) >= 3:
		if _, indexed := trav[2].(hcl.TraverseIndex); indexed && schemas[trav.RootName()].attrs != nil {
			n = 3 // type.name[index]
			container = traversalString(trav[:2])
		}
	}
	if n > len(trav) {
		n = len(trav)
	}
	return traversalString(trav[:n]), trav[n:], container
}

// traversalString renders a traversal as written: a.b[0]["k"].
func traversalString(trav hcl.Traversal) string {
	var b strings.Builder
	for _, step := range trav {
		switch s := step.(type) {
		case hcl.TraverseRoot:
			b.WriteString(s.Name)
		case hcl.TraverseAttr:
			b.WriteByte('.')
			b.WriteString(s.Name)
		case hcl.TraverseIndex:
			b.WriteString(indexString(s.Key))
		case hcl.TraverseSplat:
			b.WriteString("[*]")
		}
	}
	return b.String()
}

func indexString(key cty.Value) string {
	switch {
	case !key.IsKnown() || key.IsNull():
		return "[?]"
	case key.Type() == cty.String:
		return fmt.Sprintf("[%q]", key.AsString())
	case key.Type() == cty.Number:
		return "[" + key.AsBigFloat().Text('f', -1) + "]"
	}
	return "[?]"
}
