package handlers

import (
	"context"
	"encoding/json"
	"net/http"

	"github.com/labstack/echo/v4"

	"gantry/handlers/render"
	"gantry/models/catalog"
	"gantry/models/pages"
	"gantry/models/promotion"
	"gantry/views"
	"gantry/views/paths"
)

// PromotionForms draws and submits the promotion form (pages.Promotions).
type PromotionForms interface {
	Form(ctx context.Context, workspaceID string) (pages.PromotionForm, error)
	Submit(ctx context.Context, req promotion.Request) (pages.Promoted, error)
}

// Promotions serves the promotion of a workspace to the next environment.
type Promotions struct {
	Forms PromotionForms
}

// Register adds the promotion routes to g.
func (h Promotions) Register(g *echo.Group) {
	g.GET(paths.RouteWorkspacePromote, h.form)
	g.POST(paths.RouteWorkspacePromote, h.promote)
}

func (h Promotions) form(c echo.Context) error {
	f, err := h.Forms.Form(c.Request().Context(), c.Param("id"))
	if err != nil {
		return err
	}
	return render.Page(c, http.StatusOK, views.PromoteWorkspace(promoteProps(f)))
}

// promote requests the promotion; a refusal comes back on the form with what was typed:
// fixed inputs side by side, other problems at their fields.
func (h Promotions) promote(c echo.Context) error {
	req, _, err := readRequest(c)
	if err != nil {
		return err
	}
	out, err := h.Forms.Submit(c.Request().Context(), promotion.Request{WorkspaceID: c.Param("id"), EnvironmentID: req.EnvironmentID,
		Workspace: req.Workspace, Inputs: req.Inputs, NewWorkspace: req.NewWorkspace})
	if err != nil {
		return err
	}
	if refused := out.Refused; refused != nil {
		status := http.StatusUnprocessableEntity
		if refused.Refusal != "" {
			status = http.StatusConflict // nothing to promote any more: nothing was done
		}
		return render.Page(c, status, views.PromoteWorkspace(promoteProps(*refused)))
	}
	_ = render.Flash(c, "success", "Promotion of "+out.Workspace.Name+" requested as run "+out.Run.Label()+
		": it passes every gate of its environment before anything is applied.")
	return render.Redirect(c, paths.Run(out.Run.ID))
}

// promoteProps is the promotion form f as drawn.
func promoteProps(f pages.PromotionForm) views.PromoteProps {
	ws, src := f.Workspace, f.Source
	p := views.PromoteProps{WorkspaceID: ws.ID, Workspace: ws.Name, Environment: ws.EnvironmentName, Template: ws.TemplateName,
		TargetWorkspace: ws.Name, Values: map[string]string{}, Errors: f.Errors, Refusal: f.Refusal}
	if f.Refusal != "" {
		return p
	}
	p.SourceRunID, p.SourceLabel, p.TemplateVersion = src.Source.ID, src.SourceLabel, src.Source.TemplateVersion
	for _, e := range src.Environments {
		p.Environments = append(p.Environments, views.EnvChoice{ID: e.ID, Name: e.Name, Tier: string(e.Tier),
			RequiresApproval: e.RequiresApproval, Restricted: e.Restricted})
	}
	p.EnvironmentID = src.Environments[0].ID // PromotionOf refuses a workspace with none
	for _, in := range src.Inputs {
		if in.Set && !in.Sensitive {
			p.Values["inputs."+in.Name] = unquote(in.Value)
		}
	}
	if f.Submitted != nil {
		p.EnvironmentID, p.TargetWorkspace = f.Submitted.EnvironmentID, f.Submitted.Workspace
		for k, v := range f.Submitted.Inputs {
			if !fixedInput(src, k) { // a fixed one is drawn read-only, as the source has it
				p.Values["inputs."+k] = v
			}
		}
	}
	if f.Template != nil {
		p.Fields, p.Values = promotionFields(*f.Template, src, ws.EnvironmentName, p.Values)
	}
	for _, d := range f.Blocked {
		p.Blocked = append(p.Blocked, views.DifferenceRow{Name: d.Name, Label: d.Label, Divergence: d.Divergence, Source: d.Source, Requested: d.Requested})
	}
	return p
}

// promotionFields are template t's inputs as the promotion form's fields, each saying
// whether it may differ from the source's environment env, and the values to draw in
// them (never a sensitive one).
func promotionFields(t catalog.Template, src promotion.Promotable, env string, values map[string]string) ([]views.InputField, map[string]string) {
	fixed := map[string]bool{}
	for _, in := range src.Inputs {
		fixed[in.Name] = !promotion.MayDiverge(in.Divergence)
	}
	fields, shown := inputFields(t, values)
	for i, in := range t.Inputs {
		f := &fields[i]
		f.Note = "May differ from " + env + " (" + in.Divergence + ")."
		if fixed[in.Name] {
			f.Note, f.Fixed = "Fixed: it stays as in "+env+"; a promotion cannot change it.", true
		}
		if in.Sensitive {
			f.Note += " Sensitive: type it again (it is stored masked)."
		}
	}
	return fields, shown
}

// fixedInput reports whether input name of the source may not differ in a promotion.
func fixedInput(src promotion.Promotable, name string) bool {
	for _, in := range src.Inputs {
		if in.Name == name {
			return !promotion.MayDiverge(in.Divergence)
		}
	}
	return false
}

// unquote is an input's JSON value as a form field holds it (a string without quotes).
func unquote(v string) string {
	var s string
	if json.Unmarshal([]byte(v), &s) == nil {
		return s
	}
	return v
}
