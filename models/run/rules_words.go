package run

// The decision rules in words: who may decide a run, as the review page, the inbox and
// the API say it. The rules themselves are in rules.go.

import (
	"fmt"
	"maps"
	"slices"
	"strings"

	"gantry/models/risk"
)

// Summary says it in a sentence, e.g. "an owner, not the requester, freshly signed in;
// after 4 h also an admin or owner".
func (d Deciders) Summary() string {
	r := d.Decision
	s := approverPhrase(r.Approver)
	if r.FourEyes {
		s += ", not the requester"
	}
	if r.Elevated {
		s += ", " + ElevationSummary()
	}
	if r.Escalation != "" {
		switch {
		case d.Escalated:
			s += "; escalated: now also " + approverPhrase(r.Escalation)
		case d.EscalatesAt != nil:
			s += "; from " + d.EscalatesAt.UTC().Format("2006-01-02 15:04 UTC") + " also " + approverPhrase(r.Escalation)
		}
	}
	return s
}

// ElevationSummary says what an elevated (risk 3) decision asks of the person: "signed
// in within 15 minutes, typing DESTROY with a reason".
func ElevationSummary() string {
	return fmt.Sprintf("signed in within %d minutes, typing %s with a reason", int(ElevationWindow.Minutes()), ConfirmWord)
}

// FloorsSummary says the floors (Floors) in a sentence, the conditions in the default
// matrix's words: "any destroy (delete action or destroy run) and replace or destroy of
// an irreversible (data-bearing) resource are risk 3, decided by an owner, not the
// requester, signed in within 15 minutes, typing DESTROY with a reason; any change in a
// production environment is risk 2 or more".
func FloorsSummary() string {
	byClass := map[risk.Class][]string{}
	for _, rule := range risk.Default().Rules {
		if class, ok := Floors.Classes[rule.Condition]; ok {
			byClass[class] = append(byClass[class], rule.Description)
		}
	}
	classes := slices.Sorted(maps.Keys(byClass))
	slices.Reverse(classes)
	parts := make([]string, 0, len(classes))
	for _, class := range classes {
		verb := "is"
		if len(byClass[class]) > 1 {
			verb = "are"
		}
		s := fmt.Sprintf("%s %s risk %d", strings.Join(byClass[class], " and "), verb, class)
		if class < risk.MaxClass {
			s += " or more"
		}
		if d, ok := Floors.Decisions[risk.LevelOf(class, false)]; ok {
			s += ", decided by " + Deciders{Decision: Requirement{Approver: d.Approver, FourEyes: d.FourEyes, Elevated: d.Elevated}}.Summary()
		}
		parts = append(parts, s)
	}
	return strings.Join(parts, "; ")
}

func approverPhrase(a risk.Approver) string {
	switch a {
	case risk.ApproverOperator:
		return "an operator, admin or owner"
	case risk.ApproverAdmin:
		return "an admin or owner"
	case risk.ApproverOwner:
		return "an owner"
	case risk.ApproverEnvOwners:
		return "a named owner of the environment"
	}
	return "nobody"
}

// OverrideSummary says who may override a soft-mandatory policy failure and what it
// asks (decide, overridable), as a sentence.
func OverrideSummary() string {
	return fmt.Sprintf("An admin or owner who may decide the run may override it, with a reason of at least %d characters.", MinReasonLength)
}

// OverriderSummary says the four-eyes rule on overrides (decide), as a sentence.
func OverriderSummary() string {
	return "Whoever overrides a rule does not also approve the run (four eyes)."
}
