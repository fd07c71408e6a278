package handlers

import (
	"context"
	"net/http"

	"github.com/labstack/echo/v4"

	"gantry/handlers/render"
	"gantry/models/authz"
	"gantry/runner"
	"gantry/views"
	"gantry/views/paths"
)

// ExecutorHealth reports the executors this Gantry offers.
type ExecutorHealth interface {
	Statuses(ctx context.Context) []runner.Status
}

// ExecutorWaits says what a run's executor is still being prepared for.
type ExecutorWaits interface {
	// Waiting returns the preparation of executor name and true while it lasts.
	Waiting(name string) (runner.Preparation, bool)
}

// executorWait is a preparation as the pages show it.
func executorWait(p runner.Preparation, phase string) *views.ExecutorWait {
	return &views.ExecutorWait{What: p.What, Step: p.Step, Percent: p.Percent(), Phase: phase}
}

// Executors serves the admin page listing each executor and its health.
type Executors struct {
	Runners ExecutorHealth
}

// Register adds the route to g.
func (h Executors) Register(g *echo.Group) { g.GET(paths.Executors(), h.list) }

func (h Executors) list(c echo.Context) error {
	ctx := c.Request().Context()
	if _, err := authz.Require(ctx, authz.PermEnvironmentsManage); err != nil {
		return err
	}
	var rows []views.ExecutorRow
	for _, st := range h.Runners.Statuses(ctx) {
		row := views.ExecutorRow{Name: st.Name, Default: st.Default, Simulated: st.Simulated, Isolated: st.Isolated, Healthy: st.Healthy, Problem: st.Problem}
		if st.Preparing != nil {
			row.Preparing = executorWait(*st.Preparing, "")
		}
		rows = append(rows, row)
	}
	return render.Page(c, http.StatusOK, views.Executors(views.ExecutorsProps{Rows: rows}))
}
