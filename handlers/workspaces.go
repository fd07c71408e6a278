package handlers

import (
	"cmp"
	"context"
	"net/http"

	"github.com/labstack/echo/v4"

	"gantry/models/run"
	"gantry/models/state"
	"gantry/models/workspace"
	"gantry/views"
	"gantry/web/paths"
	"gantry/web/render"
)

// WorkspaceLister lists and reads workspaces.
type WorkspaceLister interface {
	List(ctx context.Context) ([]workspace.View, error)
	Get(ctx context.Context, id string) (workspace.View, error)
}

// RunLister lists runs.
type RunLister interface {
	ListForWorkspace(ctx context.Context, workspaceID string, limit int) ([]run.Run, error)
	ListRecent(ctx context.Context, limit int) ([]run.Run, error)
}

// Workspaces serves the workspace list and workspace pages.
type Workspaces struct {
	Workspaces WorkspaceLister
	Runs       RunLister
	States     WorkspaceStates
}

// WorkspaceStates reads what a workspace's state holds (state.Store).
type WorkspaceStates interface {
	OfWorkspace(ctx context.Context, workspaceID string, limit int) (state.WorkspaceState, error)
}

// Register adds the workspace routes to g.
func (h Workspaces) Register(g *echo.Group) {
	g.GET(paths.Workspaces(), h.list)
	g.GET(paths.RouteWorkspace, h.show)
}

func (h Workspaces) list(c echo.Context) error {
	ctx := c.Request().Context()
	wss, err := h.Workspaces.List(ctx)
	if err != nil {
		return err
	}
	recent, err := h.Runs.ListRecent(ctx, 20)
	if err != nil {
		return err
	}
	var p views.WorkspacesProps
	for _, ws := range wss {
		p.Workspaces = append(p.Workspaces, views.WorkspaceRow{ID: ws.ID, Name: ws.Name, Environment: ws.EnvironmentName,
			Template: ws.TemplateName, Applying: ws.ActiveRunID != nil})
	}
	if p.Recent, err = runRows(ctx, h.Workspaces, recent); err != nil {
		return err
	}
	return render.Page(c, http.StatusOK, views.Workspaces(p))
}

func (h Workspaces) show(c echo.Context) error {
	ctx := c.Request().Context()
	ws, err := h.Workspaces.Get(ctx, c.Param("id"))
	if err != nil {
		return err
	}
	runs, err := h.Runs.ListForWorkspace(ctx, ws.ID, 100)
	if err != nil {
		return err
	}
	p := views.WorkspaceProps{ID: ws.ID, Name: ws.Name, Environment: ws.EnvironmentName, Template: ws.TemplateName}
	if ws.ActiveRunID != nil {
		p.ActiveRun = *ws.ActiveRunID
	}
	if p.Runs, err = runRows(ctx, h.Workspaces, runs); err != nil {
		return err
	}
	st, err := h.States.OfWorkspace(ctx, ws.ID, 20)
	if err != nil {
		return err
	}
	labels := map[string]string{}
	for _, r := range runs {
		labels[r.ID] = r.Label()
	}
	for _, v := range st.Versions {
		row := views.StateVersionRow{Serial: v.Serial, At: v.CreatedAt, SHA256: v.SHA256}
		if v.RunID != nil {
			row.RunID, row.RunLabel = *v.RunID, cmp.Or(labels[*v.RunID], *v.RunID)
		}
		p.Versions = append(p.Versions, row)
	}
	for _, r := range st.Resources {
		p.Resources = append(p.Resources, views.ResourceRow{Address: r.Address, Type: r.Type, ID: r.ID})
	}
	for _, o := range st.Outputs {
		value := o.Value
		if o.Sensitive {
			value = "(sensitive)"
		}
		p.Outputs = append(p.Outputs, views.KV{Key: o.Name, Value: value})
	}
	return render.Page(c, http.StatusOK, views.WorkspacePage(p))
}
