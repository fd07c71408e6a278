package handlers

import (
	"net/http"
	"strings"

	"github.com/labstack/echo/v4"

	"gantry/handlers/openapi"
	"gantry/views/paths"
)

func (h API) registerChanges(g *echo.Group, spec *openapi.Spec) {
	spec.Route(g, openapi.Op{Method: http.MethodPost, Path: paths.RouteAPIWorkspace + "/drift-check", ID: "checkDrift", Tag: "workspaces", Scope: "plan",
		Summary: "Check the workspace for drift now: a refresh-only plan that changes nothing", Status: http.StatusCreated, Response: apiRun{}}, h.checkDrift)
	spec.Route(g, openapi.Op{Method: http.MethodPost, Path: paths.RouteAPIWorkspace + "/drift-correction", ID: "correctDrift", Tag: "workspaces", Scope: "apply",
		Summary: "Plan to bring the live resources back to the state, through every gate", Status: http.StatusCreated, Response: apiRun{}}, h.correctDrift)
	spec.Route(g, openapi.Op{Method: http.MethodPost, Path: paths.RouteAPIWorkspace + "/rollback", ID: "rollBack", Tag: "workspaces", Scope: "apply",
		Summary: "Roll the workspace back to a state version: its run's inputs and template version, planned against today's state",
		Body:    apiRollback{}, Status: http.StatusCreated, Response: apiRun{}}, h.rollBack)
	spec.Route(g, openapi.Op{Method: http.MethodPost, Path: paths.APIPolicies(), ID: "uploadPolicy", Tag: "policies", Scope: "admin",
		Summary: "Upload a version of an organization policy (Rego and its tests, which must pass)", Body: apiPolicyUpload{},
		Status: http.StatusCreated, Response: apiPolicyUploaded{}}, h.uploadPolicy)
	spec.Route(g, openapi.Op{Method: http.MethodPut, Path: paths.RouteAPIPolicyActive, ID: "setPolicyActive", Tag: "policies", Scope: "admin",
		Summary: "Activate or deactivate an organization policy", Body: apiActive{}, Response: apiActive{}}, h.setPolicyActive)
	spec.Route(g, openapi.Op{Method: http.MethodPut, Path: paths.RouteAPIEnvironmentMode, ID: "setPolicyModes", Tag: "policies", Scope: "admin",
		Summary: "Set the enforcement of rules in an environment (advisory, soft_mandatory, hard_mandatory; never below a rule's floor)",
		Body:    apiPolicyModes{}, Response: apiPolicyModes{}}, h.setPolicyModes)
}

func (h API) checkDrift(c echo.Context) error {
	asked, err := h.WorkspaceChanges.CheckDrift(c.Request().Context(), c.Param("id"))
	if err != nil {
		return err
	}
	return h.created(c, asked.Run)
}

func (h API) correctDrift(c echo.Context) error {
	asked, err := h.WorkspaceChanges.PlanToCorrect(c.Request().Context(), c.Param("id"))
	if err != nil {
		return err
	}
	return h.created(c, asked.Run)
}

type apiRollback struct {
	VersionID string `json:"version_id" doc:"a state version of the workspace (GET …/state-versions)"`
}

func (h API) rollBack(c echo.Context) error {
	var body apiRollback
	if err := bindJSON(c, &body); err != nil {
		return err
	}
	asked, err := h.WorkspaceChanges.RollBack(c.Request().Context(), c.Param("id"), body.VersionID)
	if err != nil {
		return err
	}
	return h.created(c, asked.Run)
}

type apiPolicyUpload struct {
	Name  string `json:"name"`
	Rego  string `json:"rego"`
	Tests string `json:"tests"`
}

type apiPolicyUploaded struct {
	Name    string `json:"name"`
	Version int    `json:"version"`
}

func (h API) uploadPolicy(c echo.Context) error {
	var body apiPolicyUpload
	if err := bindJSON(c, &body); err != nil {
		return err
	}
	p, err := h.Policies.Upload(c.Request().Context(), strings.TrimSpace(body.Name), body.Rego, body.Tests)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusCreated, apiPolicyUploaded{Name: p.Name, Version: p.Version})
}

type apiActive struct {
	Active bool `json:"active"`
}

func (h API) setPolicyActive(c echo.Context) error {
	var body apiActive
	if err := bindJSON(c, &body); err != nil {
		return err
	}
	if err := h.Policies.SetActive(c.Request().Context(), c.Param("name"), body.Active); err != nil {
		return err
	}
	return c.JSON(http.StatusOK, body)
}

type apiPolicyModes struct {
	// Modes maps a rule's id to its enforcement in the environment.
	Modes map[string]string `json:"modes"`
}

func (h API) setPolicyModes(c echo.Context) error {
	var body apiPolicyModes
	if err := bindJSON(c, &body); err != nil {
		return err
	}
	if body.Modes == nil {
		body.Modes = map[string]string{}
	}
	if err := h.Policies.SetModes(c.Request().Context(), c.Param("id"), body.Modes); err != nil {
		return err
	}
	return c.JSON(http.StatusOK, body)
}
