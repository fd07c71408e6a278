package run

// The decision rules in words: who may decide a run, as the review page, the inbox and
// the API say it. The rules themselves are in rules.go.

import (
	"fmt"

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
		s += fmt.Sprintf(", signed in within %d minutes, typing %s with a reason", int(ElevationWindow.Minutes()), ConfirmWord)
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

func approverPhrase(a risk.Approver) string {
	switch a {
	case risk.ApproverOperator:
		return "a member with provisioning.apply (operator or above)"
	case risk.ApproverAdmin:
		return "an admin or owner"
	case risk.ApproverOwner:
		return "an owner"
	case risk.ApproverEnvOwners:
		return "a named owner of the environment"
	}
	return "nobody"
}
