package risk

import (
	"fmt"
	"strconv"
	"strings"
)

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
