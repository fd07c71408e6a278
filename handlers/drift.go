package handlers

import (
	"net/http"
	"strconv"
	"strings"

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

// driftView is drift check r as pages show it: its finding's badge carries the drift
// status's code, or the run state's while the check has found nothing (running or
// failed).
func driftView(r run.Run) views.DriftCheckView {
	v := views.DriftCheckView{RunID: r.ID, Label: r.Label(), At: r.CreatedAt, Simulated: r.Simulated}
	state := strings.ToLower(r.State.Words())
	switch {
	case r.Drift != nil && r.DriftStatus != "":
		v.Finding = views.Coded{Words: sentence(r.DriftStatus.Label()), Code: string(r.DriftStatus), Tone: driftTone(r.DriftStatus)}
		v.Summary = run.DriftSummary(*r.Drift, r.DriftStatus)
		for _, d := range r.Drift.Resources {
			action := "changed"
			if d.Action == "delete" {
				action = "deleted"
			}
			v.Resources = append(v.Resources, views.DriftRow{Address: d.Address, Type: d.Type, ID: d.ID, Action: action,
				Changed: d.Changed, By: d.By, WindowID: d.WindowID})
		}
	case r.State == run.Failed || r.State == run.Stale || r.State == run.Cancelled:
		v.Finding, v.Summary = views.Coded{Words: "Check " + state, Code: string(r.State), Tone: views.ToneBad}, r.StateReason
	default:
		v.Finding = views.Coded{Words: "Checking (" + state + ")", Code: string(r.State), Tone: views.ToneBusy}
	}
	return v
}

func driftTone(s run.DriftStatus) views.Tone {
	switch s {
	case run.DriftClean:
		return views.ToneOK
	case run.DriftExpected:
		return views.ToneWait
	}
	return views.ToneBad
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
