package run

import (
	"context"
	"fmt"
	"time"

	"gantry/models/audit"
	"gantry/models/authz"
	"gantry/models/classify"
	"gantry/models/errs"
	"gantry/models/policy"
	"gantry/models/review"
)

// Reads of runs for people. A run in a restricted environment the reader has no grant
// for does not exist for them (DESIGN §4): every read here answers ErrNotFound, and
// lists leave it out, exactly as for another tenant's run.

// Get returns run id of the subject's organization, if the subject may see it.
func (s *Reads) Get(ctx context.Context, id string) (Run, error) {
	subject, err := authz.Require(ctx, authz.PermOrgRead)
	if err != nil {
		return Run{}, err
	}
	return s.k.getVisible(ctx, subject, id)
}

// getVisible is run id of subject's organization, if subject may see it (not found
// otherwise, as for another tenant's run).
func (s *core) getVisible(ctx context.Context, subject authz.Subject, id string) (Run, error) {
	r, err := s.store.get(ctx, subject.OrganizationID, id)
	if err != nil {
		return Run{}, err
	}
	if err := s.visible(ctx, subject, r); err != nil {
		return Run{}, err
	}
	return r, nil
}

// visible refuses, as not found, a run of another organization or in a restricted
// environment the subject may not see (the environment's rule, environment.Visible).
func (s *core) visible(ctx context.Context, subject authz.Subject, r Run) error {
	if r.OrganizationID != subject.OrganizationID {
		return fmt.Errorf("run %s: %w", r.ID, errs.ErrNotFound)
	}
	if err := s.environments.CheckVisible(ctx, subject, r.EnvironmentID); err != nil {
		return fmt.Errorf("run %s: %w", r.ID, err)
	}
	return nil
}

// list lists the subject's organization's runs that the subject may see.
func (s *core) list(ctx context.Context, q listQuery) ([]Run, error) {
	subject, err := authz.Require(ctx, authz.PermOrgRead)
	if err != nil {
		return nil, err
	}
	q.orgID = subject.OrganizationID
	if q.hidden, err = s.environments.HiddenFrom(ctx, subject); err != nil {
		return nil, err
	}
	return s.store.list(ctx, q)
}

// ListForWorkspace returns the runs of a workspace, newest first, drift checks aside.
func (s *Reads) ListForWorkspace(ctx context.Context, workspaceID string, limit int) ([]Run, error) {
	if limit <= 0 || limit > 200 {
		limit = 50
	}
	// Drift checks come every hour in production: the workspace page shows its newest
	// in its own section, the runs list has them all.
	return s.k.list(ctx, listQuery{workspaceID: workspaceID, notKinds: []Kind{KindDrift}, order: "number DESC", limit: limit})
}

// LastApplied is the newest run that applied a change to workspace workspaceID: an
// apply or a destroy that succeeded (nil when none did). Another organization's or a
// hidden workspace has none.
func (s *Reads) LastApplied(ctx context.Context, workspaceID string) (*Run, error) {
	runs, err := s.k.list(ctx, listQuery{workspaceID: workspaceID, states: []State{Succeeded}, kinds: []Kind{KindApply, KindDestroy},
		order: "number DESC", limit: 1})
	if err != nil || len(runs) == 0 {
		return nil, err
	}
	return &runs[0], nil
}

// InputsOf are run runID's inputs as its configuration holds them, with what the
// template's manifest says of each, the values of the sensitive ones in (read back from
// their seal): a promotion compares them and never shows them. Only someone who may
// request runs, and may see the run, reads them.
func (s *Reads) InputsOf(ctx context.Context, runID string) ([]InputValue, error) {
	subject, err := authz.Require(ctx, authz.PermProvisioningPlan)
	if err != nil {
		return nil, err
	}
	r, err := s.k.getVisible(ctx, subject, runID)
	if err != nil {
		return nil, err
	}
	config, _, err := s.k.artifacts.Get(ctx, subject.OrganizationID, r.ConfigArtifactID)
	if err != nil {
		return nil, err
	}
	sealed, err := s.k.sensitiveValues(ctx, r)
	if err != nil {
		return nil, err
	}
	return s.k.catalog.Inputs(r.TemplateName, config, sealed)
}

// ListMine returns the newest runs the subject requested (a requester's landing page).
func (s *Reads) ListMine(ctx context.Context, limit int) ([]Run, error) {
	subject, err := authz.Require(ctx, authz.PermOrgRead)
	if err != nil {
		return nil, err
	}
	if limit <= 0 || limit > 200 {
		limit = 20
	}
	return s.k.list(ctx, listQuery{requestedBy: subject.UserID, order: "created_at DESC", limit: limit})
}

// History returns the audit events of run r (read through Get), oldest first: the
// gate timeline's evidence.
func (s *Reads) History(ctx context.Context, r Run) ([]audit.Event, error) {
	subject, err := authz.Require(ctx, authz.PermOrgRead)
	if err != nil {
		return nil, err
	}
	if r.OrganizationID != subject.OrganizationID {
		return nil, errs.ErrNotFound
	}
	return s.k.audit.OfTarget(ctx, r.OrganizationID, "run", r.ID)
}

// Artifact returns a decrypted artifact of run r (read through Get).
func (s *Reads) Artifact(ctx context.Context, r Run, id *string) ([]byte, error) {
	subject, err := authz.Require(ctx, authz.PermOrgRead)
	if err != nil {
		return nil, err
	}
	if id == nil || r.OrganizationID != subject.OrganizationID {
		return nil, errs.ErrNotFound
	}
	data, _, err := s.k.artifacts.Get(ctx, subject.OrganizationID, *id)
	return data, err
}

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
func (s *Reads) Review(ctx context.Context, r Run) (ReviewData, error) {
	subject, err := authz.Require(ctx, authz.PermOrgRead)
	if err != nil {
		return ReviewData{}, err
	}
	if r.OrganizationID != subject.OrganizationID || r.PlanJSONArtifactID == nil {
		return ReviewData{}, errs.ErrNotFound
	}
	var out ReviewData
	planJSON, err := s.k.classifiedPlan(ctx, r, &out.Classification)
	if err != nil {
		return ReviewData{}, err
	}
	if out.Doc, err = review.Load(planJSON); err != nil {
		return ReviewData{}, fmt.Errorf("reading plan JSON: %w", err)
	}
	if r.PolicyEvaluationID != nil {
		ev, overrides, err := s.k.policies.EvaluationWithOverrides(ctx, r.OrganizationID, *r.PolicyEvaluationID)
		if err != nil {
			return ReviewData{}, err
		}
		out.Evaluation, out.Overrides = &ev, overrides
	}
	return out, nil
}

// classifiedPlan reads run r's plan JSON as its gates judged it (a codification's is
// what it accepts into state) and classifies it into res with the template's facts (a
// template the catalog no longer offers: without its type facts). The review page and
// the decision's boundary record both read it here.
func (k *core) classifiedPlan(ctx context.Context, r Run, res *classify.Result) (planJSON []byte, err error) {
	if planJSON, _, err = k.artifacts.Get(ctx, r.OrganizationID, *r.PlanJSONArtifactID); err != nil {
		return nil, err
	}
	if planJSON, err = gatedPlan(r, planJSON); err != nil {
		return nil, err
	}
	facts, err := k.catalog.Facts(r.TemplateName)
	if err != nil {
		facts = TemplateFacts{}
	}
	if *res, err = classify.Classify(planJSON, facts.ClassifyOptions()); err != nil {
		return nil, fmt.Errorf("reading plan JSON: %w", err)
	}
	return planJSON, nil
}

// Gates reads what the run page's timeline shows of run r's plan gates (r read through
// Get): the stored policy evaluation and its overrides.
func (s *Reads) Gates(ctx context.Context, r Run) (Gates, error) {
	subject, err := authz.Require(ctx, authz.PermOrgRead)
	if err != nil {
		return Gates{}, err
	}
	if r.OrganizationID != subject.OrganizationID {
		return Gates{}, errs.ErrNotFound
	}
	if r.PolicyEvaluationID == nil {
		return Gates{}, nil
	}
	ev, overrides, err := s.k.policies.EvaluationWithOverrides(ctx, r.OrganizationID, *r.PolicyEvaluationID)
	if err != nil {
		return Gates{}, err
	}
	return Gates{Evaluation: &ev, Overrides: overrides}, nil
}

// Clock is the database clock now: pages that say who may decide judge escalations by
// it, as the decisions do.
func (s *Reads) Clock(ctx context.Context) (time.Time, error) { return s.k.now(ctx) }

// Gates is what the timeline shows of the plan gates beyond the run row: the stored
// policy evaluation (nil: none was recorded) and its overrides.
type Gates struct {
	Evaluation *policy.Evaluation
	Overrides  map[string]policy.Override
}

// Unfinished counts the runs of workspace workspaceID (of organization orgID) that have
// not finished, every kind: what archiving the workspace waits for. A hard policy block
// is finished (Run.Finished).
func (s *Reads) Unfinished(ctx context.Context, orgID, workspaceID string) (int64, error) {
	var open []State
	for _, st := range States {
		if !st.Terminal() {
			open = append(open, st)
		}
	}
	runs, err := s.k.store.list(ctx, listQuery{orgID: orgID, workspaceID: workspaceID, states: open, order: "number DESC"})
	if err != nil {
		return 0, err
	}
	var n int64
	for _, r := range runs {
		if !r.Finished() {
			n++
		}
	}
	return n, nil
}
