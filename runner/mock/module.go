package mock

import (
	"fmt"
	"sort"
	"strings"

	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/ext/typeexpr"
	"github.com/hashicorp/hcl/v2/hclsyntax"
	"github.com/zclconf/go-cty/cty"
)

// This file reads a template module: its variables, locals, resources and
// outputs. inputs.go gives the variables and locals their values; order.go
// orders the resources by their references.

// loadModule parses the called module's files and resolves its inputs against the
// root variables' values vars.
func loadModule(files map[string][]byte, m *moduleConfig, vars map[string]cty.Value) (*moduleConfig, error) {
	bodies, err := parseFiles(files, m.dir)
	if err != nil {
		return nil, err
	}
	if len(bodies) == 0 {
		return nil, fmt.Errorf("module %q: the config bundle has no .tf files in %s", m.name, m.dir)
	}
	m.variables = map[string]*variableConfig{}
	m.resources = map[string]*resourceConfig{}
	var localAttrs []*hclsyntax.Attribute
	for _, body := range bodies {
		if err := noAttributes(body); err != nil {
			return nil, err
		}
		for _, blk := range body.Blocks {
			if err := m.readBlock(blk, &localAttrs); err != nil {
				return nil, err
			}
		}
	}
	sort.Slice(m.outputs, func(i, j int) bool { return m.outputs[i].name < m.outputs[j].name })
	if err := m.resolveInputs(vars); err != nil {
		return nil, err
	}
	if err := m.resolveLocals(localAttrs); err != nil {
		return nil, err
	}
	if err := m.resolveReferences(); err != nil {
		return nil, err
	}
	return m, nil
}

// readBlock reads one top-level block of a template module.
func (m *moduleConfig) readBlock(blk *hclsyntax.Block, locals *[]*hclsyntax.Attribute) error {
	switch blk.Type {
	case "terraform", "provider":
		// Provider requirements are the root module's business in a bundle.
	case "variable":
		v, err := readVariable(blk)
		if err != nil {
			return err
		}
		if _, dup := m.variables[v.name]; dup {
			return at(blk.DefRange(), "duplicate variable %q", v.name)
		}
		m.variables[v.name] = v
	case "locals":
		for _, attr := range sortedAttributes(blk.Body) {
			*locals = append(*locals, attr)
		}
	case "resource":
		r, err := readResource(blk)
		if err != nil {
			return err
		}
		if _, dup := m.resources[r.key()]; dup {
			return at(blk.DefRange(), "duplicate resource %q", r.key())
		}
		m.resources[r.key()] = r
	case "output":
		o, err := readOutput(blk)
		if err != nil {
			return err
		}
		m.outputs = append(m.outputs, o)
	default:
		return at(blk.DefRange(), "%q blocks are not supported by the mock runner", blk.Type)
	}
	return nil
}

func readVariable(blk *hclsyntax.Block) (*variableConfig, error) {
	if len(blk.Labels) != 1 {
		return nil, at(blk.DefRange(), "a variable block needs exactly one label, its name")
	}
	v := &variableConfig{name: blk.Labels[0], typ: cty.DynamicPseudoType, def: cty.NilVal}
	for name, attr := range blk.Body.Attributes {
		switch name {
		case "type":
			typ, defaults, diags := typeexpr.TypeConstraintWithDefaults(attr.Expr)
			if diags.HasErrors() {
				return nil, diagError(diags)
			}
			v.typ, v.defaults = typ, defaults
			v.typeString = typeexpr.TypeString(typ)
		case "default":
			def, diags := attr.Expr.Value(nil)
			if diags.HasErrors() {
				return nil, at(attr.SrcRange, "variable %q: the default must be a literal value", v.name)
			}
			v.def = def
		case "description":
			v.description = literalString(attr)
		case "sensitive":
			s, diags := attr.Expr.Value(nil)
			v.sensitive = !diags.HasErrors() && s.Type() == cty.Bool && s.True()
		case "nullable", "ephemeral":
		default:
			return nil, at(attr.SrcRange, "variable %q: unsupported argument %q", v.name, name)
		}
	}
	// validation blocks are not evaluated: the portal validates inputs against the
	// template's schema before it generates the bundle.
	return v, nil
}

func readOutput(blk *hclsyntax.Block) (*outputConfig, error) {
	if len(blk.Labels) != 1 {
		return nil, at(blk.DefRange(), "an output block needs exactly one label, its name")
	}
	o := &outputConfig{name: blk.Labels[0]}
	for name, attr := range blk.Body.Attributes {
		switch name {
		case "value":
			o.expr = attr.Expr
		case "sensitive":
			s, diags := attr.Expr.Value(nil)
			o.sensitive = !diags.HasErrors() && s.Type() == cty.Bool && s.True()
		case "description":
			o.description = literalString(attr)
		case "depends_on":
		default:
			return nil, at(attr.SrcRange, "output %q: unsupported argument %q", o.name, name)
		}
	}
	if o.expr == nil {
		return nil, at(blk.DefRange(), "output %q has no value", o.name)
	}
	return o, nil
}

// readResource reads a resource block: its arguments, meta-arguments and lifecycle.
func readResource(blk *hclsyntax.Block) (*resourceConfig, error) {
	if len(blk.Labels) != 2 {
		return nil, at(blk.DefRange(), "a resource block needs two labels, its type and name")
	}
	r := &resourceConfig{typ: blk.Labels[0], name: blk.Labels[1], attrs: map[string]*hclsyntax.Attribute{}, ignore: map[string]bool{}, rng: blk.DefRange()}
	schema, ok := schemas[r.typ]
	if !ok {
		return nil, at(blk.LabelRanges[0], "unsupported resource type %q: the mock runner knows %s", r.typ, strings.Join(knownTypes(), ", "))
	}
	r.schema = schema
	for _, attr := range sortedAttributes(blk.Body) {
		if err := r.readArgument(attr); err != nil {
			return nil, err
		}
	}
	for _, nested := range blk.Body.Blocks {
		if nested.Type != "lifecycle" {
			return nil, at(nested.DefRange(), "%s: %q blocks are not supported by the mock runner", r.key(), nested.Type)
		}
		if err := r.readLifecycle(nested); err != nil {
			return nil, err
		}
	}
	return r, nil
}

func (r *resourceConfig) readArgument(attr *hclsyntax.Attribute) error {
	switch attr.Name {
	case "count":
		r.count = attr.Expr
	case "for_each":
		return at(attr.SrcRange, "%s: for_each is not supported by the mock runner (use count)", r.key())
	case "provider":
		// The sandbox provider is the only one; an alias would need provider blocks the mock ignores.
		if trav, diags := hcl.AbsTraversalForExpr(attr.Expr); diags.HasErrors() || len(trav) != 1 || trav.RootName() != "sandbox" {
			return at(attr.SrcRange, "%s: provider aliases are not supported by the mock runner", r.key())
		}
	case "depends_on":
		deps, err := traversalList(attr)
		if err != nil {
			return err
		}
		r.dependsOn = deps
	default:
		a, ok := r.schema.attrs[attr.Name]
		if !ok {
			return at(attr.SrcRange, "%s: unsupported argument %q (not in the %s schema)", r.key(), attr.Name, r.typ)
		}
		if a.computed {
			return at(attr.SrcRange, "%s: %q is set by the provider and cannot be configured", r.key(), attr.Name)
		}
		r.attrs[attr.Name] = attr
	}
	return nil
}

func (r *resourceConfig) readLifecycle(blk *hclsyntax.Block) error {
	for _, attr := range sortedAttributes(blk.Body) {
		switch attr.Name {
		case "create_before_destroy", "prevent_destroy":
			v, diags := attr.Expr.Value(nil)
			if diags.HasErrors() || v.Type() != cty.Bool || v.IsNull() {
				return at(attr.SrcRange, "%s: lifecycle.%s must be true or false", r.key(), attr.Name)
			}
			if attr.Name == "create_before_destroy" {
				r.cbd = v.True()
			} else {
				r.preventDelete = v.True()
			}
		case "ignore_changes":
			if err := r.readIgnoreChanges(attr); err != nil {
				return err
			}
		default:
			return at(attr.SrcRange, "%s: lifecycle.%s is not supported by the mock runner", r.key(), attr.Name)
		}
	}
	for _, nested := range blk.Body.Blocks {
		if nested.Type != "precondition" {
			return at(nested.DefRange(), "%s: %q blocks in lifecycle are not supported by the mock runner", r.key(), nested.Type)
		}
		pc := precondition{rng: nested.DefRange()}
		for name, attr := range nested.Body.Attributes {
			switch name {
			case "condition":
				pc.condition = attr.Expr
			case "error_message":
				pc.message = attr.Expr
			default:
				return at(attr.SrcRange, "%s: lifecycle.precondition: unsupported argument %q", r.key(), name)
			}
		}
		if pc.condition == nil || pc.message == nil {
			return at(nested.DefRange(), "%s: lifecycle.precondition needs a condition and an error_message", r.key())
		}
		r.preconditions = append(r.preconditions, pc)
	}
	return nil
}

// readIgnoreChanges accepts `all` or a list of top-level attribute names.
func (r *resourceConfig) readIgnoreChanges(attr *hclsyntax.Attribute) error {
	if kw := hcl.ExprAsKeyword(attr.Expr); kw == "all" {
		for name, a := range r.schema.attrs {
			if !a.computed {
				r.ignore[name] = true
			}
		}
		return nil
	}
	names, err := traversalList(attr)
	if err != nil {
		return err
	}
	for _, name := range names {
		if _, ok := r.schema.attrs[name]; !ok || strings.ContainsAny(name, ".[") {
			return at(attr.SrcRange, "%s: lifecycle.ignore_changes: %q is not a top-level attribute of %s", r.key(), name, r.typ)
		}
		r.ignore[name] = true
	}
	return nil
}

// traversalList reads a list of bare references, as in depends_on and ignore_changes.
func traversalList(attr *hclsyntax.Attribute) ([]string, error) {
	exprs, diags := hcl.ExprList(attr.Expr)
	if diags.HasErrors() {
		return nil, at(attr.SrcRange, "%s must be a list of references", attr.Name)
	}
	out := make([]string, 0, len(exprs))
	for _, e := range exprs {
		trav, diags := hcl.AbsTraversalForExpr(e)
		if diags.HasErrors() {
			return nil, at(e.Range(), "%s must be a list of references", attr.Name)
		}
		out = append(out, traversalString(trav))
	}
	return out, nil
}
