package pages

import (
	"context"
	"fmt"
	"strconv"
	"strings"

	"gantry/models/catalog"
	"gantry/models/errs"
	"gantry/models/run"
	"gantry/models/workspace"
)

// ChangeForm is the change of one workspace: the request form with the workspace and
// its environment fixed, filled in with the inputs of its last applied run, which each
// input is shown against ("was → now").
type ChangeForm struct {
	Workspace workspace.View
	RequestForm
	// Was are the inputs of the workspace's last applied run ("inputs.<name>"), never
	// a sensitive one; empty when nothing was applied.
	Was map[string]string
	// Applied: the workspace has an applied run to change from.
	Applied bool
}

// ChangePreview is the change form's live preview: the request's, and each input
// against what the workspace holds.
type ChangePreview struct {
	Preview run.Preview
	Inputs  []InputChange
	Applied bool
}

// InputChange is one input of a change: what the last applied run gave it and what the
// form gives it now.
type InputChange struct {
	Input catalog.Input
	// Was is "" when the input had no value (or is sensitive: stored masked, unknown).
	Was, Now string
	Changed  bool
	// Fixed: the manifest marks the input fixed (divergence fixed): the resources were
	// made with it, and changing it may replace them.
	Fixed bool
}

// Change draws the change form of workspace id: only who may request runs draws one;
// another organization's or a hidden workspace is not found.
func (s Requests) Change(ctx context.Context, id string) (ChangeForm, error) {
	ws, err := workspaceToChange(ctx, s.Workspaces, id)
	if err != nil {
		return ChangeForm{}, err
	}
	e, err := s.Catalog.Get(ws.TemplateName)
	if err != nil {
		return ChangeForm{}, err
	}
	was, applied, err := s.applied(ctx, e.Template, ws.ID)
	if err != nil {
		return ChangeForm{}, err
	}
	values := map[string]string{}
	for _, in := range e.Template.Inputs {
		if in.Default != nil && !in.Sensitive {
			values["inputs."+in.Name] = fmt.Sprint(in.Default)
		}
	}
	for k, v := range was {
		values[k] = v
	}
	req := run.Request{Kind: run.KindApply, EnvironmentID: ws.EnvironmentID, Workspace: ws.Name}
	f, err := s.form(ctx, e.Template, req, values, nil)
	if err != nil {
		return ChangeForm{}, err
	}
	return ChangeForm{Workspace: ws, RequestForm: f, Was: was, Applied: applied}, nil
}

// PreviewChange is the live preview of req as a change of workspace id: refused (a bad
// request) when it names another workspace, environment or template.
func (s Requests) PreviewChange(ctx context.Context, id string, req run.Request) (ChangePreview, error) {
	ws, t, err := s.changeTarget(ctx, id, req)
	if err != nil {
		return ChangePreview{}, err
	}
	was, applied, err := s.applied(ctx, t, ws.ID)
	if err != nil {
		return ChangePreview{}, err
	}
	pv, err := s.Previews.Preview(ctx, req)
	if err != nil {
		return ChangePreview{}, err
	}
	return ChangePreview{Preview: pv, Inputs: InputChanges(t, was, req.Inputs), Applied: applied}, nil
}

// SubmitChange requests req as a change of workspace id (values are the form's fields
// as sent): refused (a bad request) when it names another workspace, environment or
// template; a request refused at its fields answers the change form to draw again.
func (s Requests) SubmitChange(ctx context.Context, id string, req run.Request, values map[string]string) (run.Run, *ChangeForm, error) {
	ws, t, err := s.changeTarget(ctx, id, req)
	if err != nil {
		return run.Run{}, nil, err
	}
	r, err := s.Runs.Request(ctx, req)
	v, refused := errs.AsValidation(err)
	if !refused {
		return r, nil, err
	}
	was, applied, err := s.applied(ctx, t, ws.ID)
	if err != nil {
		return run.Run{}, nil, err
	}
	f, err := s.form(ctx, t, req, values, v.Fields)
	if err != nil {
		return run.Run{}, nil, err
	}
	return run.Run{}, &ChangeForm{Workspace: ws, RequestForm: f, Was: was, Applied: applied}, nil
}

// changeTarget reads workspace id for a change as req asks for it: the change route
// fixes the workspace, its environment and its template, so a request naming others
// is refused rather than sent somewhere the page did not show.
func (s Requests) changeTarget(ctx context.Context, id string, req run.Request) (workspace.View, catalog.Template, error) {
	ws, err := workspaceToChange(ctx, s.Workspaces, id)
	if err != nil {
		return workspace.View{}, catalog.Template{}, err
	}
	switch {
	case req.EnvironmentID != ws.EnvironmentID:
		return workspace.View{}, catalog.Template{}, errs.Explain(errs.ErrBadRequest,
			"A change stays in its workspace's environment ("+ws.EnvironmentName+"): promote the workspace to take it to another.")
	case req.Workspace != ws.Name:
		return workspace.View{}, catalog.Template{}, errs.Explain(errs.ErrBadRequest,
			"A change stays in its workspace ("+ws.Name+"): request a new workspace from the catalog instead.")
	case req.Template != ws.TemplateName:
		return workspace.View{}, catalog.Template{}, errs.Explain(errs.ErrBadRequest,
			"A change keeps its workspace's template ("+ws.TemplateName+").")
	}
	e, err := s.Catalog.Get(ws.TemplateName)
	if err != nil {
		return workspace.View{}, catalog.Template{}, err
	}
	return ws, e.Template, nil
}

// applied is the inputs of workspace id's last applied run as form values, and
// whether there is one.
func (s Requests) applied(ctx context.Context, t catalog.Template, id string) (map[string]string, bool, error) {
	runs, err := s.History.ListForWorkspace(ctx, id, 50)
	if err != nil {
		return nil, false, err
	}
	values := map[string]string{}
	for _, r := range runs {
		if r.State == run.Succeeded && r.Kind == run.KindApply {
			return values, true, inputsOf(r, t, values)
		}
	}
	return values, false, nil
}

// InputChanges is each input of template t, what it was (was: form values
// "inputs.<name>") and what it is now (now: by input name), in the manifest's order.
// A sensitive input is never compared (its stored value is masked): it shows as
// unchanged with neither value.
func InputChanges(t catalog.Template, was, now map[string]string) []InputChange {
	out := make([]InputChange, 0, len(t.Inputs))
	for _, in := range t.Inputs {
		c := InputChange{Input: in, Fixed: in.Divergence == catalog.DivergenceFixed}
		if !in.Sensitive {
			c.Was, c.Now = was["inputs."+in.Name], now[in.Name]
			c.Changed = !sameValue(in, c.Was, c.Now)
		}
		out = append(out, c)
	}
	return out
}

// sameValue compares two form values of input in: numbers by value ("30" and "30.0"),
// text as typed after trimming.
func sameValue(in catalog.Input, a, b string) bool {
	a, b = strings.TrimSpace(a), strings.TrimSpace(b)
	if in.Type == catalog.TypeNumber {
		x, errA := strconv.ParseFloat(a, 64)
		y, errB := strconv.ParseFloat(b, 64)
		if errA == nil && errB == nil {
			return x == y
		}
	}
	return a == b
}
