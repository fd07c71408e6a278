package handlers

import (
	"net/http"
	"time"

	"github.com/labstack/echo/v4"

	"gantry/models/environment"
	"gantry/web/openapi"
	"gantry/web/paths"
)

// EnvironmentsAPI mirrors the environment pages as JSON, through the same service and
// so the same checks. Errors (404, 403, 422 with field messages) come back as JSON from
// the central error handler.
type EnvironmentsAPI struct {
	Service EnvironmentService
}

// Register adds the API routes to g, documented in spec.
func (h EnvironmentsAPI) Register(g *echo.Group, spec *openapi.Spec) {
	spec.Route(g, openapi.Op{Method: http.MethodGet, Path: paths.APIEnvironments(), ID: "listEnvironments", Tag: "environments", Scope: "admin",
		Summary: "The organization's environments", Response: environmentList{}}, h.list)
	spec.Route(g, openapi.Op{Method: http.MethodPost, Path: paths.APIEnvironments(), ID: "createEnvironment", Tag: "environments", Scope: "admin",
		Summary: "Create an environment", Body: environmentRequest{}, Status: http.StatusCreated, Response: environmentJSON{}}, h.create)
	spec.Route(g, openapi.Op{Method: http.MethodGet, Path: paths.RouteAPIEnvironment, ID: "getEnvironment", Tag: "environments", Scope: "admin",
		Summary: "One environment", Response: environmentJSON{}}, h.get)
	spec.Route(g, openapi.Op{Method: http.MethodPut, Path: paths.RouteAPIEnvironment, ID: "updateEnvironment", Tag: "environments", Scope: "admin",
		Summary: "Change an environment (absent fields stay as they are)", Body: environmentRequest{}, Response: environmentJSON{}}, h.update)
}

type environmentList struct {
	Environments []environmentJSON `json:"environments"`
}

type environmentJSON struct {
	ID               string `json:"id"`
	Name             string `json:"name"`
	Tier             string `json:"tier"`
	RequiresApproval bool   `json:"requires_approval"`
	Restricted       bool   `json:"restricted"`
	// DecisionWindowHours is how long a run may wait for a decision before it expires.
	DecisionWindowHours int `json:"decision_window_hours"`
	// PromotionOrder is its place in the organization's promotion order.
	PromotionOrder int `json:"promotion_order"`
	// DriftIntervalMinutes is how often its workspaces are checked for drift (0: never).
	DriftIntervalMinutes int `json:"drift_interval_minutes"`
	// Owners (user ids) and OwnerGroups are the environment's named owners.
	Owners      []string  `json:"owners"`
	OwnerGroups []string  `json:"owner_groups"`
	CreatedAt   time.Time `json:"created_at"`
	UpdatedAt   time.Time `json:"updated_at"`
}

type environmentRequest struct {
	Name             string   `json:"name"`
	Tier             string   `json:"tier"`
	RequiresApproval *bool    `json:"requires_approval,omitempty"`
	Restricted       bool     `json:"restricted,omitempty"`
	Grants           []string `json:"grants,omitempty"`
	// DecisionWindowHours: absent or 0 is the default (168) on create, unchanged on edit.
	DecisionWindowHours int `json:"decision_window_hours,omitempty"`
	// PromotionOrder: absent or 0 is by tier on create, unchanged on edit.
	PromotionOrder int `json:"promotion_order,omitempty"`
	// DriftIntervalMinutes: absent is the tier's default on create, unchanged on edit;
	// 0 is off.
	DriftIntervalMinutes *int `json:"drift_interval_minutes,omitempty"`
	// Owners and OwnerGroups: absent is none on create, unchanged on edit.
	Owners      *[]string `json:"owners,omitempty"`
	OwnerGroups *[]string `json:"owner_groups,omitempty"`
}

func (r environmentRequest) input() environment.Input {
	return environment.Input{Name: r.Name, Tier: r.Tier, RequiresApproval: r.RequiresApproval, Restricted: r.Restricted, Grants: r.Grants,
		DecisionWindowHours: r.DecisionWindowHours, PromotionOrder: r.PromotionOrder, DriftIntervalMinutes: r.DriftIntervalMinutes,
		Owners: r.Owners, OwnerGroups: r.OwnerGroups}
}

func toJSON(e environment.Environment) environmentJSON {
	return environmentJSON{ID: e.ID, Name: e.Name, Tier: string(e.Tier), RequiresApproval: e.RequiresApproval,
		Restricted: e.Restricted, DecisionWindowHours: e.DecisionWindowHours, PromotionOrder: e.PromotionOrder,
		DriftIntervalMinutes: e.DriftIntervalMinutes, Owners: nonNil(e.Owners), OwnerGroups: nonNil(e.OwnerGroups),
		CreatedAt: e.CreatedAt, UpdatedAt: e.UpdatedAt}
}

func nonNil(xs []string) []string {
	if xs == nil {
		return []string{}
	}
	return xs
}

func (h EnvironmentsAPI) list(c echo.Context) error {
	envs, err := h.Service.List(c.Request().Context())
	if err != nil {
		return err
	}
	out := make([]environmentJSON, 0, len(envs))
	for _, e := range envs {
		out = append(out, toJSON(e))
	}
	return c.JSON(http.StatusOK, environmentList{Environments: out})
}

func (h EnvironmentsAPI) get(c echo.Context) error {
	env, err := h.Service.Get(c.Request().Context(), c.Param("id"))
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, toJSON(env))
}

func (h EnvironmentsAPI) create(c echo.Context) error {
	var req environmentRequest
	if err := (&echo.DefaultBinder{}).BindBody(c, &req); err != nil {
		return err
	}
	env, err := h.Service.Create(c.Request().Context(), req.input())
	if err != nil {
		return err
	}
	return c.JSON(http.StatusCreated, toJSON(env))
}

func (h EnvironmentsAPI) update(c echo.Context) error {
	var req environmentRequest
	if err := (&echo.DefaultBinder{}).BindBody(c, &req); err != nil {
		return err
	}
	env, err := h.Service.Update(c.Request().Context(), c.Param("id"), req.input())
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, toJSON(env))
}
