package handlers

import (
	"context"
	"net/http"

	"github.com/labstack/echo/v4"

	"gantry/handlers/render"
	"gantry/models/pages"
	"gantry/views"
	"gantry/views/paths"
)

// WorkspaceChanges asks for the runs a workspace's page offers beside a change of its
// inputs, and reads the pages that ask before them (pages.Changes).
type WorkspaceChanges interface {
	CheckDrift(ctx context.Context, workspaceID string) (pages.Asked, error)
	PlanToCorrect(ctx context.Context, workspaceID string) (pages.Asked, error)
	RollBack(ctx context.Context, workspaceID, versionID string) (pages.Asked, error)
	Rollback(ctx context.Context, workspaceID, versionID string) (pages.RollbackPage, error)
	DriftList(ctx context.Context) ([]pages.DriftLine, error)
}

// Rollbacks serves "roll back to state version N": a page that restates what the
// rollback re-applies and what it cannot bring back, and the request of its run.
type Rollbacks struct {
	Changes WorkspaceChanges
}

// Register adds the rollback routes to g.
func (h Rollbacks) Register(g *echo.Group) {
	g.GET(paths.RouteWorkspaceRollback, h.confirm)
	g.POST(paths.RouteWorkspaceRollback, h.rollBack)
}

func (h Rollbacks) confirm(c echo.Context) error {
	page, err := h.Changes.Rollback(c.Request().Context(), c.Param("id"), c.QueryParam("version"))
	if err != nil {
		return err
	}
	ws := page.Workspace
	p := views.RollbackProps{WorkspaceID: ws.ID, Workspace: ws.Name, Environment: ws.EnvironmentName, Template: ws.TemplateName,
		VersionID: c.QueryParam("version"), Boundary: page.Boundary}
	cand := page.Candidate
	if cand == nil {
		for _, v := range page.Choices {
			p.Choices = append(p.Choices, views.StateVersionRow{Serial: v.Serial, At: v.CreatedAt, SHA256: v.SHA256,
				RunID: *v.RunID, RollbackURL: paths.WorkspaceRollback(ws.ID, v.ID)})
		}
		return render.Page(c, http.StatusOK, views.ChooseRollback(p))
	}
	p.Serial, p.At, p.Refusal = cand.Version.Serial, cand.Version.CreatedAt, cand.Refusal
	if src := cand.Source; src != nil {
		p.SourceRunID, p.SourceLabel, p.TemplateVersion, p.Inputs = src.ID, ws.Name+" "+src.Label(), src.TemplateVersion, inputsKV(src.Inputs)
	}
	return render.Page(c, http.StatusOK, views.ConfirmRollback(p))
}

// rollBack requests the rollback run; refusals (the current version, a destroy's empty
// state, a bundle that can no longer be planned) come back in words from the service.
func (h Rollbacks) rollBack(c echo.Context) error {
	asked, err := h.Changes.RollBack(c.Request().Context(), c.Param("id"), c.FormValue("version"))
	if err != nil {
		return err
	}
	_ = render.Flash(c, "success", "Rollback of "+asked.Workspace.Name+" requested as run "+asked.Run.Label()+
		": it is planned against today's state, and nothing is applied before its gates pass.")
	return render.Redirect(c, paths.Run(asked.Run.ID))
}
