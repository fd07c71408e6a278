package handlers

import (
	"fmt"

	"gantry/models/pages"
	"gantry/models/run"
	"gantry/policies"
	"gantry/views"
	"gantry/views/paths"
)

// blockView is what blocks run r (b, from its page's read model; nil: nothing) in
// words, with the controls the rules allow the reader (perms). On the review page
// (review) the panel holds the override forms; the run page's links there.
func blockView(r run.Run, b *pages.Block, perms run.Permissions, review bool) *views.PolicyBlockView {
	if b == nil {
		return nil
	}
	v := &views.PolicyBlockView{RunID: r.ID}
	if perms.Resubmit.Allowed() {
		v.ResubmitURL = paths.ResubmitRun(r.TemplateName, r.ID)
	}
	overridable := false
	for _, rule := range b.Rules {
		row := views.BlockedRuleView{RuleID: rule.RuleID, Title: rule.Title, Version: rule.RuleVersion,
			Hard: rule.Enforcement == policies.HardMandatory, Messages: rule.Messages, CanOverride: rule.Override.Allowed()}
		if len(row.Messages) > maxMessagesShown {
			row.MoreMessages = len(row.Messages) - maxMessagesShown
			row.Messages = row.Messages[:maxMessagesShown]
		}
		row.Enforcement = "Soft-mandatory: " + run.OverrideSummary() + " may override it."
		if row.Hard {
			row.Enforcement = "Hard-mandatory: never overridden, not even by an owner; only a changed request passes it."
		}
		if o := rule.Overridden; o != nil {
			row.Overridden = "by " + o.OverriddenByName + ": " + o.Reason
		}
		overridable = overridable || row.CanOverride
		v.Rules = append(v.Rules, row)
	}
	if overridable && !review {
		v.ReviewURL = paths.RunReview(r.ID)
	}
	v.Headline = fmt.Sprintf("Blocked by policy: %d %s failed", len(b.Rules), plural(len(b.Rules), "rule", "rules"))
	v.WhatToDo = blockAdvice(b, perms)
	return v
}

// blockAdvice says what moves a blocked run: a changed request, always; for soft
// failures alone also their overrides, then a person's approval.
func blockAdvice(b *pages.Block, perms run.Permissions) string {
	resubmit := "change the request so that the rules pass: “Edit and resubmit” opens the request form filled in with this run's request."
	if b.Hard {
		return "A hard-mandatory rule is never overridden, so this run will not apply as requested: " + resubmit
	}
	s := "The run waits until " + run.OverrideSummary() + " overrides each failed rule; then it waits for its approval"
	if perms.Deciders.Decision.FourEyes {
		s += ", and " + run.OverriderSummary()
	}
	return s + ". Or " + resubmit
}

// plural is one or many by n.
func plural(n int, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}
