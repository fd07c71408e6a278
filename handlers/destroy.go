package handlers

// The destroy of a workspace: a confirmation page restating what its state holds, and
// the request of a destroy run (the request form's own handlers are in requests.go).

import (
	"context"
	"net/http"
	"strings"

	"github.com/labstack/echo/v4"

	"gantry/handlers/render"
	"gantry/models/errs"
	"gantry/models/run"
	"gantry/models/workspace"
	"gantry/views"
	"gantry/views/paths"
)

// confirmDestroy asks before a workspace is destroyed: it restates every resource its
// state holds and what the destroy will need (the risk-3 path), and asks for the
// workspace's name.
func (h Requests) confirmDestroy(c echo.Context) error {
	return h.destroyPage(c, http.StatusOK, nil)
}

func (h Requests) destroyPage(c echo.Context, status int, problems map[string]string) error {
	ctx := c.Request().Context()
	ws, err := workspaceToChange(ctx, h.Workspaces, c.Param("id"))
	if err != nil {
		return err
	}
	st, err := h.States.OfWorkspace(ctx, ws.ID, 1)
	if err != nil {
		return err
	}
	p := views.DestroyProps{WorkspaceID: ws.ID, Workspace: ws.Name, Environment: ws.EnvironmentName, Template: ws.TemplateName,
		Errors: problems, RiskClass: int(run.DestroyClass()), Deciders: run.DestroyDeciders().Summary()}
	for _, r := range st.Resources {
		p.Resources = append(p.Resources, views.ResourceRow{Address: r.Address, Type: r.Type, ID: r.ID})
	}
	if e, err := h.Catalog.Get(ws.TemplateName); err == nil {
		for _, in := range e.Template.Inputs {
			if in.Sensitive {
				p.Sensitive = append(p.Sensitive, views.InputField{Name: in.Name, Type: in.Type, Required: in.Required, Sensitive: true})
			}
		}
	}
	return render.Page(c, status, views.DestroyWorkspace(p))
}

// destroy requests a destroy run of a workspace, once its name was typed: with the
// inputs of its last applied run (and any sensitive ones typed again), through the
// same service as every request (its floors make a destroy risk 3).
func (h Requests) destroy(c echo.Context) error {
	ctx := c.Request().Context()
	ws, err := workspaceToChange(ctx, h.Workspaces, c.Param("id"))
	if err != nil {
		return err
	}
	if strings.TrimSpace(c.FormValue("confirm")) != ws.Name {
		return h.destroyPage(c, http.StatusUnprocessableEntity, map[string]string{"confirm": "Type the workspace's name, " + ws.Name + ", to confirm."})
	}
	req, err := h.destroyRequest(ctx, ws, func(name string) string { return c.FormValue("inputs." + name) })
	if err != nil {
		return err
	}
	r, err := h.Runs.Request(ctx, req)
	if v, ok := errs.AsValidation(err); ok {
		return h.destroyPage(c, http.StatusUnprocessableEntity, v.Fields)
	}
	if err != nil {
		return err
	}
	_ = render.Flash(c, "success", "Destroy of "+ws.Name+" requested: once planned, it is decided by "+run.DestroyDeciders().Summary()+".")
	return render.Redirect(c, paths.Run(r.ID))
}

// destroyRequest is the request of a destroy run of workspace ws: the inputs of its last
// applied run, its sensitive ones as sensitive gives them (they are never stored
// readable, so the person types them again).
func (h Requests) destroyRequest(ctx context.Context, ws workspace.View, sensitive func(name string) string) (run.Request, error) {
	e, err := h.Catalog.Get(ws.TemplateName)
	if err != nil {
		return run.Request{}, err
	}
	values, err := h.lastApplied(ctx, e.Template, ws.ID)
	if err != nil {
		return run.Request{}, err
	}
	req := run.Request{EnvironmentID: ws.EnvironmentID, Workspace: ws.Name, Template: ws.TemplateName, Kind: run.KindDestroy,
		Inputs: map[string]string{}}
	for key, v := range values {
		req.Inputs[strings.TrimPrefix(key, "inputs.")] = v
	}
	for _, in := range e.Template.Inputs {
		if in.Sensitive {
			req.Inputs[in.Name] = sensitive(in.Name)
		}
	}
	return req, nil
}
