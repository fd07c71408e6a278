package mock

import (
	"fmt"
	"strings"

	"github.com/hashicorp/hcl/v2"
)

// This file checks every reference of a template module and orders its
// resources so that each comes after the resources it refers to.

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
