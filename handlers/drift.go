package handlers

import (
	"context"
	"net/http"
	"strconv"

	"github.com/labstack/echo/v4"

	"gantry/handlers/render"
	"gantry/models/run"
	"gantry/views"
	"gantry/views/paths"
)

// DriftRuns is what the drift pages need of runs.
type DriftRuns interface {
	CheckDrift(ctx context.Context, workspaceID string) (run.Run, error)
	PlanToCorrect(ctx context.Context, workspaceID string) (run.Run, error)
	LatestDrift(ctx context.Context, workspaceID string) (*run.Run, error)
	DriftList(ctx context.Context) ([]run.Run, error)
}

// Drift serves drift detection: checking a workspace now, planning to correct its
// drift, and the organization's drift list.
type Drift struct {
	Runs       DriftRuns
	Workspaces WorkspaceReader
}

// Register adds the drift routes to g.
func (h Drift) Register(g *echo.Group) {
	g.POST(paths.RouteWorkspaceDrift, h.check)
	g.POST(paths.RouteWorkspaceCorrect, h.correct)
	g.GET(paths.Drift(), h.list)
}

func (h Drift) check(c echo.Context) error {
	ctx := c.Request().Context()
	ws, err := workspaceToChange(ctx, h.Workspaces, c.Param("id"))
	if err != nil {
		return err
	}
	r, err := h.Runs.CheckDrift(ctx, ws.ID)
	if err != nil {
		return err
	}
	_ = render.Flash(c, "success", "Drift check of "+ws.Name+" requested as run "+r.Label()+": a refresh-only plan that changes nothing.")
	return render.Redirect(c, paths.Run(r.ID))
}

func (h Drift) correct(c echo.Context) error {
	ctx := c.Request().Context()
	ws, err := workspaceToChange(ctx, h.Workspaces, c.Param("id"))
	if err != nil {
		return err
	}
	r, err := h.Runs.PlanToCorrect(ctx, ws.ID)
	if err != nil {
		return err
	}
	_ = render.Flash(c, "success", "Correction of "+ws.Name+"'s drift requested as run "+r.Label()+": it plans to bring the live resources back to the state, through every gate.")
	return render.Redirect(c, paths.Run(r.ID))
}

func (h Drift) list(c echo.Context) error {
	ctx := c.Request().Context()
	checks, err := h.Runs.DriftList(ctx)
	if err != nil {
		return err
	}
	ids := make([]string, len(checks))
	for i, r := range checks {
		ids[i] = r.WorkspaceID
	}
	names, err := h.Workspaces.Views(ctx, ids)
	if err != nil {
		return err
	}
	p := views.DriftListProps{Max: run.MaxDriftList}
	for _, r := range checks {
		v, ok := names[r.WorkspaceID]
		if !ok {
			continue
		}
		p.Rows = append(p.Rows, views.DriftListRow{WorkspaceID: r.WorkspaceID, Workspace: v.Name, Environment: v.EnvironmentName, Check: driftView(r)})
	}
	return render.Page(c, http.StatusOK, views.DriftList(p))
}

// driftView is drift check r as pages show it.
func driftView(r run.Run) views.DriftCheckView {
	v := views.DriftCheckView{RunID: r.ID, Label: r.Label(), State: string(r.State), At: r.CreatedAt, Simulated: r.Simulated}
	switch {
	case r.Drift != nil && r.DriftStatus != "":
		v.Status, v.Class, v.Summary = r.DriftStatus.Label(), "state "+driftStateClass(r.DriftStatus), run.DriftSummary(*r.Drift, r.DriftStatus)
		for _, d := range r.Drift.Resources {
			action := "changed"
			if d.Action == "delete" {
				action = "deleted"
			}
			v.Resources = append(v.Resources, views.DriftRow{Address: d.Address, Type: d.Type, ID: d.ID, Action: action,
				Changed: d.Changed, By: d.By, WindowID: d.WindowID})
		}
	case r.State == run.Failed || r.State == run.Stale || r.State == run.Cancelled:
		v.Status, v.Class, v.Summary = "check "+string(r.State), "state state-bad", r.StateReason
	default:
		v.Status, v.Class = "checking ("+string(r.State)+")", "state state-busy"
	}
	return v
}

func driftStateClass(s run.DriftStatus) string {
	switch s {
	case run.DriftClean:
		return "state-ok"
	case run.DriftExpected:
		return "state-wait"
	}
	return "state-bad"
}

// driftSchedule says how often an environment checks its workspaces' drift.
func driftSchedule(minutes int) string {
	switch {
	case minutes <= 0:
		return "off in this environment"
	case minutes%60 == 0 && minutes >= 120:
		return "every " + strconv.Itoa(minutes/60) + " hours"
	case minutes == 60:
		return "every hour"
	}
	return "every " + strconv.Itoa(minutes) + " minutes"
}
