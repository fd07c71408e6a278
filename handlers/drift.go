package handlers

import (
	"net/http"
	"strconv"

	"github.com/labstack/echo/v4"

	"gantry/handlers/render"
	"gantry/models/run"
	"gantry/views"
	"gantry/views/paths"
)

// Drift serves drift detection: checking a workspace now, planning to correct its
// drift, and the organization's drift list.
type Drift struct {
	Changes WorkspaceChanges
}

// Register adds the drift routes to g.
func (h Drift) Register(g *echo.Group) {
	g.POST(paths.RouteWorkspaceDrift, h.check)
	g.POST(paths.RouteWorkspaceCorrect, h.correct)
	g.GET(paths.Drift(), h.list)
}

func (h Drift) check(c echo.Context) error {
	asked, err := h.Changes.CheckDrift(c.Request().Context(), c.Param("id"))
	if err != nil {
		return err
	}
	_ = render.Flash(c, "success", "Drift check of "+asked.Workspace.Name+" requested as run "+asked.Run.Label()+": a refresh-only plan that changes nothing.")
	return render.Redirect(c, paths.Run(asked.Run.ID))
}

func (h Drift) correct(c echo.Context) error {
	asked, err := h.Changes.PlanToCorrect(c.Request().Context(), c.Param("id"))
	if err != nil {
		return err
	}
	_ = render.Flash(c, "success", "Correction of "+asked.Workspace.Name+"'s drift requested as run "+asked.Run.Label()+
		": it plans to bring the live resources back to the state, through every gate.")
	return render.Redirect(c, paths.Run(asked.Run.ID))
}

func (h Drift) list(c echo.Context) error {
	lines, err := h.Changes.DriftList(c.Request().Context())
	if err != nil {
		return err
	}
	p := views.DriftListProps{Max: run.MaxDriftList}
	for _, l := range lines {
		p.Rows = append(p.Rows, views.DriftListRow{WorkspaceID: l.Workspace.ID, Workspace: l.Workspace.Name, Environment: l.Workspace.EnvironmentName,
			Check: driftView(l.Check)})
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
