package mock

import (
	"math/big"
	"sort"

	"github.com/hashicorp/hcl/v2"
	"github.com/zclconf/go-cty/cty"
	"github.com/zclconf/go-cty/cty/convert"
)

// visitFunc decides the value a resource instance has, given the value its
// configuration evaluates to (computed attributes null), unmarked, and the paths of
// its sensitive parts. Plan returns the planned value (unknowns where tofu would say
// "known after apply"); apply returns the final one. Later references see what it
// returns, its sensitive parts marked again.
type visitFunc func(r *resourceConfig, addr instanceAddr, configured cty.Value, sensitive []cty.Path) (cty.Value, error)

// walkModule evaluates m's resources in dependency order and returns each
// resource's value as references see it: an object, or a tuple with count.
func (m *moduleConfig) walk(visit visitFunc) (map[string]cty.Value, error) {
	values := map[string]cty.Value{}
	for _, r := range m.order {
		n, err := m.countOf(r, values)
		if err != nil {
			return nil, err
		}
		if n < 0 {
			v, err := m.visitInstance(r, -1, values, visit)
			if err != nil {
				return nil, err
			}
			values[r.key()] = v
			continue
		}
		insts := make([]cty.Value, 0, n)
		for i := range n {
			v, err := m.visitInstance(r, i, values, visit)
			if err != nil {
				return nil, err
			}
			insts = append(insts, v)
		}
		values[r.key()] = cty.TupleVal(insts)
	}
	return values, nil
}

func (m *moduleConfig) visitInstance(r *resourceConfig, index int, values map[string]cty.Value, visit visitFunc) (cty.Value, error) {
	ctx := m.evalContext(values, index)
	if err := r.checkPreconditions(ctx); err != nil {
		return cty.NilVal, err
	}
	configured, err := m.configuredValue(r, ctx)
	if err != nil {
		return cty.NilVal, err
	}
	configured, sensitive := unmarkSensitive(configured)
	v, err := visit(r, instanceAddr{module: m.name, typ: r.typ, name: r.name, index: index}, configured, sensitive)
	if err != nil {
		return cty.NilVal, err
	}
	return markSensitive(v, sensitive), nil
}

// checkPreconditions checks the instance's lifecycle preconditions as tofu does: one
// not known yet waits for the apply; a false one fails with its error message, unless
// that message holds a sensitive value (then it is not shown).
func (r *resourceConfig) checkPreconditions(ctx *hcl.EvalContext) error {
	for _, pc := range r.preconditions {
		v, diags := pc.condition.Value(ctx)
		if diags.HasErrors() {
			return diagError(diags)
		}
		if !v.IsWhollyKnown() {
			continue
		}
		v, _ = v.UnmarkDeep() // a condition on a sensitive value is still checked
		v, err := convert.Convert(v, cty.Bool)
		if err != nil || v.IsNull() {
			return at(pc.condition.Range(), "%s: the precondition's condition must be true or false", r.key())
		}
		if v.True() {
			continue
		}
		msg := "the error message included a sensitive value, so it will not be displayed"
		if m, diags := pc.message.Value(ctx); !diags.HasErrors() && m.IsWhollyKnown() && !m.ContainsMarked() && m.Type() == cty.String && !m.IsNull() {
			msg = m.AsString()
		}
		return at(pc.rng, "Resource precondition failed: %s: %s", r.key(), msg)
	}
	return nil
}

// countOf evaluates count: -1 without count. Like tofu, it must be known while planning.
func (m *moduleConfig) countOf(r *resourceConfig, values map[string]cty.Value) (int, error) {
	if r.count == nil {
		return -1, nil
	}
	v, diags := r.count.Value(m.evalContext(values, -1))
	if diags.HasErrors() {
		return 0, diagError(diags)
	}
	if !v.IsWhollyKnown() {
		return 0, at(r.count.Range(), "%s: count depends on values that are only known after apply; it must be known while planning", r.key())
	}
	if v.ContainsMarked() {
		return 0, at(r.count.Range(), "%s: count is derived from sensitive values, which cannot decide how many instances there are", r.key())
	}
	v, err := convert.Convert(v, cty.Number)
	if err != nil || v.IsNull() {
		return 0, at(r.count.Range(), "%s: count must be a whole number", r.key())
	}
	n, acc := v.AsBigFloat().Int64()
	if acc != big.Exact || n < 0 || n > 1000 {
		return 0, at(r.count.Range(), "%s: count must be a whole number from 0 to 1000, not %s", r.key(), v.AsBigFloat().Text('f', -1))
	}
	return int(n), nil
}

// configuredValue evaluates a resource's arguments into an object of its
// schema type; unset and computed attributes are null.
func (m *moduleConfig) configuredValue(r *resourceConfig, ctx *hcl.EvalContext) (cty.Value, error) {
	attrs := map[string]cty.Value{}
	for name, a := range r.schema.attrs {
		cfg, ok := r.attrs[name]
		if !ok {
			attrs[name] = cty.NullVal(a.typ)
			continue
		}
		v, diags := cfg.Expr.Value(ctx)
		if diags.HasErrors() {
			return cty.NilVal, diagError(diags)
		}
		cv, err := convert.Convert(v, a.typ)
		if err != nil {
			return cty.NilVal, at(cfg.SrcRange, "%s: argument %q: %s is required", r.key(), name, a.typ.FriendlyName())
		}
		attrs[name] = cv
	}
	return cty.ObjectVal(attrs), nil
}

// evalContext is the scope of module m's expressions: var.*, local.*, path.*,
// count.index (index >= 0) and the resources evaluated so far.
func (m *moduleConfig) evalContext(resources map[string]cty.Value, index int) *hcl.EvalContext {
	vars := map[string]cty.Value{
		"var":   cty.ObjectVal(m.vars),
		"local": cty.ObjectVal(m.locals),
		"path": cty.ObjectVal(map[string]cty.Value{
			"module": cty.StringVal(m.dir), "root": cty.StringVal("."), "cwd": cty.StringVal("."),
		}),
	}
	if index >= 0 {
		vars["count"] = cty.ObjectVal(map[string]cty.Value{"index": cty.NumberIntVal(int64(index))})
	}
	byType := map[string]map[string]cty.Value{}
	for key, v := range resources {
		r := m.resources[key]
		if byType[r.typ] == nil {
			byType[r.typ] = map[string]cty.Value{}
		}
		byType[r.typ][r.name] = v
	}
	for typ, named := range byType {
		vars[typ] = cty.ObjectVal(named)
	}
	return &hcl.EvalContext{Variables: vars, Functions: functions}
}

// outputValues evaluates the module's outputs against its resources' values.
func (m *moduleConfig) outputValues(resources map[string]cty.Value) (map[string]cty.Value, error) {
	ctx := m.evalContext(resources, -1)
	out := map[string]cty.Value{}
	for _, o := range m.outputs {
		v, diags := o.expr.Value(ctx)
		if diags.HasErrors() {
			return nil, diagError(diags)
		}
		if o.sensitive {
			// A module output declared sensitive is sensitive where the caller uses it.
			v = v.Mark(sensitiveMark)
		}
		out[o.name] = v
	}
	return out, nil
}

// rootOutputs evaluates the root module's outputs against the modules' outputs.
func (c *config) rootOutputs(modules map[string]map[string]cty.Value) (map[string]outputValue, error) {
	objs := map[string]cty.Value{}
	for name, outs := range modules {
		objs[name] = cty.ObjectVal(outs)
	}
	ctx := &hcl.EvalContext{Variables: map[string]cty.Value{"module": cty.ObjectVal(objs)}, Functions: functions}
	out := map[string]outputValue{}
	for _, o := range c.outputs {
		v, diags := o.expr.Value(ctx)
		if diags.HasErrors() {
			return nil, diagError(diags)
		}
		if v.ContainsMarked() && !o.sensitive {
			return nil, at(o.expr.Range(), "output %q: Output refers to sensitive values: a root module output that holds sensitive data must be declared sensitive = true", o.name)
		}
		v, _ = v.UnmarkDeep()
		out[o.name] = outputValue{value: v, sensitive: o.sensitive}
	}
	return out, nil
}

// dependencies lists every resource r depends on, directly or not, by absolute
// address, sorted: what tofu records as an instance's "dependencies".
func (m *moduleConfig) dependencies(r *resourceConfig) []string {
	seen := map[string]bool{}
	stack := append([]string(nil), r.deps...)
	for len(stack) > 0 {
		key := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		if seen[key] {
			continue
		}
		seen[key] = true
		stack = append(stack, m.resources[key].deps...)
	}
	out := make([]string, 0, len(seen))
	for key := range seen {
		out = append(out, m.address()+"."+key)
	}
	sort.Strings(out)
	return out
}
