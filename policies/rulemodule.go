// Reading one rule module: its package, its metadata and its deny set, checked
// for the shape every rule must have.

package policies

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"

	"github.com/open-policy-agent/opa/v1/ast"
)

// Package paths of the two kinds of rules.
const (
	builtinPackage = "gantry.rules"
	orgPackage     = "gantry.org"
)

// module is one parsed rule module with what its metadata says.
type module struct {
	path   string // "rules/<id>.rego" or "org/<name>.rego"
	source string
	parsed *ast.Module
	rule   Rule
	deny   ast.Ref // data.gantry.rules.<id>.deny
}

func sha256Hex(s string) string {
	sum := sha256.Sum256([]byte(s))
	return hex.EncodeToString(sum[:])
}

// parseRule parses one rule module and checks its shape: the package, a constant
// metadata object naming the rule, and a deny set. It returns the problems found.
func parseRule(file, src, pkg, id, origin string) (*module, []string) {
	parsed, err := ast.ParseModuleWithOpts(file, src, parserOptions())
	if err != nil {
		return nil, astErrors(err)
	}
	m := &module{path: file, source: src, parsed: parsed}
	var problems []string
	if got := strings.TrimPrefix(parsed.Package.Path.String(), "data."); got != pkg {
		problems = append(problems, fmt.Sprintf("the package is %s; it must be %s", got, pkg))
		return m, problems
	}
	m.deny = parsed.Package.Path.Append(ast.StringTerm("deny"))
	rule, metaProblems := ruleMetadata(parsed, id)
	problems = append(problems, metaProblems...)
	rule.Version = sha256Hex(src)
	rule.Origin = origin
	m.rule = rule
	if p := checkDeny(parsed); p != "" {
		problems = append(problems, p)
	}
	return m, problems
}

// ruleMetadata reads `metadata := {...}`: a constant object with the rule's id,
// title, description and default enforcement.
func ruleMetadata(mod *ast.Module, id string) (Rule, []string) {
	const shape = `define metadata := {"id": ..., "title": ..., "description": ..., "enforcement": ...} (a constant object)`
	var defs []*ast.Rule
	for _, r := range mod.Rules {
		if isRuleNamed(r, "metadata") {
			defs = append(defs, r)
		}
	}
	if len(defs) == 0 {
		return Rule{}, []string{"the rule has no metadata: " + shape}
	}
	if len(defs) > 1 {
		return Rule{}, []string{"the rule defines metadata more than once: " + shape}
	}
	r := defs[0]
	if r.Head.Value == nil || len(r.Head.Args) > 0 || !isTrueBody(r.Body) || !r.Head.Value.IsGround() {
		return Rule{}, []string{fmt.Sprintf("line %d: metadata is not a constant object: %s", r.Location.Row, shape)}
	}
	v, err := ast.JSON(r.Head.Value.Value)
	if err != nil {
		return Rule{}, []string{fmt.Sprintf("line %d: metadata is not a constant object (%v): %s", r.Location.Row, err, shape)}
	}
	obj, ok := v.(map[string]any)
	if !ok {
		return Rule{}, []string{fmt.Sprintf("line %d: metadata is not an object: %s", r.Location.Row, shape)}
	}
	str := func(k string) (string, bool) { s, ok := obj[k].(string); return s, ok }
	var problems []string
	rule := Rule{ID: id}
	if got, _ := str("id"); got != id {
		problems = append(problems, fmt.Sprintf("line %d: metadata.id is %q; it must be %q", r.Location.Row, got, id))
	}
	if t, ok := str("title"); !ok || strings.TrimSpace(t) == "" {
		problems = append(problems, fmt.Sprintf("line %d: metadata.title is missing", r.Location.Row))
	} else {
		rule.Title = t
	}
	if d, ok := obj["description"]; ok {
		if s, ok := d.(string); ok {
			rule.Description = s
		} else {
			problems = append(problems, fmt.Sprintf("line %d: metadata.description must be a string", r.Location.Row))
		}
	}
	e, _ := str("enforcement")
	if !Enforcement(e).Valid() {
		problems = append(problems, fmt.Sprintf("line %d: metadata.enforcement is %q; it must be advisory, soft_mandatory or hard_mandatory", r.Location.Row, e))
	}
	rule.Enforcement = Enforcement(e)
	return rule, problems
}

// checkDeny requires deny to be a set of messages: `deny contains msg if { ... }`.
func checkDeny(mod *ast.Module) string {
	found := false
	for _, r := range mod.Rules {
		if !isRuleNamed(r, "deny") {
			continue
		}
		found = true
		if r.Head.RuleKind() != ast.MultiValue || len(r.Head.Args) > 0 {
			return fmt.Sprintf("line %d: deny must be a set of messages: deny contains msg if { ... }", r.Location.Row)
		}
	}
	if !found {
		return "the rule has no deny set: define deny contains msg if { ... }"
	}
	return ""
}

func isRuleNamed(r *ast.Rule, name string) bool {
	ref := r.Head.Ref()
	return len(ref) >= 1 && ref[0].Value.Compare(ast.Var(name)) == 0
}

func isTrueBody(body ast.Body) bool {
	return len(body) == 1 && body[0].IsGround() && body[0].Equal(ast.NewExpr(ast.BooleanTerm(true)))
}

// astErrors formats parse and compile errors one per line, with their position.
func astErrors(err error) []string {
	var errs ast.Errors
	if !errors.As(err, &errs) {
		return []string{err.Error()}
	}
	out := make([]string, 0, len(errs))
	for _, e := range errs {
		msg := e.Message
		if e.Location != nil {
			msg = fmt.Sprintf("line %d: %s", e.Location.Row, msg)
		}
		out = append(out, msg)
	}
	return out
}
