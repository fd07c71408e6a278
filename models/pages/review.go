package pages

import (
	"context"
	"fmt"
	"slices"

	"gantry/models/classify"
	"gantry/models/errs"
	"gantry/models/risk"
	"gantry/models/rollback"
	"gantry/models/rollback/boundary"
	"gantry/models/run"
	"gantry/models/workspace"
)

// PlanReviews reads a run's plan for review, and how each resource it replaces or
// destroys comes back (run.Reads).
type PlanReviews interface {
	Review(ctx context.Context, r run.Run) (run.ReviewData, error)
	Boundary(ctx context.Context, r run.Run, res classify.Result) (boundary.Review, error)
	// IfApplied is the risk a dry run's change would carry if applied (nil for any
	// other run).
	IfApplied(ctx context.Context, r run.Run, res classify.Result) (*risk.Assessment, error)
}

// RollbackReviews say what a rollback's plan cannot bring back (rollback.Service; nil
// for a run that is no rollback).
type RollbackReviews interface {
	ReviewOf(ctx context.Context, r run.Run, res classify.Result) (*rollback.Review, error)
}

// RunDecider takes the decisions on a run and says what the person may do to it
// (run.Decisions).
type RunDecider interface {
	Approve(ctx context.Context, id string, in run.Approval) (run.Run, error)
	Reject(ctx context.Context, id string, ev run.Evidence, reason string) (run.Run, error)
	Override(ctx context.Context, id string, ev run.Evidence, ruleID, ruleVersion, reason string) (run.Run, error)
	Cancel(ctx context.Context, id string, c run.Cancellation) (run.Run, error)
	Recover(ctx context.Context, id, reason string) (run.Run, error)
	PlanAgain(ctx context.Context, id string) (run.Run, error)
	Permissions(ctx context.Context, r run.Run) (run.Permissions, error)
}

// Reviews builds the plan review page and takes the decisions made on it.
type Reviews struct {
	Runs       ReviewRuns
	Decisions  RunDecider
	Plans      PlanReviews
	Workspaces WorkspaceReader
	Rollbacks  RollbackReviews
	Inbox      RunInbox
}

// ReviewPage is the plan review page: the run, its workspace, what the reader may
// decide, the plan read once (classification, attribute diffs, policy results), the
// rollback boundary of each resource it replaces or destroys (the approval's audit event
// records the same) and, for a rollback, what its plan cannot bring back.
type ReviewPage struct {
	Run         run.Run
	Workspace   workspace.View
	Permissions run.Permissions
	Plan        run.ReviewData
	Boundary    boundary.Review
	// IfApplied is the risk a dry run's change would carry if applied (nil for any
	// other run, or when it cannot be known).
	IfApplied *risk.Assessment
	Rollback  *rollback.Review
	// WhoWhy is who asked for the run and why, and its inputs against the last apply.
	WhoWhy WhoWhy
	// Block is what stops a POLICY_BLOCKED run (nil: it is not blocked by a policy).
	Block *Block
	// Refused is a decision refused at the decision form's fields: the review page is
	// drawn again with its messages and what was typed.
	Refused *Decision
	Errors  map[string]string
}

// Page reads run id's review page. Another organization's or a hidden run is not
// found, and so is a run without a plan yet.
func (s Reviews) Page(ctx context.Context, id string) (ReviewPage, error) {
	r, err := s.Runs.Get(ctx, id)
	if err != nil {
		return ReviewPage{}, err
	}
	if r.PlanJSONArtifactID == nil {
		return ReviewPage{}, errs.Explain(errs.ErrNotFound, "This run has no plan to review yet: poll it until it is planned.")
	}
	p := ReviewPage{Run: r}
	if p.Permissions, err = s.Decisions.Permissions(ctx, r); err != nil {
		return ReviewPage{}, err
	}
	if p.Plan, err = s.Plans.Review(ctx, r); err != nil {
		return ReviewPage{}, err
	}
	p.Block = BlockOf(r, p.Plan.Evaluation, p.Plan.Overrides, p.Permissions)
	if p.Boundary, err = s.Plans.Boundary(ctx, r, p.Plan.Classification); err != nil {
		return ReviewPage{}, err
	}
	if p.IfApplied, err = s.Plans.IfApplied(ctx, r, p.Plan.Classification); err != nil {
		return ReviewPage{}, err
	}
	if p.Workspace, err = s.Workspaces.Get(ctx, r.WorkspaceID); err != nil {
		return ReviewPage{}, err
	}
	if p.Rollback, err = s.Rollbacks.ReviewOf(ctx, r, p.Plan.Classification); err != nil {
		return ReviewPage{}, err
	}
	if p.WhoWhy, err = whoWhy(ctx, s.Runs, r); err != nil {
		return ReviewPage{}, err
	}
	return p, nil
}

// Decision is one decision on a run: the action, the evidence the review page showed
// (approve, reject, override), the typed confirmation and reason, and the rule an
// override is for.
type Decision struct {
	Action              run.Action
	Evidence            run.Evidence
	Confirm, Reason     string
	RuleID, RuleVersion string
	// Redraw: a refusal at the decision form's fields answers the review page to draw
	// again (a page's form; the API wants the messages alone).
	Redraw bool
	// Problems are what reading the form refused (its evidence fields): the decision is
	// refused with them, unmade.
	Problems *errs.Validation
}

// Decided is what a decision came to.
type Decided struct {
	// Run is the run as decided, or the new run planning again made.
	Run run.Run
	// Workspace names the decided run's workspace (approve, reject).
	Workspace string
	// Next is the next run waiting for the person, who decided one (approve, reject).
	Next *RunLine
	// Refused is the review page to draw again for a refusal at the form's fields.
	Refused *ReviewPage
}

// Destructive reports whether approving run r destroys or replaces something: its plan
// deletes or replaces a resource, or it is a destroy run. The review's approve control
// then restates those counts in a danger style; a plan that only creates or changes in
// place keeps the plain one.
func Destructive(r run.Run) bool {
	return r.PlanSummary.Delete > 0 || r.PlanSummary.Replace > 0 || r.Kind == run.KindDestroy
}

// formActions are the decisions made on the review page's forms.
var formActions = []run.Action{run.ActionApprove, run.ActionReject, run.ActionOverride}

// Decide takes decision d on run id: the service decides and checks everything (a
// decision on a run that moved on, or on other evidence than the run carries, is a
// conflict).
func (s Reviews) Decide(ctx context.Context, id string, d Decision) (Decided, error) {
	var out Decided
	var err error
	if d.Problems != nil {
		err = d.Problems
	} else {
		out, err = s.decide(ctx, id, d)
	}
	if v, ok := errs.AsValidation(err); ok && d.Redraw && onDecisionForm(d.Action, v) {
		page, perr := s.Page(ctx, id)
		if perr != nil {
			return Decided{}, err
		}
		page.Refused, page.Errors = &d, v.Fields
		return Decided{Refused: &page}, nil
	}
	if err != nil || (d.Action != run.ActionApprove && d.Action != run.ActionReject) {
		return out, err
	}
	return s.named(ctx, out)
}

// decide makes the service call of decision d.
func (s Reviews) decide(ctx context.Context, id string, d Decision) (Decided, error) {
	var out Decided
	var err error
	switch d.Action {
	case run.ActionApprove:
		out.Run, err = s.Decisions.Approve(ctx, id, run.Approval{Evidence: d.Evidence, Confirm: d.Confirm, Reason: d.Reason})
	case run.ActionReject:
		out.Run, err = s.Decisions.Reject(ctx, id, d.Evidence, d.Reason)
	case run.ActionOverride:
		out.Run, err = s.Decisions.Override(ctx, id, d.Evidence, d.RuleID, d.RuleVersion, d.Reason)
	case run.ActionCancel:
		out.Run, err = s.Decisions.Cancel(ctx, id, run.Cancellation{Reason: d.Reason, Confirmed: d.Confirm == "yes"})
	case run.ActionRecover:
		out.Run, err = s.Decisions.Recover(ctx, id, d.Reason)
	case run.ActionPlanAgain:
		// The new run as stored, with what the database filled in (the API answers it).
		if out.Run, err = s.Decisions.PlanAgain(ctx, id); err == nil {
			out.Run, err = s.Runs.Get(ctx, out.Run.ID)
		}
	default:
		return Decided{}, fmt.Errorf("decision %q: %w", d.Action, errs.ErrNotFound)
	}
	return out, err
}

// named fills in the decided run's workspace and the next run waiting for the person.
func (s Reviews) named(ctx context.Context, out Decided) (Decided, error) {
	ws, err := s.Workspaces.Get(ctx, out.Run.WorkspaceID)
	if err != nil {
		return Decided{}, err
	}
	out.Workspace = ws.Name
	next, err := firstForYou(ctx, s.Inbox, 2)
	if err != nil {
		return Decided{}, err
	}
	for _, e := range next {
		if e.ID == out.Run.ID {
			continue
		}
		nws, err := s.Workspaces.Get(ctx, e.WorkspaceID)
		if err != nil {
			return Decided{}, err
		}
		out.Next = &RunLine{Run: e.Run, Workspace: nws}
		break
	}
	return out, nil
}

// onDecisionForm reports whether v's messages belong at the fields of the review page's
// decision forms (then the page is drawn again with them); any other refusal (a missing
// idempotency key, say) goes to the error page.
func onDecisionForm(action run.Action, v *errs.Validation) bool {
	if !slices.Contains(formActions, action) {
		return false
	}
	for f := range v.Fields {
		if f != "confirm" && f != "reason" && f != "evidence" {
			return false
		}
	}
	return true
}

// CancelPage asks before cancelling a run.
type CancelPage struct {
	Run       run.Run
	Workspace workspace.View
}

// ConfirmCancel reads what cancelling run id asks about; who may not cancel it is
// refused with the rules' reason.
func (s Reviews) ConfirmCancel(ctx context.Context, id string) (CancelPage, error) {
	r, err := s.Runs.Get(ctx, id)
	if err != nil {
		return CancelPage{}, err
	}
	perms, err := s.Decisions.Permissions(ctx, r)
	if err != nil {
		return CancelPage{}, err
	}
	if !perms.Cancel.Allowed() {
		return CancelPage{}, perms.Cancel.Err()
	}
	ws, err := s.Workspaces.Get(ctx, r.WorkspaceID)
	if err != nil {
		return CancelPage{}, err
	}
	return CancelPage{Run: r, Workspace: ws}, nil
}
