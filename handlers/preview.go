package handlers

import (
	"fmt"
	"strings"

	"gantry/models/review"
	"gantry/models/run"
	"gantry/policies"
	"gantry/views"
)

// previewProps is a request's preview in words: who decides (predicted from the
// simulated plan when there is one, else the floor), what it replaces, which policies
// it fails, and what it costs.
func previewProps(pv run.Preview) views.RequestPreviewProps {
	p := views.RequestPreviewProps{DryRun: pv.DryRun, CostMissing: pv.CostMissing, Existing: pv.Existing, Unknown: pv.Unknown}
	if pv.Floor != nil {
		p.Decider, p.Risk, p.Because = riskWords(pv.Floor.Decision.Summary(), int(pv.Floor.Class), pv.Floor.Protected, pv.Floor.Rule.Description)
	}
	if im := pv.Impact; im != nil && (pv.Floor != nil || pv.DryRun) {
		a := im.Risk
		p.Predicted = true
		p.Decider, p.Risk, p.Because = riskWords(a.Decision.Summary(), int(a.Class), a.Protected, a.Rule.Description)
	}
	if im := pv.Impact; im != nil {
		p.Changes = im.Changes
		for _, r := range im.Replaces {
			p.Replaces = append(p.Replaces, replaceWords(r, true))
		}
		for _, r := range im.Destroys {
			p.Replaces = append(p.Replaces, replaceWords(r, false))
		}
		for _, b := range im.Blocks {
			p.Blocks = append(p.Blocks, views.PreviewBlock{Rule: b.RuleID, Title: b.Title, Effect: enforcementEffect(b.Enforcement),
				Messages: b.Messages, Refuses: b.Enforcement == policies.HardMandatory})
		}
	}
	if pv.Cost != nil && pv.Cost.NoPrice {
		p.CostMissing = "The template's price table has " + pv.Cost.NoPriceFor() + "."
	} else if pv.Cost != nil {
		p.Cost, p.Unpriced = review.Money(pv.Cost.After), pv.Cost.Unpriced
		if pv.Cost.Delta != 0 {
			p.Delta = review.SignedMoney(pv.Cost.Delta)
		}
	}
	return p
}

// riskWords says an assessment: who decides, the class ("risk 1 in a protected
// environment") and the rule that puts it there.
func riskWords(decider string, class int, protected bool, because string) (string, string, string) {
	risk := fmt.Sprintf("risk %d", class)
	if protected && class == 1 {
		risk += " in a protected environment"
	}
	return decider, risk, because
}

// replaceWords says what the plan would do to r: replaced (and why) or destroyed, and
// what is lost.
func replaceWords(r run.Replacement, replaced bool) views.PreviewReplace {
	out := views.PreviewReplace{Address: r.Address, What: "is destroyed."}
	if replaced {
		out.What = "is replaced: destroyed, then created anew."
		if len(r.Because) > 0 {
			out.What = "is replaced: " + strings.Join(r.Because, ", ") + " cannot change in place, so it is destroyed and created anew."
		}
	}
	if r.Irreversible {
		out.Loss = "What it holds is lost (" + r.Type + " holds data)."
	}
	return out
}

// enforcementEffect says what a failed rule of enforcement e does to the run.
func enforcementEffect(e policies.Enforcement) string {
	switch e {
	case policies.HardMandatory:
		return "the run would be refused (hard-mandatory: no override); change the inputs"
	case policies.SoftMandatory:
		return "the run would wait until an admin overrides it with a reason (soft-mandatory)"
	}
	return "a warning only (advisory)"
}
