package handlers

import (
	"net/http"
	"strings"
	"time"

	"github.com/labstack/echo/v4"

	"gantry/handlers/openapi"
	"gantry/models/environment"
	"gantry/models/pages"
	"gantry/views/paths"
)

// EnvironmentsAPI mirrors the environment pages as JSON, through the same service and
// so the same checks. Errors (404, 403, 422 with field messages) come back as JSON from
// the central error handler.
type EnvironmentsAPI struct {
	// Pages reads and saves environments as the pages do; without a credential store the
	// API neither shows nor takes the static cloud credentials.
	Pages EnvironmentPages
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
	Owners      []string `json:"owners"`
	OwnerGroups []string `json:"owner_groups"`
	// The static cloud credentials are write-only: the read model says since when each
	// is set (null: that phase uses workload identity), never what it is.
	CloudCredentialSetAt     *time.Time `json:"cloud_credential_set_at" doc:"when the static write credential (used by applies only) was set; null: applies use workload identity tokens. The credential is never returned."`
	CloudReadCredentialSetAt *time.Time `json:"cloud_read_credential_set_at" doc:"when the static read credential (used by plans and verifications) was set; null: they use read-scoped workload identity tokens. They never get the write credential. The credential is never returned."`
	// Target is where its runs provision; Credentials whether its phases use the
	// target's federated identities or the static credentials it holds.
	Target      environment.Target `json:"target" doc:"where the environment's runs provision and how a phase is let in: kind, audience (empty: the kind's default) and the kind's settings (docs/targets.md)"`
	Credentials string             `json:"credentials" doc:"federated: each phase gets a short-lived workload token the target exchanges; static: the environment holds static credentials its phases get instead"`
	CreatedAt   time.Time          `json:"created_at"`
	UpdatedAt   time.Time          `json:"updated_at"`
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
	// The static cloud credentials, write-only: a new secret sets or replaces one, a
	// remove flag removes it, absent leaves it as it is.
	CloudCredential           string `json:"cloud_credential,omitempty" doc:"write-only: sets or replaces the static write credential (an API key), which only applies get; never returned. Prefer workload identity (a standing-credential finding)."`
	CloudCredentialRemove     bool   `json:"cloud_credential_remove,omitempty" doc:"removes the static write credential: applies use workload identity tokens again"`
	CloudReadCredential       string `json:"cloud_read_credential,omitempty" doc:"write-only: sets or replaces the static read credential (a read-only API key), which plans and verifications get instead of the write credential; must not be the write credential; never returned"`
	CloudReadCredentialRemove bool   `json:"cloud_read_credential_remove,omitempty" doc:"removes the static read credential: plans and verifications use read-scoped workload identity tokens again"`
	// Target: absent is the sandbox cloud on create, unchanged on edit.
	Target *environment.Target `json:"target,omitempty" doc:"where the environment's runs provision; absent: the sandbox cloud on create, unchanged on edit. Only the kind's settings are kept; a wrong setting is a 422 naming target_<kind>_<setting>"`
}

func (r environmentRequest) credentials() environment.CredentialChanges {
	return environment.CredentialChanges{
		Write: environment.CredentialChange{Secret: strings.TrimSpace(r.CloudCredential), Remove: r.CloudCredentialRemove},
		Read:  environment.CredentialChange{Secret: strings.TrimSpace(r.CloudReadCredential), Remove: r.CloudReadCredentialRemove},
	}
}

func (r environmentRequest) input() environment.Input {
	return environment.Input{Name: r.Name, Tier: r.Tier, RequiresApproval: r.RequiresApproval, Restricted: r.Restricted, Grants: r.Grants,
		DecisionWindowHours: r.DecisionWindowHours, PromotionOrder: r.PromotionOrder, DriftIntervalMinutes: r.DriftIntervalMinutes,
		Owners: r.Owners, OwnerGroups: r.OwnerGroups, Target: r.Target}
}

func toJSON(l pages.EnvironmentLine) environmentJSON {
	e, st := l.Environment, l.Standing
	return environmentJSON{Target: e.Target.OrSandbox(), Credentials: l.Integration.Credentials(), ID: e.ID, Name: e.Name, Tier: string(e.Tier), RequiresApproval: e.RequiresApproval,
		Restricted: e.Restricted, DecisionWindowHours: e.DecisionWindowHours, PromotionOrder: e.PromotionOrder,
		DriftIntervalMinutes: e.DriftIntervalMinutes, Owners: nonNil(e.Owners), OwnerGroups: nonNil(e.OwnerGroups),
		CloudCredentialSetAt: st.WriteSetAt, CloudReadCredentialSetAt: st.ReadSetAt, CreatedAt: e.CreatedAt, UpdatedAt: e.UpdatedAt}
}

func nonNil(xs []string) []string {
	if xs == nil {
		return []string{}
	}
	return xs
}

func (h EnvironmentsAPI) list(c echo.Context) error {
	envs, err := h.Pages.List(c.Request().Context())
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
	env, err := h.Pages.Get(c.Request().Context(), c.Param("id"))
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, toJSON(env))
}

func (h EnvironmentsAPI) create(c echo.Context) error { return h.save(c, "", http.StatusCreated) }

func (h EnvironmentsAPI) update(c echo.Context) error { return h.save(c, c.Param("id"), http.StatusOK) }

// save creates (id "") or updates an environment and answers it as it now stands. The
// credentials are checked before anything is saved, so a refused request saved nothing.
func (h EnvironmentsAPI) save(c echo.Context, id string, status int) error {
	var req environmentRequest
	if err := (&echo.DefaultBinder{}).BindBody(c, &req); err != nil {
		return err
	}
	env, _, err := h.Pages.Save(c.Request().Context(), id, req.input(), req.credentials(), false)
	if err != nil {
		return err
	}
	return c.JSON(status, toJSON(env))
}
