// Package risk classifies a plan into a risk class (blast radius, not diff size) and says
// which decision that class needs: the approval matrix of DESIGN §3, held as data that an
// organization's owners edit. Every edit is a new, audited version (see Store).
//
// The matrix has two tables. Rules map a condition a plan may meet to a risk class; the
// highest class among the conditions a plan meets wins. Decisions map a level (the class,
// with risk 1 split by whether the environment requires approval) to who decides.
package risk

import (
	"fmt"
	"slices"
	"strconv"
	"strings"

	"gantry/models/errs"
)

// Class is a risk class, 0 (nothing happens) to 3 (data or org-wide control may be lost).
type Class int

// MaxClass is the highest risk class.
const MaxClass Class = 3

// Condition is something a plan may do that puts it into a risk class.
type Condition string

const (
	CondNoChanges        Condition = "no_changes"         // dry run, or a plan without changes
	CondCreateUpdateOnly Condition = "create_update_only" // only creates / in-place updates, nothing org-scoped
	CondReplace          Condition = "replace"            // any replace
	CondProduction       Condition = "production_change"  // any change in a production-tier environment
	CondOrgScopedUpdate  Condition = "org_scoped_change"  // any create/update/replace/destroy of an org-scoped resource
	CondDestroy          Condition = "destroy"            // any delete action, or a destroy run
	CondIrreversible     Condition = "irreversible_loss"  // replace or destroy of a data-bearing resource
	CondOrgPolicyChange  Condition = "org_policy_change"  // change to an org-level policy resource
)

// Conditions lists every condition in the default matrix's order.
var Conditions = []Condition{
	CondNoChanges, CondCreateUpdateOnly, CondReplace, CondProduction,
	CondOrgScopedUpdate, CondDestroy, CondIrreversible, CondOrgPolicyChange,
}

// Rule puts the plans that meet Condition into Class.
type Rule struct {
	ID          string    `json:"id"`
	Condition   Condition `json:"condition"`
	Class       Class     `json:"class"`
	Description string    `json:"description"`
}

// Level is the row of the decision table a plan needs: its class, with risk 1 split by
// whether the environment requires approval.
type Level string

const (
	Level0          Level = "0"
	Level1          Level = "1"
	Level1Protected Level = "1-protected"
	Level2          Level = "2"
	Level3          Level = "3"
)

// Levels lists every level, lowest first.
var Levels = []Level{Level0, Level1, Level1Protected, Level2, Level3}

// Approver names who decides.
type Approver string

const (
	// ApproverNone: no decision is taken (nothing will change).
	ApproverNone Approver = "none"
	// ApproverSystem: a self-service approval by Gantry, bound to the same evidence as a
	// person's and naming the rule.
	ApproverSystem Approver = "system"
	// ApproverOperator, ApproverAdmin, ApproverOwner: a person holding at least that role
	// (and provisioning.apply).
	ApproverOperator Approver = "operator"
	ApproverAdmin    Approver = "admin"
	ApproverOwner    Approver = "owner"
	// ApproverEnvOwners: a named owner of the run's environment (a user, or a member of
	// a group from the ID token's groups claim) holding provisioning.apply.
	ApproverEnvOwners Approver = "environment_owners"
)

// Approvers lists every approver, in the order shown to people.
var Approvers = []Approver{ApproverNone, ApproverSystem, ApproverOperator, ApproverAdmin, ApproverOwner, ApproverEnvOwners}

// Escalations lists what a decision may escalate to ("" is no escalation).
var Escalations = []Approver{"", ApproverOperator, ApproverAdmin, ApproverOwner, ApproverEnvOwners}

// MaxEscalateAfterHours bounds a row's escalation wait (30 days, the longest decision window).
const MaxEscalateAfterHours = 720

// Role reports whether a is a role on the ladder (operator, admin or owner).
func (a Approver) Role() bool { return a.rank() > 0 }

// rank orders the role approvers; none, system and named owners are not on the ladder (0).
func (a Approver) rank() int {
	switch a {
	case ApproverOperator:
		return 1
	case ApproverAdmin:
		return 2
	case ApproverOwner:
		return 3
	}
	return 0
}

// Person reports whether a is a person: a role (operator, admin or owner) or a named
// environment owner.
func (a Approver) Person() bool { return a.rank() > 0 || a == ApproverEnvOwners }

// AtLeast reports whether a asks at least as much as min: both roles and a's rank at or
// above min's; a named owner asks only what min asks when min is a named owner too.
func (a Approver) AtLeast(min Approver) bool {
	if min.Role() {
		return a.Role() && a.rank() >= min.rank()
	}
	return a == min
}

// Decision is one row of the decision table: who decides the runs of one level.
type Decision struct {
	Level    Level    `json:"level"`
	Approver Approver `json:"approver"`
	// FourEyes: the requester may not approve.
	FourEyes bool `json:"four_eyes"`
	// Elevated: fresh authentication, typing DESTROY and a reason of 10+ characters.
	Elevated bool `json:"elevated"`
	// Escalation is who may also decide once a run has waited EscalateAfterHours for
	// its approver ("" = none).
	Escalation         Approver `json:"escalation"`
	EscalateAfterHours int      `json:"escalate_after_hours,omitempty"`
}

// Summary says in words who decides, e.g. "an admin or owner, not the requester".
func (d Decision) Summary() string {
	var s string
	switch d.Approver {
	case ApproverNone:
		return "no decision needed"
	case ApproverSystem:
		return "self-service: a system approval bound to the same evidence, naming the rule"
	case ApproverOperator:
		s = "one approver with provisioning.apply (operator or above)"
	case ApproverAdmin:
		s = "an admin or owner"
	case ApproverOwner:
		s = "an owner"
	case ApproverEnvOwners:
		s = "a named owner of the environment"
	default:
		return "unknown approver " + strconv.Quote(string(d.Approver))
	}
	if d.FourEyes {
		s += ", not the requester"
	}
	if d.Elevated {
		s += ", freshly authenticated, typing DESTROY with a reason of 10+ characters"
	}
	if d.Escalation != "" {
		s += fmt.Sprintf("; after %d h also %s", d.EscalateAfterHours, Decision{Approver: d.Escalation}.Summary())
	}
	return s
}

// Matrix is an organization's risk rules and decision table.
type Matrix struct {
	Rules     []Rule     `json:"rules"`
	Decisions []Decision `json:"decisions"`
}

// Default is DESIGN §3's table. Each call returns a fresh copy the caller may edit.
func Default() Matrix {
	return Matrix{
		Rules: []Rule{
			{ID: string(CondNoChanges), Condition: CondNoChanges, Class: 0, Description: "dry run, or a plan without changes"},
			{ID: string(CondCreateUpdateOnly), Condition: CondCreateUpdateOnly, Class: 1, Description: "create or update in place only, nothing org-scoped"},
			{ID: string(CondReplace), Condition: CondReplace, Class: 2, Description: "any replace"},
			{ID: string(CondProduction), Condition: CondProduction, Class: 2, Description: "any change in a production environment"},
			{ID: string(CondOrgScopedUpdate), Condition: CondOrgScopedUpdate, Class: 2, Description: "any change to an org-scoped resource (policy, IAM)"},
			{ID: string(CondDestroy), Condition: CondDestroy, Class: 3, Description: "any destroy (delete action or destroy run)"},
			{ID: string(CondIrreversible), Condition: CondIrreversible, Class: 3, Description: "replace or destroy of an irreversible (data-bearing) resource"},
			{ID: string(CondOrgPolicyChange), Condition: CondOrgPolicyChange, Class: 3, Description: "org-level policy change"},
		},
		Decisions: []Decision{
			{Level: Level0, Approver: ApproverNone},
			{Level: Level1, Approver: ApproverSystem},
			{Level: Level1Protected, Approver: ApproverOperator, FourEyes: true},
			{Level: Level2, Approver: ApproverAdmin, FourEyes: true},
			{Level: Level3, Approver: ApproverOwner, FourEyes: true, Elevated: true},
		},
	}
}

// Field names of validation messages. They are the names of the matrix form's inputs, so
// a 422 puts each message beside its control; problems with the shape of a table (a row
// missing or repeated) are reported on "rules" or "decisions".
func ClassField(c Condition) string  { return "class." + string(c) }
func ApproverField(l Level) string   { return "approver." + string(l) }
func FourEyesField(l Level) string   { return "four_eyes." + string(l) }
func ElevatedField(l Level) string   { return "elevated." + string(l) }
func EscalationField(l Level) string { return "escalation." + string(l) }
func EscalateAfterField(l Level) string {
	return "escalate_after_hours." + string(l)
}

func (c Condition) valid() bool { return slices.Contains(Conditions, c) }
func (l Level) valid() bool     { return slices.Contains(Levels, l) }
func (a Approver) valid() bool  { return slices.Contains(Approvers, a) }
func (c Class) valid() bool     { return c >= 0 && c <= MaxClass }

// joined lists xs for a message: "a, b, c".
func joined[T ~string](xs []T) string {
	parts := make([]string, len(xs))
	for i, x := range xs {
		parts[i] = string(x)
	}
	return strings.Join(parts, ", ")
}

const maxDescription = 200

// Validate checks the matrix on its own: every condition exactly once with a class from 0
// to 3 (only no_changes at 0, and it always at 0: dry runs are never gated), every level
// exactly once, and a decision per level that makes sense (see the messages). The error is
// an *errs.Validation naming the offending form fields.
func (m Matrix) Validate() error {
	v := &errs.Validation{}
	seenCond := map[Condition]bool{}
	seenID := map[string]bool{}
	for _, r := range m.Rules {
		switch {
		case !r.Condition.valid():
			v.Add("rules", fmt.Sprintf("Unknown condition %q: use %s.", r.Condition, joined(Conditions)))
			continue
		case seenCond[r.Condition]:
			v.Add("rules", fmt.Sprintf("Condition %s appears more than once.", r.Condition))
			continue
		}
		seenCond[r.Condition] = true
		switch {
		case strings.TrimSpace(r.ID) == "":
			v.Add("rules", fmt.Sprintf("The rule for %s needs an id.", r.Condition))
		case seenID[r.ID]:
			v.Add("rules", fmt.Sprintf("Rule id %q is used more than once.", r.ID))
		case len(r.ID) > 63 || len(r.Description) > maxDescription:
			v.Add("rules", fmt.Sprintf("The rule for %s has an id over 63 or a description over %d characters.", r.Condition, maxDescription))
		}
		seenID[r.ID] = true
		field := ClassField(r.Condition)
		switch {
		case !r.Class.valid():
			v.Add(field, "Choose a risk class from 0 to 3.")
		case r.Condition == CondNoChanges && r.Class != 0:
			v.Add(field, "Dry runs and plans without changes are always risk 0: they are never gated.")
		case r.Condition != CondNoChanges && r.Class == 0:
			v.Add(field, "A change needs risk 1 or higher: only dry runs and plans without changes are risk 0.")
		}
	}
	for _, c := range Conditions {
		if !seenCond[c] {
			v.Add("rules", fmt.Sprintf("Condition %s is missing: every condition needs a rule.", c))
		}
	}

	seenLevel := map[Level]bool{}
	for _, d := range m.Decisions {
		switch {
		case !d.Level.valid():
			v.Add("decisions", fmt.Sprintf("Unknown level %q: use %s.", d.Level, joined(Levels)))
			continue
		case seenLevel[d.Level]:
			v.Add("decisions", fmt.Sprintf("Level %s appears more than once.", d.Level))
			continue
		}
		seenLevel[d.Level] = true
		validateDecision(v, d)
	}
	for _, l := range Levels {
		if !seenLevel[l] {
			v.Add("decisions", fmt.Sprintf("Level %s is missing: every level needs a decision.", l))
		}
	}
	return v.Err()
}

func validateDecision(v *errs.Validation, d Decision) {
	field := ApproverField(d.Level)
	if !d.Approver.valid() {
		// The checks below depend on who approves: only say what is wrong for sure.
		v.Add(field, "Choose none, system, operator, admin, owner or the environment's owners.")
		if d.Escalation != "" && !d.Escalation.Person() {
			v.Add(EscalationField(d.Level), "Choose no escalation, operator, admin, owner or the environment's owners.")
		}
		return
	}
	switch {
	case d.Level == Level0 && d.Approver.Person():
		v.Add(field, "Dry runs and plans without changes are never gated: choose none or system.")
	case d.Approver == ApproverNone && d.Level != Level0:
		v.Add(field, "Only risk 0 goes without a decision: a change needs system or a person.")
	case d.Approver == ApproverSystem && d.Level != Level0 && d.Level != Level1:
		v.Add(field, "Self-service (system) approval is only for risk 0 and for risk 1 outside protected environments.")
	}
	if d.FourEyes && !d.Approver.Person() {
		v.Add(FourEyesField(d.Level), "Four-eyes needs a person approver (operator, admin or owner).")
	}
	if d.Elevated && !d.Approver.Person() {
		v.Add(ElevatedField(d.Level), "Elevated approval needs a person approver (operator, admin or owner).")
	}
	field = EscalationField(d.Level)
	switch {
	case d.Escalation == "":
		if d.EscalateAfterHours != 0 {
			v.Add(EscalateAfterField(d.Level), "Leave the waiting time empty when nobody is escalated to.")
		}
	case !d.Escalation.Person():
		v.Add(field, "Choose no escalation, operator, admin, owner or the environment's owners.")
	case !d.Approver.Person():
		v.Add(field, "Only a person approver escalates: system and none decide by themselves.")
	case d.Approver.Role() && d.Escalation.Role() && d.Escalation.rank() < d.Approver.rank():
		v.Add(field, fmt.Sprintf("An escalation may not lower the bar: %s decide here.", Decision{Approver: d.Approver}.Summary()))
	case d.Escalation == d.Approver || d.Approver.Role() && d.Escalation.Role():
		// Roles are "at least": everyone an escalation to a role at or above the
		// approver's could add may already decide.
		v.Add(field, "This escalation adds nobody who may not decide already: escalate between a role and the environment's named owners.")
	case d.EscalateAfterHours < 1 || d.EscalateAfterHours > MaxEscalateAfterHours:
		v.Add(EscalateAfterField(d.Level), fmt.Sprintf("Say after how many hours of waiting the escalation applies: 1 to %d.", MaxEscalateAfterHours))
	}
}

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

// Change is one difference between two matrices, for the audit log and the history.
type Change struct {
	Row    string `json:"row"`   // "rule <condition>" or "decision <level>"
	Field  string `json:"field"` // class, id, description; approver, four_eyes, elevated, escalation
	Before string `json:"before"`
	After  string `json:"after"`
}

// String reads "rule replace class: 2 → 3".
func (c Change) String() string {
	return fmt.Sprintf("%s %s: %s → %s", c.Row, c.Field, c.Before, c.After)
}

// Diff lists what changed from before to after: rules by condition (in after's order),
// then decisions by level, then the rule order if only that changed.
func Diff(before, after Matrix) []Change {
	var out []Change
	add := func(row, field, b, a string) {
		if b != a {
			out = append(out, Change{Row: row, Field: field, Before: b, After: a})
		}
	}
	oldRules := map[Condition]Rule{}
	for _, r := range before.Rules {
		oldRules[r.Condition] = r
	}
	for _, r := range after.Rules {
		o, ok := oldRules[r.Condition]
		row := "rule " + string(r.Condition)
		if !ok {
			add(row, "class", "none", strconv.Itoa(int(r.Class)))
			continue
		}
		add(row, "id", o.ID, r.ID)
		add(row, "class", strconv.Itoa(int(o.Class)), strconv.Itoa(int(r.Class)))
		add(row, "description", o.Description, r.Description)
	}
	oldDecisions := map[Level]Decision{}
	for _, d := range before.Decisions {
		oldDecisions[d.Level] = d
	}
	for _, l := range Levels {
		d, ok := findDecision(after.Decisions, l)
		o, had := oldDecisions[l]
		if !ok || !had {
			continue
		}
		row := "decision " + string(l)
		add(row, "approver", string(o.Approver), string(d.Approver))
		add(row, "four_eyes", strconv.FormatBool(o.FourEyes), strconv.FormatBool(d.FourEyes))
		add(row, "elevated", strconv.FormatBool(o.Elevated), strconv.FormatBool(d.Elevated))
		add(row, "escalation", escalationText(o.Escalation), escalationText(d.Escalation))
		add(row, "escalate_after_hours", strconv.Itoa(o.EscalateAfterHours), strconv.Itoa(d.EscalateAfterHours))
	}
	add("rules", "order", ruleOrder(before), ruleOrder(after))
	return out
}

func findDecision(ds []Decision, l Level) (Decision, bool) {
	for _, d := range ds {
		if d.Level == l {
			return d, true
		}
	}
	return Decision{}, false
}

func escalationText(a Approver) string {
	if a == "" {
		return "none"
	}
	return string(a)
}

func ruleOrder(m Matrix) string {
	conds := make([]string, len(m.Rules))
	for i, r := range m.Rules {
		conds[i] = string(r.Condition)
	}
	return strings.Join(conds, ",")
}
