package handlers

import (
	"context"

	"github.com/labstack/echo/v4"

	"gantry/handlers/render"
	"gantry/models/workspace"
	"gantry/views/paths"
)

// WorkspaceArchiver archives a workspace that holds nothing (workspace.Archiver).
type WorkspaceArchiver interface {
	Archive(ctx context.Context, id string) (workspace.View, error)
}

// WorkspaceArchive serves the workspace page's "Archive" button.
type WorkspaceArchive struct {
	Archiver WorkspaceArchiver
}

// Register adds the archive route to g.
func (h WorkspaceArchive) Register(g *echo.Group) {
	g.POST(paths.RouteWorkspaceArchive, h.archive)
}

// archive archives the workspace and goes back to its page, which says so; a refusal
// (it holds resources again, a run started) is the central 409 page with the reason.
func (h WorkspaceArchive) archive(c echo.Context) error {
	w, err := h.Archiver.Archive(c.Request().Context(), c.Param("id"))
	if err != nil {
		return err
	}
	_ = render.Flash(c, "success", "Workspace "+w.Name+" in "+w.EnvironmentName+" is archived: it has left the workspace list; its runs, state history and audit stay. A new request into its name brings it back.")
	return render.Redirect(c, paths.Workspace(w.ID))
}
