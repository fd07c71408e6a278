package risk

import (
	"fmt"
	"slices"
	"strings"

	"gantry/models/errs"
)

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
