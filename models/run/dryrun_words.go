package run

import (
	"context"
	"fmt"

	"gantry/models/authz"
	"gantry/models/classify"
	"gantry/models/risk"
)

// A dry run is never gated (risk 0, nobody decides), which says nothing of the change
// it plans: a dry run of a bucket rename plans a data-losing replace. Its headline says
// both, the risk the same change would carry if applied coming from the same rules a
// run's plan meets (factsOf, assessRisk: no second copy).

// IfApplied is the risk dry run r's plan (res, its classification: ReviewData) would
// carry if the same change were applied now, in r's environment under the
// organization's current matrix. It is nil for any run that is not a dry run.
func (s *Reads) IfApplied(ctx context.Context, r Run, res classify.Result) (*risk.Assessment, error) {
	subject, err := authz.Require(ctx, authz.PermOrgRead)
	if err != nil {
		return nil, err
	}
	if r.Kind != KindPlanOnly || r.OrganizationID != subject.OrganizationID {
		return nil, nil
	}
	facts, err := s.k.catalog.Facts(r.TemplateName)
	if err != nil {
		return nil, fmt.Errorf("reading template %s: %w", r.TemplateName, err)
	}
	env, err := s.k.environments.Lookup(ctx, r.OrganizationID, r.EnvironmentID)
	if err != nil {
		return nil, err
	}
	m, err := s.k.matrix.Current(ctx, r.OrganizationID)
	if err != nil {
		return nil, err
	}
	applied := r
	applied.Kind = KindApply
	a := assessRisk(m.Matrix, factsOf(applied, env, res, facts))
	return &a, nil
}

// DryRunHeadline is a dry run's headline: nothing is applied and nobody decides, and
// what the same change would carry if applied (ifApplied from IfApplied; nil: not
// known, the plan of an apply will tell).
func DryRunHeadline(ifApplied *risk.Assessment) string {
	const head = "Dry run: nothing is applied, so nobody decides it."
	if ifApplied == nil {
		return head + " Applied, the risk the same change would carry: its plan will tell."
	}
	a := *ifApplied
	if a.Class == 0 {
		return head + " Applied, the same change would change nothing (risk 0)."
	}
	return fmt.Sprintf("%s Applied, the same change would be risk %d (%s): %s.", head, a.Class, a.Rule.Description, a.Decision.Summary())
}

// DryRunFourEyes says the four-eyes line of a dry run's review: a dry run has nothing to
// decide, so neither a yes nor a no of the stored (risk 0) decision applies.
func DryRunFourEyes() string { return "Does not apply: a dry run has nothing to decide." }
