package run

import (
	"context"
	"fmt"

	"gantry/models/authz"
	"gantry/models/classify"
	"gantry/models/errs"
	"gantry/models/rollback/boundary"
)

// The rollback boundary of a run's plan (DESIGN §9): how each resource it replaces or
// destroys comes back, shown beside that change on the review page and recorded with
// the approval. Both read it through boundaryOf, so the audit event records what the
// page showed, computed from the run's own plan, never taken from the form.

// Boundary is run r's rollback boundary (r read through Get), with res its plan as
// Review classified it.
func (s *Reads) Boundary(ctx context.Context, r Run, res classify.Result) (boundary.Review, error) {
	subject, err := authz.Require(ctx, authz.PermOrgRead)
	if err != nil {
		return boundary.Review{}, err
	}
	if r.OrganizationID != subject.OrganizationID {
		return boundary.Review{}, errs.ErrNotFound
	}
	return s.k.boundaryOf(ctx, r, &res)
}

// boundaryOf is run r's rollback boundary from its plan res, or, for res nil, from the
// plan it reads and classifies as Review does (only when the plan replaces or destroys
// something: the summary counts the same classification).
func (k *core) boundaryOf(ctx context.Context, r Run, res *classify.Result) (boundary.Review, error) {
	counts := classify.Counts{Replace: r.PlanSummary.Replace, Destroy: r.PlanSummary.Delete}
	if res != nil {
		counts = res.Counts
	}
	if !boundary.Touches(counts) || r.PlanJSONArtifactID == nil {
		return boundary.Review{}, nil
	}
	f := boundary.Facts{Template: r.TemplateName}
	// A template the catalog no longer offers has no facts: its boundary is unknown.
	if facts, err := k.catalog.Facts(r.TemplateName); err == nil {
		f.Known, f.Notes = true, facts.Rollback
	}
	if r.PriorStateVersionID != nil {
		v, err := k.states.VersionInfo(ctx, r.OrganizationID, *r.PriorStateVersionID)
		if err != nil {
			return boundary.Review{}, fmt.Errorf("reading the state version the plan starts from: %w", err)
		}
		if v.RunID != "" { // a rollback re-applies the inputs of the run that wrote it
			f.Serial = v.Serial
		}
	}
	if res == nil {
		res = &classify.Result{}
		if _, err := k.classifiedPlan(ctx, r, res); err != nil {
			return boundary.Review{}, err
		}
	}
	return boundary.Of(*res, f), nil
}

// recordBoundaryShown adds to the decision just made on r (its last move's audit event)
// what the review page showed of the rollback boundary, computed again from the run's
// own plan under the row lock; it is not part of the evidence the decision binds to.
func (k *core) recordBoundaryShown(ctx context.Context, r *Run) error {
	b, err := k.boundaryOf(ctx, *r, nil)
	if err != nil {
		return err
	}
	if shown := b.Audit(); shown != nil {
		r.moves.Annotate(shown)
	}
	return nil
}
