package handlers

import (
	"context"
	"net/http"

	"github.com/labstack/echo/v4"

	"gantry/handlers/render"
	"gantry/models/authz"
	"gantry/models/pages"
	"gantry/runner"
	"gantry/views"
	"gantry/views/paths"
)

// ExecutorHealth reports the executors this Gantry offers.
type ExecutorHealth interface {
	Statuses(ctx context.Context) []runner.Status
}

// executorWait is the preparation a run's next phase waits for, as the run page shows
// it (nil: none).
func executorWait(w *pages.ExecutorWait) *views.ExecutorWait {
	if w == nil {
		return nil
	}
	return &views.ExecutorWait{What: w.What, Step: w.Step, Count: w.Count(), Percent: w.Percent(), Phase: w.Phase}
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
			row.Preparing = executorWait(&pages.ExecutorWait{Preparation: *st.Preparing})
		}
		rows = append(rows, row)
	}
	return render.Page(c, http.StatusOK, views.Executors(views.ExecutorsProps{Rows: rows}))
}
