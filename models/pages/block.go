package pages

import (
	"slices"

	"gantry/models/policy"
	"gantry/models/run"
	"gantry/policies"
)

// Block is what stops a POLICY_BLOCKED run, for its run page and its review: the
// mandatory rules that failed, hard-mandatory ones first, each with all its messages,
// the override it has been given, and whether the reader may override it now (the
// rules' verdict, as the service's Override judges it).
type Block struct {
	Rules []BlockedRule
	// Hard: a hard-mandatory rule failed, so no override moves the run: only a changed
	// request does.
	Hard bool
}

// BlockedRule is one failed mandatory rule of a blocked run.
type BlockedRule struct {
	policies.Result
	// Overridden is the override it was given (nil: none yet).
	Overridden *policy.Override
	// Override is the verdict on the reader overriding it now.
	Override run.Verdict
}

// BlockOf is what blocks run r by its evaluation ev (nil: none recorded) and the
// overrides given to it, read with the reader's Permissions; nil when r is not blocked
// by a policy.
func BlockOf(r run.Run, ev *policy.Evaluation, overrides map[string]policy.Override, perms run.Permissions) *Block {
	if r.State != run.PolicyBlocked || ev == nil {
		return nil
	}
	b := &Block{}
	for _, res := range FailedFirst(ev.Results) {
		if res.Passed || (res.Enforcement != policies.HardMandatory && res.Enforcement != policies.SoftMandatory) {
			continue
		}
		b.Hard = b.Hard || res.Enforcement == policies.HardMandatory
		rule := BlockedRule{Result: res, Override: perms.OverrideRule(ev.Results, overrides, res.RuleID, res.RuleVersion)}
		if o, ok := overrides[res.RuleID]; ok {
			rule.Overridden = &o
		}
		b.Rules = append(b.Rules, rule)
	}
	return b
}

// FailedFirst is the results of an evaluation in the order a reader needs them:
// failed rules first (hard-mandatory, soft-mandatory, then advisory), then the passed
// ones, each group in the evaluation's order.
func FailedFirst(results []policies.Result) []policies.Result {
	rank := func(res policies.Result) int {
		switch {
		case res.Passed:
			return 3
		case res.Enforcement == policies.HardMandatory:
			return 0
		case res.Enforcement == policies.SoftMandatory:
			return 1
		}
		return 2
	}
	out := slices.Clone(results)
	slices.SortStableFunc(out, func(x, y policies.Result) int { return rank(x) - rank(y) })
	return out
}
