package run

import (
	"fmt"
	"slices"

	"gantry/models/errs"
	"gantry/models/policy"
	"gantry/policies"
)

// The rule on overriding a policy result, beside the decision rules (rules.go): the
// service's Override refuses with it, and the review page asks it of each rule.

// overridable is the rule on overriding one result of a policy evaluation (results,
// with the overrides already made): only a failure of a soft-mandatory rule, at the
// version the evaluation used, and only once; a hard-mandatory failure never. The
// service's Override refuses with its error; the review page offers the control on
// each rule where it has none (Permissions.OverrideRule).
func overridable(results []policies.Result, overrides map[string]policy.Override, ruleID, ruleVersion string) (policies.Result, error) {
	i := slices.IndexFunc(results, func(res policies.Result) bool { return res.RuleID == ruleID })
	switch {
	case i < 0 || results[i].Passed:
		v := &errs.Validation{}
		v.Add("rule_id", fmt.Sprintf("Rule %q did not fail in this evaluation: there is nothing to override.", ruleID))
		return policies.Result{}, v
	case results[i].Enforcement == policies.HardMandatory:
		return policies.Result{}, errs.Explain(errs.ErrForbidden, "Rule "+ruleID+" is hard-mandatory: its failure is never overridden. Change the request instead.")
	case results[i].Enforcement != policies.SoftMandatory:
		return policies.Result{}, fmt.Errorf("rule %s is advisory: nothing to override: %w", ruleID, errs.ErrConflict)
	case results[i].RuleVersion != ruleVersion:
		return policies.Result{}, fmt.Errorf("the override names version %s of rule %s, the evaluation used %s: %w", ruleVersion, ruleID, results[i].RuleVersion, ErrStaleEvidence)
	}
	if _, done := overrides[ruleID]; done {
		return policies.Result{}, fmt.Errorf("rule %s is already overridden: %w", ruleID, errs.ErrConflict)
	}
	return results[i], nil
}

// OverrideRule is the verdict on overriding rule ruleID (at ruleVersion) of the run's
// policy evaluation (results, with the overrides already made): what overriding needs
// of the person (Override), then of the rule (overridable), as the service's Override
// judges them.
func (p Permissions) OverrideRule(results []policies.Result, overrides map[string]policy.Override, ruleID, ruleVersion string) Verdict {
	if !p.Override.Allowed() {
		return p.Override
	}
	_, err := overridable(results, overrides, ruleID, ruleVersion)
	return refused(err)
}
