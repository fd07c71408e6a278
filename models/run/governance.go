package run

import (
	"slices"
	"time"

	"gantry/models/risk"
)

// GovernanceRules answers the governance report's questions from the rules and the
// state table themselves, so the report never restates them (models/governance asks
// through its own interface; the composition root hands it this).
type GovernanceRules struct{}

// Gate is the decision a plan with facts f gets under matrix m, the way FinishPlan
// routes it: the matrix raised to the floors (assessRisk), then either Gantry's
// self-service approval (approver system: no person decides) or what deciding it
// requires of a person (RequirementOf, which applies the destroy floor again).
func (GovernanceRules) Gate(m risk.Matrix, f risk.Facts) risk.Assessment {
	a := assessRisk(m, f)
	r := Run{Kind: Kind(f.Kind), PlanSummary: Summary{Create: f.Create, Update: f.Update, Replace: f.Replace, Delete: f.Destroy}}
	r.assessedAs(a)
	codifyFloor(&r)
	if a.Class == 0 || risk.Approver(r.RequiredApprover) == risk.ApproverSystem {
		return a
	}
	req := RequirementOf(r)
	a.Decision = risk.Decision{Level: a.Level, Approver: req.Approver, FourEyes: req.FourEyes, Elevated: req.Elevated,
		Escalation: req.Escalation, EscalateAfterHours: int(req.EscalateAfter / time.Hour)}
	return a
}

// AppliesOnlyApproved reports whether the state table lets a run start applying only
// from APPROVED.
func (GovernanceRules) AppliesOnlyApproved() bool { return onlyFrom(Running, Approved) }

// VerifiesBeforeSuccess reports whether the state table lets a run succeed only through
// its verification (a refresh-only plan after the apply), and an apply lead to it.
func (GovernanceRules) VerifiesBeforeSuccess() bool {
	return onlyFrom(Succeeded, Verifying) && CanTransition(Running, Verifying)
}

// onlyFrom reports whether the table reaches state to from state from and nothing else.
func onlyFrom(to, from State) bool {
	for s, next := range transitions {
		if s != from && slices.Contains(next, to) {
			return false
		}
	}
	return CanTransition(from, to)
}
