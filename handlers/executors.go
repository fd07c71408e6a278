package handlers

import (
	"context"
	"net/http"

	"github.com/labstack/echo/v4"

	"gantry/models/authz"
	"gantry/runner"
	"gantry/views"
	"gantry/web/paths"
	"gantry/web/render"
)

// ExecutorHealth reports the executors this Gantry offers.
type ExecutorHealth interface {
	Statuses(ctx context.Context) []runner.Status
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
		rows = append(rows, views.ExecutorRow{Name: st.Name, Default: st.Default, Simulated: st.Simulated, Isolated: st.Isolated, Healthy: st.Healthy, Problem: st.Problem})
	}
	return render.Page(c, http.StatusOK, views.Executors(views.ExecutorsProps{Rows: rows}))
}
