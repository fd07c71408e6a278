package run

import (
	"fmt"
	"slices"
	"strings"

	"gantry/models/classify"
	"gantry/models/risk"
	"gantry/policies"
)

// What a request form predicts before it is submitted, from a simulated plan of its
// inputs against the workspace's current state judged by the same plan gates a run's
// own plan meets (core.gates): which resources it replaces or destroys, the risk and
// decision that follow, and the policy rules that would block it. A prediction is only
// made when the plan could be simulated: otherwise the form says the plan will tell,
// never that nothing is replaced.

// Impact is what the simulated plan of a request predicts.
type Impact struct {
	// Risk is the class and decision the plan gates give the simulated plan; for a dry
	// run, what the same change would carry if it were applied.
	Risk risk.Assessment
	// Replaces and Destroys are the resources the plan would replace or destroy, in
	// plan order.
	Replaces, Destroys []Replacement
	// Changes is how many resources would change at all (create, update, replace,
	// destroy): 0 is a plan without changes.
	Changes int
	// Blocks are the policy rules the plan would fail, hard-mandatory first: a
	// hard-mandatory one refuses the run, a soft-mandatory one holds it until an admin
	// overrides it, an advisory one only warns.
	Blocks []PolicyBlock
}

// Replacement is one resource the plan would replace or destroy.
type Replacement struct {
	Address string
	Type    string
	// Irreversible: its type holds data (the template's manifest says so), which the
	// replacement or destruction loses.
	Irreversible bool
	// Because are the attributes whose change forces the replacement ("name").
	Because []string
}

// PolicyBlock is one policy rule a plan fails.
type PolicyBlock struct {
	RuleID, Title string
	Enforcement   policies.Enforcement
	Messages      []string
}

// impactOf is the prediction made from the gates' assessment a of a simulated plan.
func impactOf(a Assessment) Impact {
	res := a.Classification
	out := Impact{Risk: a.Risk, Changes: res.Counts.Create + res.Counts.Update + res.Counts.Replace + res.Counts.Destroy}
	for _, i := range res.Replaces {
		out.Replaces = append(out.Replaces, replacementOf(res.Changes[i]))
	}
	for _, i := range res.Destroys {
		out.Destroys = append(out.Destroys, replacementOf(res.Changes[i]))
	}
	for _, r := range a.Policy.Results {
		if !r.Passed {
			out.Blocks = append(out.Blocks, PolicyBlock{RuleID: r.RuleID, Title: r.Title, Enforcement: r.Enforcement, Messages: r.Messages})
		}
	}
	slices.SortStableFunc(out.Blocks, func(x, y PolicyBlock) int { return enforcementRank(x.Enforcement) - enforcementRank(y.Enforcement) })
	return out
}

func replacementOf(c classify.Change) Replacement {
	r := Replacement{Address: c.Address, Type: c.Type, Irreversible: c.Irreversible}
	for _, path := range c.ReplacePaths {
		parts := make([]string, 0, len(path))
		for _, p := range path {
			parts = append(parts, fmt.Sprint(p))
		}
		r.Because = append(r.Because, strings.Join(parts, "."))
	}
	return r
}

// enforcementRank orders failed rules by what they do to a run: refused first.
func enforcementRank(e policies.Enforcement) int {
	switch e {
	case policies.HardMandatory:
		return 0
	case policies.SoftMandatory:
		return 1
	}
	return 2
}

// LosesData reports whether the plan would replace or destroy a data-bearing resource.
func (i Impact) LosesData() bool {
	for _, r := range slices.Concat(i.Replaces, i.Destroys) {
		if r.Irreversible {
			return true
		}
	}
	return false
}

// Refused reports whether a hard-mandatory rule would refuse the run.
func (i Impact) Refused() bool {
	return len(i.Blocks) > 0 && i.Blocks[0].Enforcement == policies.HardMandatory
}
