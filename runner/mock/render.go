package mock

import (
	"fmt"
	"sort"
	"strconv"
	"strings"

	"github.com/zclconf/go-cty/cty"

	"gantry/runner"
)

// The logs imitate tofu's human-readable output closely enough to be read the
// same way, and say on their first line that nothing real happened.

const (
	simulatedPlanLine  = "SIMULATED by the MockTofuRunner: nothing was planned against real infrastructure."
	simulatedApplyLine = "SIMULATED by the MockTofuRunner: nothing was applied to real infrastructure."
	simulatedCheckLine = "SIMULATED by the MockTofuRunner: no live infrastructure was compared."
)

// symbols are tofu's action markers, in the order of its legend.
var symbols = []struct{ sym, legend string }{
	{"+", "create"},
	{"~", "update in-place"},
	{"-", "destroy"},
	{"-/+", "destroy and then create replacement"},
	{"+/-", "create replacement and then destroy"},
}

func (c *change) symbol() string {
	switch {
	case c.is(actCreate):
		return "+"
	case c.is(actUpdate):
		return "~"
	case c.is(actDelete):
		return "-"
	case c.is(actDeleteCreate):
		return "-/+"
	case c.is(actCreateDelete):
		return "+/-"
	}
	return " "
}

// planLog renders the plan as tofu's plan output does.
func (p *plan) planLog() []byte {
	var b strings.Builder
	b.WriteString(simulatedPlanLine + "\n\n")
	shown := p.shownChanges()
	outputsChanged := p.outputsChanged()
	if len(shown) == 0 && !outputsChanged {
		b.WriteString(p.noChangesText())
		return []byte(b.String())
	}
	if len(shown) > 0 {
		p.writeLegend(&b, shown)
		b.WriteString("OpenTofu will perform the following actions:\n\n")
		for _, c := range shown {
			writeChange(&b, c)
		}
		b.WriteString(p.summary() + "\n")
	}
	if outputsChanged {
		p.writeOutputChanges(&b)
		if len(shown) == 0 {
			b.WriteString("\nYou can apply this plan to save these new output values to the OpenTofu\nstate, without changing any real infrastructure.\n")
		}
	}
	return []byte(b.String())
}

func (p *plan) noChangesText() string {
	if p.kind == runner.KindRefreshOnly {
		return "No changes. Your infrastructure still matches the state.\n\nThe MockTofuRunner has no live cloud: what it applied is what exists, so a\nrefresh-only plan never finds drift (SIMULATED).\n"
	}
	if p.kind == runner.KindDestroy {
		return "No changes. No objects need to be destroyed.\n\nEither you have not created any objects yet or the existing objects were\nalready deleted outside of OpenTofu.\n"
	}
	return "No changes. Your infrastructure matches the configuration.\n\nOpenTofu has compared your real infrastructure against your configuration\nand found no differences, so no changes are needed.\n"
}

func (p *plan) shownChanges() []*change {
	var out []*change
	for _, c := range p.changes {
		if !c.is(actNoOp) {
			out = append(out, c)
		}
	}
	return out
}

func (p *plan) outputsChanged() bool {
	for _, o := range p.outputs {
		if o.actions[0] != "no-op" {
			return true
		}
	}
	return false
}

func (p *plan) writeLegend(b *strings.Builder, shown []*change) {
	b.WriteString("OpenTofu used the selected providers to generate the following execution\nplan. Resource actions are indicated with the following symbols:\n")
	used := map[string]bool{}
	for _, c := range shown {
		used[c.symbol()] = true
	}
	for _, s := range symbols {
		if used[s.sym] {
			fmt.Fprintf(b, "%s %s\n", padLeft(s.sym, 3), s.legend)
		}
	}
	b.WriteString("\n")
}

// writeChange renders one resource change: its header, why, and its attributes.
func writeChange(b *strings.Builder, c *change) {
	fmt.Fprintf(b, "  # %s %s\n", c.addr, headline(c))
	if why := deleteReason(c); why != "" {
		fmt.Fprintf(b, "  # %s\n", why)
	}
	fmt.Fprintf(b, "%s resource %q %q {\n", padLeft(c.symbol(), 3), c.addr.typ, c.addr.name)
	lines, hidden := attributeLines(c)
	for _, l := range lines {
		b.WriteString(l + "\n")
	}
	if hidden > 0 {
		fmt.Fprintf(b, "        # (%d unchanged attributes hidden)\n", hidden)
	}
	b.WriteString("    }\n\n")
}

func headline(c *change) string {
	switch {
	case c.is(actCreate):
		return "will be created"
	case c.is(actUpdate):
		return "will be updated in-place"
	case c.is(actDelete):
		return "will be destroyed"
	}
	return "must be replaced"
}

func deleteReason(c *change) string {
	switch c.reason {
	case reasonNoConfig:
		return fmt.Sprintf("(because %s is not in configuration)", c.addr.resource())
	case reasonNoModule:
		return fmt.Sprintf("(because %s is not in configuration)", c.addr.moduleAddress())
	case reasonCountIndex:
		return fmt.Sprintf("(because index [%d] is out of range for count)", c.addr.index)
	case reasonRepetition:
		if c.addr.index >= 0 {
			return "(because resource does not use count)"
		}
		return "(because resource uses count)"
	}
	return ""
}

// attributeLines renders the attributes that matter for the change; for
// updates and replacements, unchanged ones are hidden except id and name. A
// sensitive part of a value renders as "(sensitive value)", as in tofu: values are
// compared unmarked and rendered marked.
func attributeLines(c *change) (lines []string, hidden int) {
	type row struct{ sym, name, value, note string }
	var rows []row
	obj := c.after
	if c.is(actDelete) {
		obj = c.before
	}
	shownBefore, shownAfter := markSensitive(c.before, c.beforeSensitive), markSensitive(c.after, c.afterSensitive)
	names := make([]string, 0)
	for it := obj.ElementIterator(); it.Next(); {
		k, _ := it.Element()
		names = append(names, k.AsString())
	}
	sort.Strings(names)
	replacing := map[string]bool{}
	for _, p := range c.replacePaths {
		replacing[p] = true
	}
	for _, name := range names {
		switch {
		case c.is(actCreate):
			if after := c.after.GetAttr(name); !after.IsNull() {
				rows = append(rows, row{"+", name, renderValue(shownAfter.GetAttr(name)), ""})
			}
		case c.is(actDelete):
			if before := c.before.GetAttr(name); !before.IsNull() {
				rows = append(rows, row{"-", name, renderValue(shownBefore.GetAttr(name)) + " -> null", ""})
			}
		default:
			before, after := c.before.GetAttr(name), c.after.GetAttr(name)
			shownB, shownA := renderValue(shownBefore.GetAttr(name)), renderValue(shownAfter.GetAttr(name))
			note := ""
			if replacing[name] {
				note = " # forces replacement"
			}
			switch {
			case sameValue(before, after):
				if name == "id" || name == "name" {
					rows = append(rows, row{" ", name, shownA, ""})
				} else {
					hidden++
				}
			case before.IsNull():
				rows = append(rows, row{"+", name, shownA, note})
			case after.IsKnown() && after.IsNull():
				rows = append(rows, row{"-", name, shownB + " -> null", note})
			default:
				rows = append(rows, row{"~", name, shownB + " -> " + shownA, note})
			}
		}
	}
	width := 0
	for _, r := range rows {
		width = max(width, len(r.name))
	}
	for _, r := range rows {
		lines = append(lines, fmt.Sprintf("      %s %-*s = %s%s", r.sym, width, r.name, r.value, r.note))
	}
	return lines, hidden
}

func (p *plan) writeOutputChanges(b *strings.Builder) {
	b.WriteString("\nChanges to Outputs:\n")
	width := 0
	for _, o := range p.outputs {
		width = max(width, len(o.name))
	}
	for _, o := range p.outputs {
		var sym, value string
		switch o.actions[0] {
		case "no-op":
			continue
		case "create":
			sym, value = "+", renderOutput(o, o.after)
		case "delete":
			sym, value = "-", renderOutput(o, o.before)+" -> null"
		default:
			sym, value = "~", renderOutput(o, o.before)+" -> "+renderOutput(o, o.after)
		}
		fmt.Fprintf(b, "  %s %-*s = %s\n", sym, width, o.name, value)
	}
}

func renderOutput(o *outputChange, v cty.Value) string {
	if o.sensitive {
		return "(sensitive value)"
	}
	return renderValue(v)
}

// renderValue writes a value in HCL-like syntax, on one line; a marked (sensitive)
// part as "(sensitive value)".
func renderValue(v cty.Value) string {
	if v.IsMarked() {
		return "(sensitive value)"
	}
	ty := v.Type()
	switch {
	case !v.IsKnown():
		return "(known after apply)"
	case v.IsNull():
		return "null"
	case ty == cty.String:
		return strconv.Quote(v.AsString())
	case ty == cty.Number:
		return v.AsBigFloat().Text('f', -1)
	case ty == cty.Bool:
		return strconv.FormatBool(v.True())
	case ty.IsListType() || ty.IsTupleType() || ty.IsSetType():
		var parts []string
		for it := v.ElementIterator(); it.Next(); {
			_, e := it.Element()
			parts = append(parts, renderValue(e))
		}
		return "[" + strings.Join(parts, ", ") + "]"
	case ty.IsMapType() || ty.IsObjectType():
		var parts []string
		for it := v.ElementIterator(); it.Next(); {
			k, e := it.Element()
			parts = append(parts, fmt.Sprintf("%s = %s", k.AsString(), renderValue(e)))
		}
		if len(parts) == 0 {
			return "{}"
		}
		return "{ " + strings.Join(parts, ", ") + " }"
	}
	return v.GoString()
}

func padLeft(s string, width int) string {
	return strings.Repeat(" ", max(0, width-len(s))) + s
}

// applyLog renders the apply as tofu's apply output does: destroys first (in
// reverse dependency order), then creates and updates (dependencies first), then
// the deposed objects of create-before-destroy replacements.
func (p *plan) applyLog(a *applied) []byte {
	var b strings.Builder
	b.WriteString(simulatedApplyLine + "\n\n")
	order := p.executionOrder()
	for i := len(order) - 1; i >= 0; i-- {
		if c := order[i]; c.is(actDelete) || c.is(actDeleteCreate) {
			writeDestroy(&b, c.addr.String(), c.before)
		}
	}
	for _, c := range order {
		final := a.final[c.addr]
		switch {
		case c.is(actCreate) || c.replaces():
			fmt.Fprintf(&b, "%s: Creating...\n%s: Creation complete after 0s [id=%s]\n", c.addr, c.addr, idOf(final))
		case c.is(actUpdate):
			fmt.Fprintf(&b, "%s: Modifying... [id=%s]\n%s: Modifications complete after 0s [id=%s]\n", c.addr, idOf(c.before), c.addr, idOf(final))
		}
	}
	for i := len(order) - 1; i >= 0; i-- {
		if c := order[i]; c.is(actCreateDelete) {
			writeDestroy(&b, c.addr.String()+" (deposed object)", c.before)
		}
	}
	add, change, destroy := p.counts()
	if p.kind == runner.KindDestroy {
		fmt.Fprintf(&b, "\nDestroy complete! Resources: %d destroyed.\n", destroy)
		return []byte(b.String())
	}
	fmt.Fprintf(&b, "\nApply complete! Resources: %d added, %d changed, %d destroyed.\n", add, change, destroy)
	writeOutputs(&b, a.outputs)
	return []byte(b.String())
}

func writeDestroy(b *strings.Builder, what string, before cty.Value) {
	fmt.Fprintf(b, "%s: Destroying... [id=%s]\n%s: Destruction complete after 0s\n", what, idOf(before), what)
}

func writeOutputs(b *strings.Builder, outputs map[string]outputValue) {
	names := sortedKeys(outputs)
	if len(names) == 0 {
		return
	}
	b.WriteString("\nOutputs:\n\n")
	for _, name := range names {
		o := outputs[name]
		value := renderValue(o.value)
		if o.sensitive {
			value = "<sensitive>"
		}
		fmt.Fprintf(b, "%s = %s\n", name, value)
	}
}

func idOf(obj cty.Value) string {
	if obj == cty.NilVal || obj.IsNull() || !obj.Type().IsObjectType() || !obj.Type().HasAttribute("id") {
		return ""
	}
	id := obj.GetAttr("id")
	if !id.IsKnown() || id.IsNull() {
		return ""
	}
	return id.AsString()
}
