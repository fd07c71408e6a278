package handlers

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"net/http"
	"slices"
	"strings"

	"github.com/labstack/echo/v4"

	"gantry/handlers/render"
	"gantry/models/authz"
	"gantry/models/catalog"
	"gantry/models/environment"
	"gantry/models/errs"
	"gantry/models/review"
	"gantry/models/run"
	"gantry/models/workspace"
	"gantry/views"
	"gantry/views/paths"
)

// RunRequester validates and queues runs.
type RunRequester interface {
	Validate(ctx context.Context, req run.Request) (run.Validated, *workspace.Workspace, error)
	Request(ctx context.Context, req run.Request) (run.Run, error)
}

// RequestPreviewer says who decides and what a request costs before it is submitted.
type RequestPreviewer interface {
	Preview(ctx context.Context, req run.Request) (run.Preview, error)
}

// EnvironmentChooser lists the environments the subject may request runs in.
type EnvironmentChooser interface {
	Choices(ctx context.Context) ([]environment.Environment, error)
}

// WorkspaceRuns reads runs: one (another organization's or a hidden one is not
// found), and a workspace's, newest first.
type WorkspaceRuns interface {
	Get(ctx context.Context, id string) (run.Run, error)
	ListForWorkspace(ctx context.Context, workspaceID string, limit int) ([]run.Run, error)
}

// Requests serves the request form, its inline validation and its submission.
type Requests struct {
	Catalog      CatalogReader
	Runs         RunRequester
	Previews     RequestPreviewer
	Environments EnvironmentChooser
	// A change of a workspace starts from what it holds: its environment, name and the
	// inputs of its last applied run.
	Workspaces WorkspaceReader
	History    WorkspaceRuns
	// A destroy restates what the workspace's state holds.
	States WorkspaceStates
}

// Register adds the request routes to g.
func (h Requests) Register(g *echo.Group) {
	g.GET("/requests/new", h.new)
	g.POST(paths.ValidateRequest(), h.validate)
	g.POST(paths.PreviewRequest(), h.preview)
	g.POST(paths.Requests(), h.create)
	g.GET(paths.RouteWorkspaceDestroy, h.confirmDestroy)
	g.POST(paths.RouteWorkspaceDestroy, h.destroy)
}

func (h Requests) new(c echo.Context) error {
	if _, err := authz.Require(c.Request().Context(), authz.PermProvisioningPlan); err != nil {
		return err
	}
	e, err := h.Catalog.Get(c.QueryParam("template"))
	if err != nil {
		return err
	}
	values := map[string]string{}
	for _, in := range e.Template.Inputs {
		if in.Default != nil && !in.Sensitive {
			values["inputs."+in.Name] = fmt.Sprint(in.Default)
		}
	}
	req := run.Request{Kind: run.KindApply}
	switch {
	case c.QueryParam("from_run") != "":
		if req, err = h.resubmitOf(c.Request().Context(), e.Template, c.QueryParam("from_run"), values); err != nil {
			return err
		}
	case c.QueryParam("workspace") != "":
		if req, err = h.changeOf(c.Request().Context(), e.Template, c.QueryParam("workspace"), values); err != nil {
			return err
		}
	}
	return h.form(c, http.StatusOK, e, req, values, nil)
}

// changeOf starts a change of workspace id: its environment and name, and into values
// the inputs of its last applied run (never a sensitive one: those are stored masked,
// so the person types them again). Another organization's or a hidden workspace is not
// found; a workspace of another template is a bad request.
func (h Requests) changeOf(ctx context.Context, t catalog.Template, id string, values map[string]string) (run.Request, error) {
	ws, err := h.Workspaces.Get(ctx, id)
	if err != nil {
		return run.Request{}, err
	}
	if ws.TemplateName != t.Name {
		return run.Request{}, fmt.Errorf("workspace %s holds a %s, not a %s: %w", ws.Name, ws.TemplateName, t.Name, errs.ErrBadRequest)
	}
	applied, err := h.lastApplied(ctx, t, ws.ID)
	if err != nil {
		return run.Request{}, err
	}
	maps.Copy(values, applied)
	return run.Request{Kind: run.KindApply, EnvironmentID: ws.EnvironmentID, Workspace: ws.Name}, nil
}

// resubmitOf starts the request form from run id's request (a rejected plan, to edit
// and ask for again): its environment, workspace, kind and inputs (never a sensitive
// one). Another organization's or a hidden run is not found; another template's run a
// bad request.
func (h Requests) resubmitOf(ctx context.Context, t catalog.Template, id string, values map[string]string) (run.Request, error) {
	r, err := h.History.Get(ctx, id)
	if err != nil {
		return run.Request{}, err
	}
	if r.TemplateName != t.Name {
		return run.Request{}, fmt.Errorf("run %s is a %s, not a %s: %w", r.ID, r.TemplateName, t.Name, errs.ErrBadRequest)
	}
	ws, err := h.Workspaces.Get(ctx, r.WorkspaceID)
	if err != nil {
		return run.Request{}, err
	}
	if err := inputsOf(r, t, values); err != nil {
		return run.Request{}, err
	}
	return run.Request{Kind: r.Kind, EnvironmentID: r.EnvironmentID, Workspace: ws.Name}, nil
}

// inputsOf puts run r's inputs into values as form values, sensitive ones left out
// (they are stored masked).
func inputsOf(r run.Run, t catalog.Template, values map[string]string) error {
	var given map[string]any
	if err := json.Unmarshal(r.Inputs, &given); err != nil {
		return fmt.Errorf("reading the inputs of run %s: %w", r.ID, err)
	}
	for _, in := range t.Inputs {
		if v, ok := given[in.Name]; ok && !in.Sensitive {
			values["inputs."+in.Name] = fmt.Sprint(v)
		}
	}
	return nil
}

// lastApplied is the inputs of workspace id's last applied run, as form values
// ("inputs.<name>"), sensitive ones left out (they are stored masked); none when
// nothing was applied.
func (h Requests) lastApplied(ctx context.Context, t catalog.Template, id string) (map[string]string, error) {
	runs, err := h.History.ListForWorkspace(ctx, id, 50)
	if err != nil {
		return nil, err
	}
	values := map[string]string{}
	for _, r := range runs {
		if r.State == run.Succeeded && r.Kind == run.KindApply {
			return values, inputsOf(r, t, values)
		}
	}
	return values, nil
}

// inputFields are a template's inputs as form fields, and the values to draw in them:
// never a sensitive one (a form that comes back with errors would write a secret just
// typed into the page, beside what the page reflects; it is typed again).
func inputFields(t catalog.Template, values map[string]string) ([]views.InputField, map[string]string) {
	fields := make([]views.InputField, 0, len(t.Inputs))
	shown := make(map[string]string, len(values))
	for k, v := range values {
		shown[k] = v
	}
	for _, in := range t.Inputs {
		fields = append(fields, views.InputField{Name: in.Name, Label: in.Label, Type: in.Type, Integer: in.Integer, Required: in.Required,
			Enum: in.Enum, Min: in.Min, Max: in.Max, Pattern: in.Pattern, Help: in.Help, Sensitive: in.Sensitive})
		if in.Sensitive {
			delete(shown, "inputs."+in.Name)
		}
	}
	return fields, shown
}

// readRequest reads the form: inputs come as "inputs.<name>" fields; a checkbox sends
// "true" next to its hidden "false".
func readRequest(c echo.Context) (run.Request, map[string]string, error) {
	form, err := c.FormParams()
	if err != nil {
		return run.Request{}, nil, err
	}
	req := run.Request{EnvironmentID: form.Get("environment"), Workspace: form.Get("workspace"), Template: form.Get("template"),
		Kind: run.Kind(form.Get("kind")), Inputs: map[string]string{}, NewWorkspace: form.Get("new_workspace") == "true"}
	values := map[string]string{}
	for key, vals := range form {
		name, ok := strings.CutPrefix(key, "inputs.")
		if !ok || len(vals) == 0 {
			continue
		}
		v := vals[len(vals)-1]
		if slices.Contains(vals, "true") {
			v = "true"
		}
		req.Inputs[name], values[key] = v, v
	}
	return req, values, nil
}

func (h Requests) validate(c echo.Context) error {
	req, _, err := readRequest(c)
	if err != nil {
		return err
	}
	field := c.FormValue("_field")
	_, _, err = h.Runs.Validate(c.Request().Context(), req)
	msg := ""
	if v, ok := errs.AsValidation(err); ok {
		msg = v.Fields[field]
	} else if err != nil {
		return err
	}
	id := strings.Replace(field, "inputs.", "input-", 1)
	return render.Page(c, http.StatusOK, views.ErrorSlot(id, field, msg))
}

// preview answers the request form's live preview: who decides and the monthly cost,
// for the form as it stands (nothing is written).
func (h Requests) preview(c echo.Context) error {
	req, _, err := readRequest(c)
	if err != nil {
		return err
	}
	p, err := h.previewOf(c.Request().Context(), req)
	if err != nil {
		return err
	}
	return render.Page(c, http.StatusOK, views.RequestPreview(p))
}

// previewOf is req's preview in words.
func (h Requests) previewOf(ctx context.Context, req run.Request) (views.RequestPreviewProps, error) {
	pv, err := h.Previews.Preview(ctx, req)
	if err != nil {
		return views.RequestPreviewProps{}, err
	}
	p := views.RequestPreviewProps{DryRun: pv.DryRun, CostMissing: pv.CostMissing, Existing: pv.Existing}
	if pv.Floor != nil {
		p.Decider = pv.Floor.Decision.Summary()
		p.Risk = fmt.Sprintf("risk %d", pv.Floor.Class)
		if pv.Floor.Protected && pv.Floor.Class == 1 {
			p.Risk += " in a protected environment"
		}
		p.Because = pv.Floor.Rule.Description
	}
	if pv.Cost != nil {
		p.Cost, p.Unpriced = review.Money(pv.Cost.After), pv.Cost.Unpriced
		if pv.Cost.Delta != 0 {
			p.Delta = review.SignedMoney(pv.Cost.Delta)
		}
	}
	return p, nil
}

func (h Requests) create(c echo.Context) error {
	req, values, err := readRequest(c)
	if err != nil {
		return err
	}
	r, err := h.Runs.Request(c.Request().Context(), req)
	if v, ok := errs.AsValidation(err); ok {
		e, gerr := h.Catalog.Get(req.Template)
		if gerr != nil {
			// Unknown template: nothing to draw a form for; answer with the messages.
			return err
		}
		return h.form(c, http.StatusUnprocessableEntity, e, req, values, v.Fields)
	}
	if err != nil {
		return err
	}
	return render.Redirect(c, paths.Run(r.ID))
}

func (h Requests) form(c echo.Context, status int, e catalog.Entry, req run.Request, values, errors map[string]string) error {
	envs, err := h.Environments.Choices(c.Request().Context())
	if err != nil {
		return err
	}
	p := views.RequestProps{Template: e.Template.Name, TemplateTitle: e.Template.Title, EnvironmentID: req.EnvironmentID,
		Workspace: req.Workspace, Kind: string(req.Kind), Values: values, Errors: errors}
	for _, env := range envs {
		p.Environments = append(p.Environments, views.EnvChoice{ID: env.ID, Name: env.Name, Tier: string(env.Tier),
			RequiresApproval: env.RequiresApproval, Restricted: env.Restricted})
	}
	// The preview of the form as drawn: its template and the values in its fields
	// (defaults included).
	shown := req
	shown.Template, shown.Inputs = e.Template.Name, map[string]string{}
	for k, v := range values {
		if name, ok := strings.CutPrefix(k, "inputs."); ok {
			shown.Inputs[name] = v
		}
	}
	if p.Preview, err = h.previewOf(c.Request().Context(), shown); err != nil {
		return err
	}
	p.Fields, p.Values = inputFields(e.Template, values)
	return render.Page(c, status, views.RequestForm(p))
}
