package pages

import (
	"context"
	"errors"

	"gantry/models/catalog"
	"gantry/models/errs"
	"gantry/models/promotion"
	"gantry/models/run"
	"gantry/models/workspace"
)

// PromotionRuns is what promoting needs (promotion.Service): where a workspace can go
// and from which run, and the promotion (the service checks the order, the template
// version, the fixed inputs and who may).
type PromotionRuns interface {
	PromotionOf(ctx context.Context, workspaceID string) (promotion.Promotable, error)
	Promote(ctx context.Context, req promotion.Request) (run.Run, error)
}

// Promotions builds the promotion form of a workspace and submits it.
type Promotions struct {
	Workspaces WorkspaceReader
	Runs       PromotionRuns
	Catalog    CatalogReader
}

// PromotionForm is the promotion form of a workspace: the source's inputs (sensitive ones
// typed again), or what was submitted with its problems; or why the workspace cannot be
// promoted.
type PromotionForm struct {
	Workspace workspace.View
	// Refusal says why there is nothing to promote ("": the form is drawn).
	Refusal string
	Source  promotion.Promotable
	// Template is the workspace's template (nil: the catalog no longer offers it).
	Template *catalog.Template
	// Submitted is what a refused promotion asked for, Errors its problems at their
	// fields, Blocked the fixed inputs it would have changed.
	Submitted *promotion.Request
	Errors    map[string]string
	Blocked   []promotion.Difference
}

// Form draws workspace id's promotion form. Only who may request runs draws one;
// another organization's or a hidden workspace is not found.
func (s Promotions) Form(ctx context.Context, id string) (PromotionForm, error) {
	ws, err := workspaceToChange(ctx, s.Workspaces, id)
	if err != nil {
		return PromotionForm{}, err
	}
	return s.form(ctx, ws)
}

// Promoted is what a submitted promotion came to: the run it requested, or the form to
// draw again.
type Promoted struct {
	Workspace workspace.View // the workspace promoted
	Run       run.Run
	// Refused is the form to draw again with what was typed (nil: the run was requested).
	Refused *PromotionForm
}

// Submit requests the promotion of workspace req.WorkspaceID. A refused promotion
// answers the form to draw again with what was typed: fixed inputs side by side, other
// problems at their fields.
func (s Promotions) Submit(ctx context.Context, req promotion.Request) (Promoted, error) {
	ws, err := workspaceToChange(ctx, s.Workspaces, req.WorkspaceID)
	if err != nil {
		return Promoted{}, err
	}
	req.WorkspaceID = ws.ID
	r, err := s.Runs.Promote(ctx, req)
	blocked, isBlocked := promotion.AsBlocked(err)
	v, invalid := errs.AsValidation(err)
	if !isBlocked && !invalid {
		return Promoted{Workspace: ws, Run: r}, err
	}
	form, err := s.form(ctx, ws)
	if err != nil {
		return Promoted{}, err
	}
	form.Submitted = &req
	if isBlocked {
		form.Blocked = blocked.Differences
	} else {
		form.Errors = v.Fields
	}
	return Promoted{Workspace: ws, Refused: &form}, nil
}

// form is workspace ws's promotion form as promoting it stands now.
func (s Promotions) form(ctx context.Context, ws workspace.View) (PromotionForm, error) {
	f := PromotionForm{Workspace: ws}
	src, err := s.Runs.PromotionOf(ctx, ws.ID)
	var explained *errs.Explained
	if errors.As(err, &explained) && errors.Is(err, errs.ErrConflict) {
		// The page is there; what it says is why there is nothing to promote.
		f.Refusal = explained.Message
		return f, nil
	}
	if err != nil {
		return PromotionForm{}, err
	}
	f.Source = src
	if e, err := s.Catalog.Get(ws.TemplateName); err == nil {
		f.Template = &e.Template
	}
	return f, nil
}
