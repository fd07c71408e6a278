package mock

import (
	"fmt"
	"sort"
	"strings"

	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/ext/typeexpr"
	"github.com/hashicorp/hcl/v2/hclsyntax"
	"github.com/zclconf/go-cty/cty"
	"github.com/zclconf/go-cty/cty/convert"
)

// This file reads a template module: its variables, locals, resources and
// outputs, and orders its resources by their references.

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

// resolveReferences checks every reference in the module and orders the
// resources so that each comes after the resources it refers to.
func (m *moduleConfig) resolveReferences() error {
	for _, key := range sortedKeys(m.resources) {
		r := m.resources[key]
		deps := map[string]bool{}
		for _, expr := range r.exprs() {
			if err := m.collectDeps(expr, r.count != nil, deps); err != nil {
				return err
			}
		}
		for _, d := range r.dependsOn {
			if _, ok := m.resources[d]; !ok {
				return at(r.rng, "%s: depends_on refers to %q, which is not a resource declared in module %q", r.key(), d, m.name)
			}
			deps[d] = true
		}
		r.deps = sortedKeys(deps)
	}
	for _, o := range m.outputs {
		if err := m.collectDeps(o.expr, false, map[string]bool{}); err != nil {
			return err
		}
	}
	order, err := topoSort(m.resources)
	if err != nil {
		return fmt.Errorf("module %q: %w", m.name, err)
	}
	m.order = order
	return nil
}

// exprs lists the expressions of a resource that may hold references.
func (r *resourceConfig) exprs() []hcl.Expression {
	var out []hcl.Expression
	if r.count != nil {
		out = append(out, r.count)
	}
	for _, name := range sortedKeys(r.attrs) {
		out = append(out, r.attrs[name].Expr)
	}
	for _, pc := range r.preconditions {
		out = append(out, pc.condition, pc.message)
	}
	return out
}

// collectDeps checks each reference of expr and records the resources it names.
func (m *moduleConfig) collectDeps(expr hcl.Expression, counted bool, deps map[string]bool) error {
	for _, trav := range expr.Variables() {
		root := trav.RootName()
		name := attrStep(trav, 1)
		switch {
		case root == "var":
			if _, ok := m.variables[name]; !ok {
				return at(trav.SourceRange(), "reference to undeclared input variable %q", name)
			}
		case root == "local":
			if _, ok := m.locals[name]; !ok {
				return at(trav.SourceRange(), "reference to undeclared local value %q", name)
			}
		case root == "count":
			if !counted || name != "index" {
				return at(trav.SourceRange(), "count.%s can only be used in a resource that sets count", name)
			}
		case root == "path":
		case schemas[root].attrs != nil:
			key := root + "." + name
			if _, ok := m.resources[key]; !ok {
				return at(trav.SourceRange(), "reference to undeclared resource: a resource %q %q is not declared in module %q", root, name, m.name)
			}
			deps[key] = true
		default:
			return at(trav.SourceRange(), "reference to %q is not supported by the mock runner", traversalString(trav))
		}
	}
	return nil
}

// topoSort orders resources so that dependencies come first; ties go by name so
// the order is always the same.
func topoSort(resources map[string]*resourceConfig) ([]*resourceConfig, error) {
	done := map[string]bool{}
	var order []*resourceConfig
	for len(order) < len(resources) {
		progressed := false
		for _, key := range sortedKeys(resources) {
			r := resources[key]
			if done[key] || !allDone(r.deps, done) {
				continue
			}
			done[key] = true
			order = append(order, r)
			progressed = true
		}
		if !progressed {
			var stuck []string
			for _, key := range sortedKeys(resources) {
				if !done[key] {
					stuck = append(stuck, key)
				}
			}
			return nil, fmt.Errorf("dependency cycle between %s", strings.Join(stuck, ", "))
		}
	}
	return order, nil
}

func allDone(keys []string, done map[string]bool) bool {
	for _, k := range keys {
		if !done[k] {
			return false
		}
	}
	return true
}
