package handlers

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"

	"github.com/labstack/echo/v4"

	"gantry/handlers/render"
	"gantry/models/errs"
	"gantry/models/promotion"
	"gantry/models/run"
	"gantry/views"
	"gantry/views/paths"
)

// PromotionRuns is what promoting needs (promotion.Service): where a workspace can go
// and from which run, and the promotion (the service checks the order, the template
// version, the fixed inputs and who may).
type PromotionRuns interface {
	PromotionOf(ctx context.Context, workspaceID string) (promotion.Promotable, error)
	Promote(ctx context.Context, req promotion.Request) (run.Run, error)
}

// Promotions serves the promotion of a workspace to the next environment.
type Promotions struct {
	Workspaces WorkspaceReader
	Runs       PromotionRuns
	Catalog    CatalogReader
}

// Register adds the promotion routes to g.
func (h Promotions) Register(g *echo.Group) {
	g.GET(paths.RouteWorkspacePromote, h.form)
	g.POST(paths.RouteWorkspacePromote, h.promote)
}

func (h Promotions) form(c echo.Context) error {
	return h.page(c, http.StatusOK, nil, nil, nil)
}

// page draws the promotion form: the source's inputs (sensitive ones typed again), or
// what was submitted with its problems; or why the workspace cannot be promoted.
func (h Promotions) page(c echo.Context, status int, submitted *promotion.Request, problems map[string]string, blocked []promotion.Difference) error {
	ctx := c.Request().Context()
	ws, err := workspaceToChange(ctx, h.Workspaces, c.Param("id"))
	if err != nil {
		return err
	}
	p := views.PromoteProps{WorkspaceID: ws.ID, Workspace: ws.Name, Environment: ws.EnvironmentName, Template: ws.TemplateName,
		TargetWorkspace: ws.Name, Values: map[string]string{}, Errors: problems}
	src, err := h.Runs.PromotionOf(ctx, ws.ID)
	var explained *errs.Explained
	if errors.As(err, &explained) && errors.Is(err, errs.ErrConflict) {
		// The page is there; what it says is why there is nothing to promote.
		p.Refusal = explained.Message
		if c.Request().Method == http.MethodPost {
			status = http.StatusConflict // a refused promotion: nothing was done
		}
		return render.Page(c, status, views.PromoteWorkspace(p))
	}
	if err != nil {
		return err
	}
	p.SourceRunID, p.SourceLabel, p.TemplateVersion = src.Source.ID, src.SourceLabel, src.Source.TemplateVersion
	for _, e := range src.Environments {
		p.Environments = append(p.Environments, views.EnvChoice{ID: e.ID, Name: e.Name, Tier: string(e.Tier),
			RequiresApproval: e.RequiresApproval, Restricted: e.Restricted})
	}
	p.EnvironmentID = src.Environments[0].ID // PromotionOf refuses a workspace with none
	fixed := map[string]bool{}
	for _, in := range src.Inputs {
		if in.Set && !in.Sensitive {
			p.Values["inputs."+in.Name] = unquote(in.Value)
		}
		fixed[in.Name] = !promotion.MayDiverge(in.Divergence)
	}
	if submitted != nil {
		p.EnvironmentID, p.TargetWorkspace = submitted.EnvironmentID, submitted.Workspace
		for k, v := range submitted.Inputs {
			p.Values["inputs."+k] = v
		}
	}
	if e, err := h.Catalog.Get(ws.TemplateName); err == nil {
		p.Fields, p.Values = inputFields(e.Template, p.Values)
		for i, in := range e.Template.Inputs {
			f := &p.Fields[i]
			f.Note = "May differ from " + ws.EnvironmentName + " (" + in.Divergence + ")."
			if fixed[in.Name] {
				f.Note = "Fixed: it stays as in " + ws.EnvironmentName + "; a promotion that changes it is refused."
			}
			if in.Sensitive {
				f.Note += " Sensitive: type it again (it is stored masked)."
			}
		}
	}
	for _, d := range blocked {
		p.Blocked = append(p.Blocked, views.DifferenceRow{Name: d.Name, Label: d.Label, Divergence: d.Divergence, Source: d.Source, Requested: d.Requested})
	}
	return render.Page(c, status, views.PromoteWorkspace(p))
}

// promote requests the promotion; a refusal comes back on the form with what was typed:
// fixed inputs side by side, other problems at their fields.
func (h Promotions) promote(c echo.Context) error {
	ctx := c.Request().Context()
	ws, err := workspaceToChange(ctx, h.Workspaces, c.Param("id"))
	if err != nil {
		return err
	}
	req, _, err := readRequest(c)
	if err != nil {
		return err
	}
	in := promotion.Request{WorkspaceID: ws.ID, EnvironmentID: req.EnvironmentID, Workspace: req.Workspace, Inputs: req.Inputs,
		NewWorkspace: req.NewWorkspace}
	r, err := h.Runs.Promote(ctx, in)
	if b, ok := promotion.AsBlocked(err); ok {
		return h.page(c, http.StatusUnprocessableEntity, &in, nil, b.Differences)
	}
	if v, ok := errs.AsValidation(err); ok {
		return h.page(c, http.StatusUnprocessableEntity, &in, v.Fields, nil)
	}
	if err != nil {
		return err
	}
	_ = render.Flash(c, "success", "Promotion of "+ws.Name+" requested as run "+r.Label()+": it passes every gate of its environment before anything is applied.")
	return render.Redirect(c, paths.Run(r.ID))
}

// unquote is an input's JSON value as a form field holds it (a string without quotes).
func unquote(v string) string {
	var s string
	if json.Unmarshal([]byte(v), &s) == nil {
		return s
	}
	return v
}
