package handlers

// The destroy of a workspace: a confirmation page restating what its state holds, and
// the request of a destroy run (the request form's own handlers are in requests.go).

import (
	"net/http"
	"strings"

	"github.com/labstack/echo/v4"

	"gantry/handlers/render"
	"gantry/models/pages"
	"gantry/models/run"
	"gantry/views"
	"gantry/views/paths"
)

// confirmDestroy asks before a workspace is destroyed: it restates every resource its
// state holds and what the destroy will need (the risk-3 path), and asks for the
// workspace's name.
func (h Requests) confirmDestroy(c echo.Context) error {
	f, err := h.Forms.Destroy(c.Request().Context(), c.Param("id"))
	if err != nil {
		return err
	}
	return render.Page(c, http.StatusOK, views.DestroyWorkspace(destroyProps(f)))
}

// destroy requests a destroy run of a workspace, once its name was typed (the read
// model asks the run service, whose floors make a destroy risk 3).
func (h Requests) destroy(c echo.Context) error {
	form, err := c.FormParams()
	if err != nil {
		return err
	}
	confirm := pages.DestroyConfirmation{Name: form.Get("confirm"), Sensitive: map[string]string{}}
	for key := range form {
		if name, ok := strings.CutPrefix(key, "inputs."); ok {
			confirm.Sensitive[name] = form.Get(key)
		}
	}
	r, refused, err := h.Forms.SubmitDestroy(c.Request().Context(), c.Param("id"), confirm)
	if err != nil {
		return err
	}
	if refused != nil {
		return render.Page(c, http.StatusUnprocessableEntity, views.DestroyWorkspace(destroyProps(*refused)))
	}
	_ = render.Flash(c, "success", "Destroy of "+strings.TrimSpace(confirm.Name)+" requested: once planned, it is decided by "+run.DestroyDeciders().Summary()+".")
	return render.Redirect(c, paths.Run(r.ID))
}

// destroyProps is the destroy form f as drawn.
func destroyProps(f pages.DestroyForm) views.DestroyProps {
	ws := f.Workspace
	p := views.DestroyProps{WorkspaceID: ws.ID, Workspace: ws.Name, Environment: ws.EnvironmentName, Template: ws.TemplateName,
		Errors: f.Errors, RiskClass: int(run.DestroyClass()), Deciders: run.DestroyDeciders().Summary()}
	for _, r := range f.Resources {
		p.Resources = append(p.Resources, views.ResourceRow{Address: r.Address, Type: r.Type, ID: r.ID})
	}
	for _, in := range f.Sensitive {
		p.Sensitive = append(p.Sensitive, views.InputField{Name: in.Name, Type: in.Type, Required: in.Required, Sensitive: true})
	}
	return p
}
