package policies

import (
	"sort"
	"unicode/utf8"

	"github.com/open-policy-agent/opa/v1/ast"
)

// SensitiveMask is what a sensitive value of the plan becomes in input.plan, as in
// OpenTofu's own plan rendering.
const SensitiveMask = "(sensitive value)"

// minSecretLen is the shortest sensitive string the deny messages are scanned for:
// shorter ones would mask ordinary words.
const minSecretLen = 4

var (
	maskTerm = ast.StringTerm(SensitiveMask)

	keyConfiguration = ast.StringTerm("configuration")
	keyRootModule    = ast.StringTerm("root_module")
	keyVariables     = ast.StringTerm("variables")
	keySensitive     = ast.StringTerm("sensitive")
	keyValue         = ast.StringTerm("value")
	keyDefault       = ast.StringTerm("default")
)

// masker replaces the sensitive values of a plan by SensitiveMask (a null stays
// null: it says only that the value is unset) and remembers the strings it masked,
// for redact.
//
// Where OpenTofu marks values as sensitive:
//   - resource_changes[].change and resource_drift[].change: before by
//     before_sensitive, after by after_sensitive;
//   - output_changes.<name>: the same;
//   - planned_values and prior_state.values: each resource's values (in root_module
//     and its child_modules, at any depth) by its sensitive_values, and
//     outputs.<name>.value when outputs.<name>.sensitive is true;
//   - variables.<name>.value (and the default in configuration.root_module.variables)
//     when configuration.root_module.variables.<name>.sensitive is true.
//
// A marker is true (the whole value) or mirrors the value: an object for an object,
// an array for a list or set; false or absent means not sensitive. A marker that does
// not match the value's shape masks the whole value if it marks anything.
//
// It never changes a term in place: the parser shares terms (interned strings, and
// OPA's interned booleans and numbers), and containers cache their hashes. The
// parser masks an object before it builds it, and a container with a masked value
// inside is rebuilt.
type masker struct {
	secrets map[string]struct{}
}

// parsePlan is parseJSON for a plan document, with its sensitive values masked;
// it returns the strings it masked too, sorted.
func parsePlan(data []byte) (ast.Value, []string, error) {
	m := &masker{}
	p := &jsonParser{data: data, strs: new([internSlots]*ast.Term), mask: m}
	v, err := p.document(ctxPlan)
	if err != nil {
		return nil, nil, err
	}
	if obj, ok := v.(ast.Object); ok {
		v = m.variables(ast.NewTerm(obj)).Value
	}
	if len(m.secrets) == 0 {
		return v, nil, nil
	}
	secrets := make([]string, 0, len(m.secrets))
	for s := range m.secrets {
		secrets = append(secrets, s)
	}
	sort.Strings(secrets)
	return v, secrets, nil
}

// object masks, in the pairs of an object of context ctx (ctx.masks()), the values
// its markers mark. The parser calls it only when a marker holds a true.
func (m *masker) object(ctx planCtx, pairs [][2]*ast.Term) {
	switch ctx {
	case ctxChange:
		m.maskBy(pairs, "before", "before_sensitive")
		m.maskBy(pairs, "after", "after_sensitive")
	case ctxResource:
		m.maskBy(pairs, "values", "sensitive_values")
	case ctxOutput:
		if s := lookup(pairs, "sensitive"); s >= 0 && isTrue(pairs[s][1]) {
			if v := lookup(pairs, "value"); v >= 0 {
				pairs[v][1] = m.whole(pairs[v][1])
			}
		}
	}
}

// maskBy masks the value of key in pairs by the marker of markerKey.
func (m *masker) maskBy(pairs [][2]*ast.Term, key, markerKey ast.String) {
	mk, v := lookup(pairs, markerKey), lookup(pairs, key)
	if mk >= 0 && v >= 0 && marksAny(pairs[mk][1]) {
		pairs[v][1] = m.mask(pairs[v][1], pairs[mk][1])
	}
}

// lookup is the index of the (last, as it wins) pair with the key, or -1.
func lookup(pairs [][2]*ast.Term, key ast.String) int {
	for i := len(pairs) - 1; i >= 0; i-- {
		if pairs[i][0].Value.(ast.String) == key {
			return i
		}
	}
	return -1
}

// field applies f to the value of key in the object t; if f changes it, the result is
// a new object with the new value. Anything but an object holding key is left as is.
func field(t *ast.Term, key *ast.Term, f func(*ast.Term) *ast.Term) *ast.Term {
	obj, ok := t.Value.(ast.Object)
	if !ok {
		return t
	}
	v := obj.Get(key)
	if v == nil {
		return t
	}
	nv := f(v)
	if nv == v {
		return t
	}
	return ast.NewTerm(withValues(obj, [][2]*ast.Term{{key, nv}}))
}

// variables masks the values of the root module's sensitive input variables (which
// only the configuration, later in the document, says are).
func (m *masker) variables(plan *ast.Term) *ast.Term {
	decls, _ := plan.Value.Find(ast.Ref{keyConfiguration, keyRootModule, keyVariables})
	declObj, ok := decls.(ast.Object)
	if !ok {
		return plan
	}
	var sensitive []*ast.Term
	declObj.Foreach(func(name, decl *ast.Term) {
		if d, ok := decl.Value.(ast.Object); ok && isTrue(d.Get(keySensitive)) {
			sensitive = append(sensitive, name)
		}
	})
	maskValue := func(key *ast.Term) func(*ast.Term) *ast.Term {
		return func(t *ast.Term) *ast.Term { return field(t, key, m.whole) }
	}
	for _, name := range sensitive {
		plan = field(plan, keyVariables, func(vars *ast.Term) *ast.Term {
			return field(vars, name, maskValue(keyValue))
		})
		plan = field(plan, keyConfiguration, func(c *ast.Term) *ast.Term {
			return field(c, keyRootModule, func(r *ast.Term) *ast.Term {
				return field(r, keyVariables, func(vars *ast.Term) *ast.Term {
					return field(vars, name, maskValue(keyDefault))
				})
			})
		})
	}
	return plan
}

// mask masks the parts of v that marks marks.
func (m *masker) mask(v, marks *ast.Term) *ast.Term {
	switch mk := marks.Value.(type) {
	case ast.Boolean:
		if mk {
			return m.whole(v)
		}
		return v
	case ast.Object:
		obj, ok := v.Value.(ast.Object)
		if !ok {
			return m.mismatch(v, marks)
		}
		var repl [][2]*ast.Term
		mk.Foreach(func(k, sub *ast.Term) {
			if !marksAny(sub) {
				return
			}
			if old := obj.Get(k); old != nil {
				if nv := m.mask(old, sub); nv != old {
					repl = append(repl, [2]*ast.Term{k, nv})
				}
			}
		})
		if repl == nil {
			return v
		}
		return ast.NewTerm(withValues(obj, repl))
	case *ast.Array:
		arr, ok := v.Value.(*ast.Array)
		if !ok {
			return m.mismatch(v, marks)
		}
		var out []*ast.Term
		for i := range min(mk.Len(), arr.Len()) {
			sub := mk.Elem(i)
			if !marksAny(sub) {
				continue
			}
			old := arr.Elem(i)
			nv := m.mask(old, sub)
			if nv == old {
				continue
			}
			if out == nil {
				out = make([]*ast.Term, arr.Len())
				for j := range out {
					out[j] = arr.Elem(j)
				}
			}
			out[i] = nv
		}
		if out == nil {
			return v
		}
		return ast.NewTerm(ast.NewArray(out...))
	default:
		return v
	}
}

// mismatch handles a marker whose shape is not the value's: if it marks anything,
// the whole value is masked, since which part it meant cannot be told.
func (m *masker) mismatch(v, marks *ast.Term) *ast.Term {
	if marksAny(marks) {
		return m.whole(v)
	}
	return v
}

// whole masks all of v, remembering its strings. A null stays null.
func (m *masker) whole(v *ast.Term) *ast.Term {
	if _, ok := v.Value.(ast.Null); ok {
		return v
	}
	m.collect(v.Value)
	return maskTerm
}

// collect remembers the string leaves of v long enough to be looked for in messages.
func (m *masker) collect(v ast.Value) {
	switch x := v.(type) {
	case ast.String:
		if s := string(x); s != SensitiveMask && utf8.RuneCountInString(s) >= minSecretLen {
			if m.secrets == nil {
				m.secrets = map[string]struct{}{}
			}
			m.secrets[s] = struct{}{}
		}
	case ast.Object:
		x.Foreach(func(_, e *ast.Term) { m.collect(e.Value) })
	case *ast.Array:
		for i := range x.Len() {
			m.collect(x.Elem(i).Value)
		}
	}
}

// marksAny reports whether a marker marks anything as sensitive.
func marksAny(marks *ast.Term) bool {
	switch mk := marks.Value.(type) {
	case ast.Boolean:
		return bool(mk)
	case ast.Object:
		return mk.Until(func(_, sub *ast.Term) bool { return marksAny(sub) })
	case *ast.Array:
		return mk.Until(marksAny)
	default:
		return false
	}
}

func isTrue(t *ast.Term) bool {
	if t == nil {
		return false
	}
	b, ok := t.Value.(ast.Boolean)
	return ok && bool(b)
}

// withValues is a copy of obj with the values of some of its keys replaced.
func withValues(obj ast.Object, repl [][2]*ast.Term) ast.Object {
	pairs := make([][2]*ast.Term, 0, obj.Len())
	obj.Foreach(func(k, v *ast.Term) {
		for _, r := range repl {
			if ast.KeyHashEqual(r[0].Value, k.Value) {
				v = r[1]
				break
			}
		}
		pairs = append(pairs, [2]*ast.Term{k, v})
	})
	return ast.NewObject(pairs...)
}
