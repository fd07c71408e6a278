package handlers

import (
	"fmt"
	"strings"

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
		row.Enforcement = "Soft-mandatory. " + run.OverrideSummary()
		if row.Hard {
			row.Enforcement = "Hard-mandatory. Never overridden, not even by an owner: only a changed request passes it."
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

// blockAdvice says what moves a blocked run: a changed request, always (by the reader,
// when the rules let them resubmit it); for soft failures alone also their overrides,
// then a person's approval.
func blockAdvice(b *pages.Block, perms run.Permissions) string {
	change := "The requester may change the request so that the rules pass."
	if perms.Resubmit.Allowed() {
		change = "Change the request so that the rules pass: “Edit and resubmit” opens the request form filled in with this run's request."
	}
	if b.Hard {
		return "A hard-mandatory rule is never overridden: this run will not apply as requested. " + change
	}
	s := "The run waits until each failed rule is overridden, then for its approval. "
	if perms.Deciders.Decision.FourEyes {
		s += run.OverriderSummary() + " "
	}
	return s + "Or: " + lowerFirst(change)
}

// lowerFirst is s with its first letter in lower case.
func lowerFirst(s string) string {
	if s == "" {
		return s
	}
	return strings.ToLower(s[:1]) + s[1:]
}

// plural is one or many by n.
func plural(n int, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}
