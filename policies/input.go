package policies

import (
	"fmt"

	"github.com/open-policy-agent/opa/v1/ast"
)

// planValue turns the plan document into the value of input.plan, its sensitive
// values masked (see masker), and returns the sensitive strings it masked.
func planValue(planJSON []byte) (ast.Object, []string, error) {
	v, secrets, err := parsePlan(planJSON)
	if err != nil {
		return nil, nil, fmt.Errorf("%w: %v", ErrPlan, err)
	}
	obj, ok := v.(ast.Object)
	if !ok {
		return nil, nil, ErrPlan
	}
	return obj, secrets, nil
}

// countKeys are the keys of input.run.classification.counts, always present.
var countKeys = []string{"create", "update", "replace", "destroy", "read", "no_op"}

// runValue builds input.run straight from the struct (what its JSON encoding would
// give, except that absent lists are empty arrays rather than null and every count
// key is present).
func runValue(r *RunContext) ast.Value {
	counts := make([][2]*ast.Term, 0, len(countKeys)+len(r.Classification.Counts))
	for _, k := range countKeys {
		counts = append(counts, item(k, ast.InternedTerm(r.Classification.Counts[k])))
	}
	for k, n := range r.Classification.Counts {
		if !isCountKey(k) {
			counts = append(counts, item(k, ast.InternedTerm(n)))
		}
	}
	changes := make([]*ast.Term, len(r.Classification.Changes))
	for i := range r.Classification.Changes {
		c := &r.Classification.Changes[i]
		changes[i] = ast.ObjectTerm(
			item("address", ast.StringTerm(c.Address)),
			item("type", ast.StringTerm(c.Type)),
			item("class", ast.StringTerm(c.Class)),
			item("irreversible", ast.InternedTerm(c.Irreversible)),
			item("org_scoped", ast.InternedTerm(c.OrgScoped)),
			item("action_reason", ast.StringTerm(c.ActionReason)),
			item("dependents", stringArray(c.Dependents)),
		)
	}
	return ast.NewObject(
		item("id", ast.StringTerm(r.ID)),
		item("kind", ast.StringTerm(r.Kind)),
		item("actor", ast.ObjectTerm(
			item("id", ast.StringTerm(r.Actor.ID)),
			item("name", ast.StringTerm(r.Actor.Name)),
			item("role", ast.StringTerm(r.Actor.Role)),
		)),
		item("organization", ast.StringTerm(r.Organization)),
		item("environment", ast.ObjectTerm(
			item("id", ast.StringTerm(r.Environment.ID)),
			item("name", ast.StringTerm(r.Environment.Name)),
			item("tier", ast.StringTerm(r.Environment.Tier)),
			item("requires_approval", ast.InternedTerm(r.Environment.RequiresApproval)),
			item("restricted", ast.InternedTerm(r.Environment.Restricted)),
		)),
		item("template", ast.ObjectTerm(
			item("name", ast.StringTerm(r.Template.Name)),
			item("version", ast.StringTerm(r.Template.Version)),
			item("source", ast.StringTerm(r.Template.Source)),
			item("module_digest", ast.StringTerm(r.Template.ModuleDigest)),
			item("irreversible_types", stringArray(r.Template.Irreversible)),
			item("org_scoped_types", stringArray(r.Template.OrgScoped)),
		)),
		item("risk", ast.ObjectTerm(
			item("class", ast.InternedTerm(r.Risk.Class)),
			item("rule", ast.StringTerm(r.Risk.Rule)),
			item("approver", ast.StringTerm(r.Risk.Approver)),
		)),
		item("classification", ast.ObjectTerm(
			item("counts", ast.ObjectTerm(counts...)),
			item("changes", ast.ArrayTerm(changes...)),
		)),
	)
}

func isCountKey(k string) bool {
	for _, c := range countKeys {
		if c == k {
			return true
		}
	}
	return false
}

func item(key string, value *ast.Term) [2]*ast.Term {
	return [2]*ast.Term{ast.InternedTerm(key), value}
}

func stringArray(xs []string) *ast.Term {
	terms := make([]*ast.Term, len(xs))
	for i, x := range xs {
		terms[i] = ast.StringTerm(x)
	}
	return ast.ArrayTerm(terms...)
}
