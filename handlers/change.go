package handlers

import (
	"cmp"
	"net/http"
	"strings"

	"github.com/labstack/echo/v4"

	"gantry/handlers/render"
	"gantry/models/catalog"
	"gantry/models/pages"
	"gantry/views"
	"gantry/views/paths"
)

// A change of a workspace: its own page with the workspace and environment fixed, the
// inputs of its last applied run, and a preview that shows each input was → now with
// what the change would replace.

func (h Requests) change(c echo.Context) error {
	f, err := h.Forms.Change(c.Request().Context(), c.Param("id"))
	if err != nil {
		return err
	}
	return render.Page(c, http.StatusOK, views.ChangeForm(changeProps(f)))
}

// previewChange answers the change form's live preview (nothing is written); a request
// naming another workspace or environment is refused.
func (h Requests) previewChange(c echo.Context) error {
	req, _, err := readRequest(c)
	if err != nil {
		return err
	}
	pv, err := h.Forms.PreviewChange(c.Request().Context(), c.Param("id"), req)
	if err != nil {
		return err
	}
	return render.Page(c, http.StatusOK, views.RequestPreview(changePreviewProps(c.Param("id"), pv)))
}

func (h Requests) submitChange(c echo.Context) error {
	req, values, err := readRequest(c)
	if err != nil {
		return err
	}
	r, refused, err := h.Forms.SubmitChange(c.Request().Context(), c.Param("id"), req, values)
	if err != nil {
		return err
	}
	if refused != nil {
		return render.Page(c, http.StatusUnprocessableEntity, views.ChangeForm(changeProps(*refused)))
	}
	return render.Redirect(c, paths.Run(r.ID))
}

// changeProps is the change form f as drawn: each input notes what it was, and a fixed
// one that changing it may replace what the workspace holds.
func changeProps(f pages.ChangeForm) views.ChangeProps {
	p := views.ChangeProps{RequestProps: requestProps(f.RequestForm), WorkspaceID: f.Workspace.ID,
		EnvironmentName: f.Workspace.EnvironmentName, Applied: f.Applied}
	// The fields are the template's inputs, in its order (inputFields).
	for i, in := range f.Template.Inputs {
		p.Fields[i].Note = inputNote(in, f.Was, f.Applied)
	}
	inputs := pages.InputChanges(f.Template, f.Was, f.Request.Inputs)
	p.Preview = changePreviewProps(f.Workspace.ID, pages.ChangePreview{Preview: f.Preview, Inputs: inputs, Applied: f.Applied})
	return p
}

// inputNote is what a change form says under input in: its value when last applied,
// and for a fixed input what changing it may do.
func inputNote(in catalog.Input, was map[string]string, applied bool) string {
	var notes []string
	if v, ok := was["inputs."+in.Name]; ok && applied {
		notes = append(notes, "Was "+v+" when last applied.")
	}
	if in.Divergence == catalog.DivergenceFixed {
		notes = append(notes, "Fixed: changing it can replace the resources made with it, and lose what they hold; the preview below says whether it does.")
	}
	return strings.Join(notes, " ")
}

// changePreviewProps is a change's preview in words, asked for again at its own route.
func changePreviewProps(workspaceID string, pv pages.ChangePreview) views.RequestPreviewProps {
	p := previewProps(pv.Preview)
	p.Endpoint = paths.PreviewChange(workspaceID)
	for _, in := range pv.Inputs {
		p.Inputs = append(p.Inputs, views.PreviewInput{Name: in.Input.Name, Label: cmp.Or(in.Input.Label, in.Input.Name),
			Was: in.Was, Now: in.Now, Changed: in.Changed, Fixed: in.Fixed, Hidden: in.Input.Sensitive})
	}
	return p
}
