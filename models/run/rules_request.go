package run

import "gantry/models/authz"

// MayRequest says whether s may request runs at all (a dry run): what Requests asks
// first. The catalog offers "Request" from it.
func MayRequest(s authz.Subject) bool { return s.Can(authz.PermProvisioningPlan) }

// MayChangeWorkspace says whether s may request a run that changes a workspace (an
// apply, a change, a promotion, a destroy): a request and runs.apply. The environment's
// own rules (a grant, cloud.live) come on top and are said on the form. Requests
// refuses such a run without it; the pages offer those forms from it.
func MayChangeWorkspace(s authz.Subject) bool { return MayRequest(s) && s.Can(authz.PermRunsApply) }
