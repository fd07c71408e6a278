package run

import (
	"fmt"

	"gantry/models/authz"
	"gantry/models/errs"
)

// The rules on asking again for a run that will not apply, beside the decision rules
// (rules.go): "Plan again" (the same request, planned afresh) and "Edit and resubmit"
// (the request form filled in with it, to change first).

// planAgainVerdict: planning again is requesting again, so it needs what requesting
// needs (provisioning.plan, and cloud.live for a live executor).
func planAgainVerdict(r Run, a Actor, possible bool) Verdict {
	switch {
	case !a.Can(authz.PermProvisioningPlan):
		return refused(errs.Explain(errs.ErrForbidden, fmt.Sprintf("Your role (%s) does not request runs.", a.Role)))
	case r.Live() && !a.CloudLive:
		return refused(errs.Explain(errs.ErrForbidden, "This run's executor acts on a live cloud: planning it again needs the live-cloud entitlement."))
	}
	return stateVerdict(r, ActionPlanAgain, possible)
}

// resubmitVerdict: "Edit and resubmit" asks again for a run that will not apply as
// asked (a person rejected it, or a policy blocked it: soft or hard, the request is
// what to change), from the request form filled in with its request. It needs what
// requesting needs; a destroy is asked for again from its workspace, and only what the
// request form asks for (an apply or a dry run) is resubmitted there.
func resubmitVerdict(r Run, a Actor) Verdict {
	switch {
	case !a.Can(authz.PermProvisioningPlan):
		return refused(errs.Explain(errs.ErrForbidden, fmt.Sprintf("Your role (%s) does not request runs.", a.Role)))
	case r.Live() && !a.CloudLive:
		return refused(errs.Explain(errs.ErrForbidden, "This run's executor acts on a live cloud: requesting it again needs the live-cloud entitlement."))
	case r.Kind != KindApply && r.Kind != KindPlanOnly:
		return refused(errs.Explain(errs.ErrConflict, "Only an apply or a dry run is edited and resubmitted: ask for this one again from its workspace."))
	case r.State != Rejected && r.State != PolicyBlocked:
		return refused(errs.Explain(errs.ErrConflict, "Only a rejected or policy-blocked run is edited and resubmitted."))
	}
	return allowed()
}
