package risk

import (
	"fmt"
	"slices"

	"gantry/models/errs"
)

// Floors are the minimums no matrix edit can lower. The run rules own them
// (models/run.Floors, DESIGN §3): the store refuses a matrix below them and every
// assessment is made with the matrix raised to them, so a version saved before a floor
// existed cannot loosen it either.
type Floors struct {
	// Classes: the least class of a condition's rule.
	Classes map[Condition]Class
	// Decisions: the least decision of a level: its approver at least this role, four
	// eyes and elevation on where set here, and escalation only to this role or above.
	Decisions map[Level]Decision
}

// Check refuses m where it is below a floor, with a message on the form field.
func (f Floors) Check(m Matrix) error {
	v := &errs.Validation{}
	for _, r := range m.Rules {
		if least, ok := f.Classes[r.Condition]; ok && r.Class < least {
			v.Add(ClassField(r.Condition), fmt.Sprintf("%s is at least risk %d, whatever the matrix says: no edit lowers this floor.", r.Description, least))
		}
	}
	for _, d := range m.Decisions {
		least, ok := f.Decisions[d.Level]
		if !ok {
			continue
		}
		if least.Approver.Role() && !d.Approver.AtLeast(least.Approver) {
			v.Add(ApproverField(d.Level), fmt.Sprintf("Risk %s is decided by %s at least (a floor).", d.Level, least.Approver))
		}
		if least.FourEyes && !d.FourEyes {
			v.Add(FourEyesField(d.Level), fmt.Sprintf("Risk %s always needs four eyes: the requester never approves (a floor).", d.Level))
		}
		if least.Elevated && !d.Elevated {
			v.Add(ElevatedField(d.Level), fmt.Sprintf("Risk %s always needs a fresh sign-in, the word DESTROY and a reason (a floor).", d.Level))
		}
		if least.Approver.Role() && d.Escalation != "" && !d.Escalation.AtLeast(least.Approver) {
			v.Add(EscalationField(d.Level), fmt.Sprintf("Risk %s may only escalate to %s or above (a floor).", d.Level, least.Approver))
		}
	}
	return v.Err()
}

// Raise returns m with everything below a floor lifted to it (a copy: m is untouched).
func (f Floors) Raise(m Matrix) Matrix {
	out := Matrix{Rules: slices.Clone(m.Rules), Decisions: slices.Clone(m.Decisions)}
	for i, r := range out.Rules {
		if least, ok := f.Classes[r.Condition]; ok && r.Class < least {
			out.Rules[i].Class = least
		}
	}
	for i, d := range out.Decisions {
		least, ok := f.Decisions[d.Level]
		if !ok {
			continue
		}
		if least.Approver.Role() && !d.Approver.AtLeast(least.Approver) {
			d.Approver = least.Approver
		}
		d.FourEyes = d.FourEyes || least.FourEyes
		d.Elevated = d.Elevated || least.Elevated
		if least.Approver.Role() && d.Escalation != "" && !d.Escalation.AtLeast(least.Approver) {
			d.Escalation, d.EscalateAfterHours = "", 0
		}
		out.Decisions[i] = d
	}
	return out
}
