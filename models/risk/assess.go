package risk

import (
	"fmt"
	"slices"
)

// Kinds of run, as in Facts.Kind.
const (
	KindApply    = "apply"
	KindPlanOnly = "plan_only"
	KindDestroy  = "destroy"
)

// Facts are what the classifier needs to know about a run and its plan.
type Facts struct {
	Kind                             string // "apply" | "plan_only" | "destroy"
	HasChanges                       bool
	Create, Update, Replace, Destroy int
	Irreversible                     bool   // a data-bearing resource is replaced or destroyed
	OrgScopedChange                  bool   // an org-scoped resource changes
	OrgPolicyChange                  bool   // an org-level policy resource changes
	Tier                             string // development | staging | production
	RequiresApproval                 bool   // the environment is protected
}

// changes reports whether the run changes anything. Counts and flags imply changes even
// when HasChanges was left false: a classifier that errs, errs towards a higher class.
func (f Facts) changes() bool {
	return f.HasChanges || f.Create+f.Update+f.Replace+f.Destroy > 0 || f.Irreversible || f.OrgScopedChange || f.OrgPolicyChange
}

// Conditions returns the conditions f meets. A dry run, or a run without changes, meets
// no_changes and nothing else; any other run meets at least one further condition.
func (f Facts) Conditions() []Condition {
	if f.Kind == KindPlanOnly || !f.changes() {
		return []Condition{CondNoChanges}
	}
	var out []Condition
	destroys := f.Destroy > 0 || f.Kind == KindDestroy
	orgScoped := f.OrgScopedChange || f.OrgPolicyChange // an org policy is an org-scoped resource
	if f.Replace == 0 && !destroys && !orgScoped {
		out = append(out, CondCreateUpdateOnly)
	}
	if f.Replace > 0 {
		out = append(out, CondReplace)
	}
	if f.Tier == "production" {
		out = append(out, CondProduction)
	}
	if orgScoped {
		out = append(out, CondOrgScopedUpdate)
	}
	if destroys {
		out = append(out, CondDestroy)
	}
	if f.Irreversible {
		out = append(out, CondIrreversible)
	}
	if f.OrgPolicyChange {
		out = append(out, CondOrgPolicyChange)
	}
	return out
}

// Assessment is the class of a run and the decision it needs.
type Assessment struct {
	Class     Class
	Protected bool // the environment requires approval
	Level     Level
	// Rule set the class: the highest class wins; among equals the first in the matrix's order.
	Rule Rule
	// Decision is the decision row for Level.
	Decision Decision
	// Reason says it in one sentence, e.g. "risk 2: any replace (rule replace) — an admin
	// or owner, not the requester".
	Reason string
}

// Assess classifies f with m. A matrix missing a rule or a decision (one that would not
// pass Validate) falls back to the default's row for it, so it never loosens the default.
func (m Matrix) Assess(f Facts) Assessment {
	met := f.Conditions()
	var best Rule
	found := false
	for _, r := range m.rulesFor(met) {
		if !found || r.Class > best.Class {
			best, found = r, true
		}
	}
	if best.Condition == CondNoChanges {
		best.Class = 0 // dry runs and empty plans are never gated, whatever an invalid matrix says
	}
	level := LevelOf(best.Class, f.RequiresApproval)
	d := m.decision(level)
	head := fmt.Sprintf("risk %d", best.Class)
	if level == Level1Protected {
		head += " in a protected environment"
	}
	return Assessment{
		Class:     best.Class,
		Protected: f.RequiresApproval,
		Level:     level,
		Rule:      best,
		Decision:  d,
		Reason:    fmt.Sprintf("%s: %s (rule %s) — %s", head, best.Description, best.ID, d.Summary()),
	}
}

// rulesFor returns the rules of the met conditions in m's rule order, then any met
// condition m has no rule for, from the default.
func (m Matrix) rulesFor(met []Condition) []Rule {
	var out []Rule
	have := map[Condition]bool{}
	for _, r := range m.Rules {
		if slices.Contains(met, r.Condition) && !have[r.Condition] {
			out = append(out, r)
			have[r.Condition] = true
		}
	}
	for _, r := range Default().Rules {
		if slices.Contains(met, r.Condition) && !have[r.Condition] {
			out = append(out, r)
		}
	}
	return out
}

func (m Matrix) decision(l Level) Decision {
	for _, d := range m.Decisions {
		if d.Level == l {
			return d
		}
	}
	for _, d := range Default().Decisions {
		if d.Level == l {
			return d
		}
	}
	return Decision{Level: l, Approver: ApproverOwner, FourEyes: true, Elevated: true} // unreachable: Default has every level
}

// LevelOf is the decision level of class c in an environment that does (protected) or does
// not require approval.
func LevelOf(c Class, protected bool) Level {
	switch {
	case c <= 0:
		return Level0
	case c == 1 && protected:
		return Level1Protected
	case c == 1:
		return Level1
	case c == 2:
		return Level2
	}
	return Level3
}
