package handlers

import (
	"context"
	"net/http"
	"slices"
	"strings"

	"github.com/labstack/echo/v4"

	"gantry/handlers/render"
	"gantry/models/catalog"
	"gantry/models/environment"
	"gantry/models/errs"
	"gantry/models/pages"
	"gantry/models/run"
	"gantry/models/workspace"
	"gantry/views"
	"gantry/views/paths"
)

// RunRequester validates and queues runs (run.Requests).
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

// RequestForms draws and submits the request forms (pages.Requests).
type RequestForms interface {
	Form(ctx context.Context, start pages.FormStart) (pages.RequestForm, error)
	Submit(ctx context.Context, req run.Request, values map[string]string) (run.Run, *pages.RequestForm, error)
	Request(ctx context.Context, req run.Request) (run.Run, error)
	Destroy(ctx context.Context, workspaceID string) (pages.DestroyForm, error)
	SubmitDestroy(ctx context.Context, workspaceID string, c pages.DestroyConfirmation) (run.Run, *pages.DestroyForm, error)
	Change(ctx context.Context, workspaceID string) (pages.ChangeForm, error)
	PreviewChange(ctx context.Context, workspaceID string, req run.Request) (pages.ChangePreview, error)
	SubmitChange(ctx context.Context, workspaceID string, req run.Request, values map[string]string) (run.Run, *pages.ChangeForm, error)
}

// Requests serves the request form, its inline validation and preview, its submission,
// and a workspace's destroy.
type Requests struct {
	Forms    RequestForms
	Runs     RunRequester
	Previews RequestPreviewer
}

// Register adds the request routes to g.
func (h Requests) Register(g *echo.Group) {
	g.GET("/requests/new", h.new)
	g.POST(paths.ValidateRequest(), h.validate)
	g.POST(paths.PreviewRequest(), h.preview)
	g.POST(paths.Requests(), h.create)
	g.GET(paths.RouteWorkspaceChange, h.change)
	g.POST(paths.RouteWorkspaceChange, h.submitChange)
	g.POST(paths.RouteWorkspaceChangePreview, h.previewChange)
	g.GET(paths.RouteWorkspaceDestroy, h.confirmDestroy)
	g.POST(paths.RouteWorkspaceDestroy, h.destroy)
}

func (h Requests) new(c echo.Context) error {
	// A change of a workspace has its own page (older links asked this one).
	if ws := c.QueryParam("workspace"); ws != "" {
		return c.Redirect(http.StatusSeeOther, paths.ChangeWorkspace(c.QueryParam("template"), ws))
	}
	f, err := h.Forms.Form(c.Request().Context(), pages.FormStart{Template: c.QueryParam("template"), FromRun: c.QueryParam("from_run")})
	if err != nil {
		return err
	}
	return render.Page(c, http.StatusOK, views.RequestForm(requestProps(f)))
}

// inputFields are a template's inputs as form fields, and the values to draw in them:
// never a sensitive one (a form that comes back with errors would write a secret just
// typed into the page, beside what the page reflects; it is typed again).
// formatText is a pattern in words for a form's hint ("" for none).
func formatText(pattern string) string {
	if pattern == "" {
		return ""
	}
	return catalog.PatternInWords(pattern)
}

func inputFields(t catalog.Template, values map[string]string) ([]views.InputField, map[string]string) {
	fields := make([]views.InputField, 0, len(t.Inputs))
	shown := make(map[string]string, len(values))
	for k, v := range values {
		shown[k] = v
	}
	for _, in := range t.Inputs {
		fields = append(fields, views.InputField{Name: in.Name, Label: in.Label, Type: in.Type, Integer: in.Integer, Required: in.Required,
			Enum: in.Enum, Min: in.Min, Max: in.Max, Format: formatText(in.Pattern), Help: in.Help, Sensitive: in.Sensitive})
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
		Kind: run.Kind(form.Get("kind")), Inputs: map[string]string{}, NewWorkspace: form.Get("new_workspace") == "true",
		Note: run.Note{Reason: form.Get("reason"), Ticket: form.Get("ticket")}}
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
	pv, err := h.Previews.Preview(c.Request().Context(), req)
	if err != nil {
		return err
	}
	return render.Page(c, http.StatusOK, views.RequestPreview(previewProps(pv)))
}

func (h Requests) create(c echo.Context) error {
	req, values, err := readRequest(c)
	if err != nil {
		return err
	}
	r, refused, err := h.Forms.Submit(c.Request().Context(), req, values)
	if err != nil {
		return err
	}
	if refused != nil {
		return render.Page(c, http.StatusUnprocessableEntity, views.RequestForm(requestProps(*refused)))
	}
	return render.Redirect(c, paths.Run(r.ID))
}

// requestProps is the request form f as drawn.
func requestProps(f pages.RequestForm) views.RequestProps {
	p := views.RequestProps{Template: f.Template.Name, TemplateTitle: f.Template.Title, EnvironmentID: f.Request.EnvironmentID,
		Workspace: f.Request.Workspace, Kind: string(f.Request.Kind), Errors: f.Errors, Preview: previewProps(f.Preview),
		Reason: f.Request.Note.Reason, Ticket: f.Request.Note.Ticket, ReasonMax: run.MaxRequestReason, TicketMax: run.MaxRequestTicket}
	for _, env := range f.Environments {
		p.Environments = append(p.Environments, views.EnvChoice{ID: env.ID, Name: env.Name, Tier: string(env.Tier),
			RequiresApproval: env.RequiresApproval, Restricted: env.Restricted})
	}
	p.Fields, p.Values = inputFields(f.Template, f.Values)
	return p
}
