package handlers

import (
	"context"
	"net/http"

	"github.com/labstack/echo/v4"

	"gantry/handlers/render"
	"gantry/models/authz"
	"gantry/models/rollback"
	"gantry/models/run"
	"gantry/models/state"
	"gantry/models/workspace"
	"gantry/views"
	"gantry/views/paths"
)

// RollbackRuns is what rolling back needs (rollback.Service, which checks who may,
// and what can be planned).
type RollbackRuns interface {
	RollBack(ctx context.Context, workspaceID, versionID string) (run.Run, error)
	// Candidate says what a rollback would re-apply, or why it cannot.
	Candidate(ctx context.Context, workspaceID, versionID string) (rollback.Candidate, error)
}

// Rollbacks serves "roll back to state version N": a page that restates what the
// rollback re-applies and what it cannot bring back, and the request of its run.
type Rollbacks struct {
	Workspaces WorkspaceReader
	States     WorkspaceStates
	Runs       RollbackRuns
	Catalog    CatalogReader
}

// Register adds the rollback routes to g.
func (h Rollbacks) Register(g *echo.Group) {
	g.GET(paths.RouteWorkspaceRollback, h.confirm)
	g.POST(paths.RouteWorkspaceRollback, h.rollBack)
}

// rollbackVersions is how many versions the page without a version offers to choose
// from (the workspace page lists the newest 20; any version can be named).
const rollbackVersions = 200

func (h Rollbacks) confirm(c echo.Context) error {
	ctx := c.Request().Context()
	ws, err := workspaceToChange(ctx, h.Workspaces, c.Param("id"))
	if err != nil {
		return err
	}
	p := views.RollbackProps{WorkspaceID: ws.ID, Workspace: ws.Name, Environment: ws.EnvironmentName, Template: ws.TemplateName,
		VersionID: c.QueryParam("version")}
	if p.VersionID == "" {
		return h.choose(c, p)
	}
	cand, err := h.Runs.Candidate(ctx, ws.ID, p.VersionID)
	if err != nil {
		return err
	}
	p.Serial, p.At, p.Refusal = cand.Version.Serial, cand.Version.CreatedAt, cand.Refusal
	if src := cand.Source; src != nil {
		p.SourceRunID, p.SourceLabel, p.TemplateVersion, p.Inputs = src.ID, ws.Name+" "+src.Label(), src.TemplateVersion, inputsKV(src.Inputs)
	}
	// The boundary names what the workspace holds now.
	st, err := h.States.OfWorkspace(ctx, ws.ID, 1)
	if err != nil {
		return err
	}
	var irreversible []string
	if e, err := h.Catalog.Get(ws.TemplateName); err == nil {
		irreversible = e.Template.Irreversible
	}
	p.Boundary = append(rollback.TemplateBoundary(irreversible), rollback.WorkspaceBoundary(irreversible, stateResources(st))...)
	return render.Page(c, http.StatusOK, views.ConfirmRollback(p))
}

// choose lists the earlier versions runs wrote, to choose one from (no version named).
func (h Rollbacks) choose(c echo.Context, p views.RollbackProps) error {
	st, err := h.States.OfWorkspace(c.Request().Context(), p.WorkspaceID, rollbackVersions)
	if err != nil {
		return err
	}
	for i, v := range st.Versions {
		if i > 0 && v.RunID != nil {
			p.Choices = append(p.Choices, views.StateVersionRow{Serial: v.Serial, At: v.CreatedAt, SHA256: v.SHA256,
				RunID: *v.RunID, RollbackURL: paths.WorkspaceRollback(p.WorkspaceID, v.ID)})
		}
	}
	return render.Page(c, http.StatusOK, views.ChooseRollback(p))
}

// rollBack requests the rollback run; refusals (the current version, a destroy's empty
// state, a bundle that can no longer be planned) come back in words from the service.
func (h Rollbacks) rollBack(c echo.Context) error {
	ctx := c.Request().Context()
	ws, err := h.Workspaces.Get(ctx, c.Param("id"))
	if err != nil {
		return err
	}
	r, err := h.Runs.RollBack(ctx, ws.ID, c.FormValue("version"))
	if err != nil {
		return err
	}
	_ = render.Flash(c, "success", "Rollback of "+ws.Name+" requested as run "+r.Label()+": it is planned against today's state, and nothing is applied before its gates pass.")
	return render.Redirect(c, paths.Run(r.ID))
}

// stateResources are a workspace state's resources as the rollback rules take them.
func stateResources(st state.WorkspaceState) []run.StateResource {
	out := make([]run.StateResource, len(st.Resources))
	for i, r := range st.Resources {
		out[i] = run.StateResource{Address: r.Address, Type: r.Type, ID: r.ID}
	}
	return out
}

// workspaceToChange reads workspace id for a page that asks before changing it (a
// destroy, a rollback): what cannot be seen is not found, before what the person may
// not do (request runs) is forbidden.
func workspaceToChange(ctx context.Context, wss WorkspaceReader, id string) (workspace.View, error) {
	ws, err := wss.Get(ctx, id)
	if err != nil {
		return workspace.View{}, err
	}
	if _, err := authz.Require(ctx, authz.PermProvisioningPlan); err != nil {
		return workspace.View{}, err
	}
	return ws, nil
}
