package run

import (
	"context"
	"fmt"

	"gantry/models/authz"
	"gantry/models/classify"
	"gantry/models/errs"
	"gantry/models/policy"
	"gantry/models/review"
)

// ReviewData is what the plan review page shows beyond the run row: the plan read
// once (classification and raw values) and the stored policy evaluation with its
// overrides.
type ReviewData struct {
	Classification classify.Result
	Doc            *review.Doc
	Evaluation     *policy.Evaluation
	Overrides      map[string]policy.Override
}

// Review reads run r's plan for review (r read through Get). A run without a plan yet
// is errs.ErrNotFound.
func (s *Service) Review(ctx context.Context, r Run) (ReviewData, error) {
	subject, err := authz.Require(ctx, authz.PermOrgRead)
	if err != nil {
		return ReviewData{}, err
	}
	if r.OrganizationID != subject.OrganizationID || r.PlanJSONArtifactID == nil {
		return ReviewData{}, errs.ErrNotFound
	}
	planJSON, _, err := s.artifacts.Get(ctx, r.OrganizationID, *r.PlanJSONArtifactID)
	if err != nil {
		return ReviewData{}, err
	}
	var out ReviewData
	facts, err := s.catalog.Facts(r.TemplateName)
	if err != nil {
		// A template the catalog no longer offers: classify without its type facts.
		facts = TemplateFacts{}
	}
	if out.Classification, err = classify.Classify(planJSON, facts.ClassifyOptions()); err != nil {
		return ReviewData{}, fmt.Errorf("reading plan JSON: %w", err)
	}
	if out.Doc, err = review.Load(planJSON); err != nil {
		return ReviewData{}, fmt.Errorf("reading plan JSON: %w", err)
	}
	if r.PolicyEvaluationID != nil {
		ev, overrides, err := s.policies.EvaluationWithOverrides(ctx, r.OrganizationID, *r.PolicyEvaluationID)
		if err != nil {
			return ReviewData{}, err
		}
		out.Evaluation, out.Overrides = &ev, overrides
	}
	return out, nil
}
