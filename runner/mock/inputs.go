package mock

import (
	"fmt"

	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/hclsyntax"
	"github.com/zclconf/go-cty/cty"
	"github.com/zclconf/go-cty/cty/convert"
)

// This file gives a template module's variables and locals their values: the
// module call's inputs, the variables' defaults, then the locals in the order
// they refer to each other.

// resolveInputs sets var.* from the module call's inputs (literals, or the root
// variables rootVars), else the defaults.
func (m *moduleConfig) resolveInputs(rootVars map[string]cty.Value) error {
	m.vars = map[string]cty.Value{}
	ctx := &hcl.EvalContext{Functions: functions, Variables: map[string]cty.Value{"var": cty.ObjectVal(rootVars)}}
	for _, name := range sortedKeys(m.inputExprs) {
		expr := m.inputExprs[name]
		decl, ok := m.variables[name]
		if !ok {
			return at(expr.Range(), "module %q: unsupported argument %q: the module declares no variable %q", m.name, name, name)
		}
		v, diags := expr.Value(ctx)
		if diags.HasErrors() {
			return at(expr.Range(), "module %q: input %q must be a literal value or a root variable in the generated root module: %s", m.name, name, diagSummary(diags))
		}
		if err := m.setVar(decl, v, expr.Range()); err != nil {
			return err
		}
	}
	for _, name := range sortedKeys(m.variables) {
		decl := m.variables[name]
		if _, set := m.vars[name]; set {
			continue
		}
		if decl.def == cty.NilVal {
			return fmt.Errorf("module %q: missing required input %q (the module's variable %q has no default)", m.name, name, name)
		}
		if err := m.setVar(decl, decl.def, hcl.Range{}); err != nil {
			return err
		}
	}
	return nil
}

func (m *moduleConfig) setVar(decl *variableConfig, v cty.Value, rng hcl.Range) error {
	if decl.defaults != nil {
		v = decl.defaults.Apply(v)
	}
	cv, err := convert.Convert(v, decl.typ)
	if err != nil {
		msg := fmt.Sprintf("module %q: input %q: %s is required", m.name, decl.name, decl.typ.FriendlyNameForConstraint())
		if rng.Filename != "" {
			return at(rng, "%s", msg)
		}
		return fmt.Errorf("%s", msg)
	}
	if decl.sensitive {
		// A module variable declared sensitive makes what it is given sensitive, as in tofu.
		cv = cv.Mark(sensitiveMark)
	}
	m.vars[decl.name] = cv
	return nil
}

// resolveLocals evaluates locals, which may use var.* and other locals but not
// resources: the mock evaluates them once, before any resource.
func (m *moduleConfig) resolveLocals(attrs []*hclsyntax.Attribute) error {
	m.locals = map[string]cty.Value{}
	pending := attrs
	for len(pending) > 0 {
		var next []*hclsyntax.Attribute
		for _, attr := range pending {
			ready, err := m.localReady(attr)
			if err != nil {
				return err
			}
			if !ready {
				next = append(next, attr)
				continue
			}
			v, diags := attr.Expr.Value(m.evalContext(nil, -1))
			if diags.HasErrors() {
				return diagError(diags)
			}
			m.locals[attr.Name] = v
		}
		if len(next) == len(pending) {
			return at(next[0].SrcRange, "local.%s: the locals refer to each other in a cycle, or to a local that is not declared", next[0].Name)
		}
		pending = next
	}
	return nil
}

// localReady reports whether every local a local refers to is already evaluated.
func (m *moduleConfig) localReady(attr *hclsyntax.Attribute) (bool, error) {
	for _, trav := range attr.Expr.Variables() {
		switch trav.RootName() {
		case "var", "path":
		case "local":
			name := attrStep(trav, 1)
			if _, done := m.locals[name]; !done {
				return false, nil
			}
		default:
			return false, at(trav.SourceRange(), "local.%s: locals may only use var.* and other locals in the mock runner", attr.Name)
		}
	}
	return true, nil
}
