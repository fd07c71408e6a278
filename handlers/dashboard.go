package handlers

import (
	"context"
	"encoding/json"
	"net/http"

	"github.com/labstack/echo/v4"

	"gantry/models/audit"
	"gantry/models/authz"
	"gantry/models/environment"
	"gantry/views"
	"gantry/web/paths"
	"gantry/web/render"
)

// ActivityReader reads recent audit events.
type ActivityReader interface {
	List(ctx context.Context, f audit.Filter) ([]audit.Event, error)
}

// EnvironmentLister counts environments for the dashboard card.
type EnvironmentLister interface {
	List(ctx context.Context) ([]environment.Environment, error)
}

// Dashboard serves the landing page.
type Dashboard struct {
	Environments EnvironmentLister
	Activity     ActivityReader
}

// Register adds the dashboard route to g.
func (h Dashboard) Register(g *echo.Group) { g.GET(paths.Home(), h.show) }

func (h Dashboard) show(c echo.Context) error {
	ctx := c.Request().Context()
	subject, _ := authz.SubjectFrom(ctx)
	props := views.DashboardProps{EnvironmentCount: -1}
	// Ask "may I" first, so a viewer's dashboard is not an error page.
	if subject.Can(authz.PermEnvironmentsManage) {
		envs, err := h.Environments.List(ctx)
		if err != nil {
			return err
		}
		props.EnvironmentCount = len(envs)
	}
	if subject.Can(authz.PermAuditRead) {
		events, err := h.Activity.List(ctx, audit.Filter{Limit: 10})
		if err != nil {
			return err
		}
		props.ShowActivity = true
		for _, e := range events {
			var d struct {
				Simulated bool `json:"simulated"`
			}
			_ = json.Unmarshal(e.Data, &d)
			props.Activity = append(props.Activity, views.ActivityItem{At: e.OccurredAt, Actor: e.ActorName, Action: e.Action,
				Target: e.TargetID, Simulated: d.Simulated})
		}
	}
	return render.Page(c, http.StatusOK, views.Dashboard(props))
}
