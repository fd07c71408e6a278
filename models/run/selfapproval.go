package run

import "gantry/models/runport"

// SelfApproved reports whether the approval in force is the run's own requester's: a
// person's approval (never Gantry's self-service one) by whoever requested this run or a
// run it was planned again from. The rules allow it only where four eyes is off for the
// run's risk (decide); every page, report and export marks it (runport.SelfApproved).
func (r Run) SelfApproved() bool {
	return r.ApprovalKind == "person" && r.ApprovedBy != nil && r.RequestedByUser(*r.ApprovedBy)
}

// markSelfApproval records a self-approval in the approval's audit event, so the
// hash-chained log (and any export of it) says so without the runs table.
func (r *Run) markSelfApproval() {
	if r.SelfApproved() {
		r.moves.Annotate(map[string]any{runport.SelfApprovedField: true})
	}
}
