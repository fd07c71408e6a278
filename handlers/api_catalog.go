package handlers

import (
	"net/http"
	"sort"
	"strconv"

	"github.com/labstack/echo/v4"

	"gantry/handlers/openapi"
	"gantry/models/catalog"
	"gantry/models/errs"
	"gantry/models/pages"
	"gantry/models/run"
	"gantry/views/paths"
)

func (h API) registerCatalog(g *echo.Group, spec *openapi.Spec) {
	spec.Route(g, openapi.Op{Method: http.MethodGet, Path: paths.APITemplates(), ID: "listTemplates", Tag: "catalog", Scope: "read",
		Summary: "The catalog's templates", Response: apiTemplateList{}}, h.templates)
	spec.Route(g, openapi.Op{Method: http.MethodGet, Path: paths.RouteAPITemplate, ID: "getTemplate", Tag: "catalog", Scope: "read",
		Summary: "One template with its inputs", Response: apiTemplate{}}, h.template)
	spec.Route(g, openapi.Op{Method: http.MethodPost, Path: paths.APIRequests(), ID: "createRequest", Tag: "requests", Scope: "plan (dry run) or apply",
		Summary: "Request a run: plan and apply, a dry run (plan_only) or a destroy of a workspace (destroy); the answer is the queued run with the URLs to poll and stream",
		Body:    apiRequest{}, Status: http.StatusCreated, Response: apiRun{}}, h.request)
	spec.Route(g, openapi.Op{Method: http.MethodPost, Path: paths.RouteAPIWorkspace + "/destroy", ID: "destroyWorkspace", Tag: "requests", Scope: "apply",
		Summary: "Request a destroy run of a workspace, with the inputs of its last applied run (sensitive ones sent again)",
		Body:    apiDestroy{}, Status: http.StatusCreated, Response: apiRun{}}, h.destroy)
}

type apiTemplateList struct {
	Templates []apiTemplate `json:"templates"`
}

// apiTemplate is a catalog template: what it makes and what it asks for.
type apiTemplate struct {
	Name         string `json:"name"`
	Version      string `json:"version"`
	Title        string `json:"title"`
	Description  string `json:"description"`
	Owner        string `json:"owner"`
	ModuleDigest string `json:"module_digest"`
	// Refused says why the catalog refused the template ("" when it may be used).
	Refused      string             `json:"refused"`
	Inputs       []apiInput         `json:"inputs"`
	Prices       map[string]float64 `json:"monthly_prices"`
	Irreversible []string           `json:"irreversible_types"`
	Rollback     string             `json:"rollback"`
}

type apiInput struct {
	Name      string   `json:"name"`
	Label     string   `json:"label"`
	Type      string   `json:"type"`
	Integer   bool     `json:"integer"`
	Required  bool     `json:"required"`
	Default   any      `json:"default"`
	Enum      []string `json:"enum"`
	Min       *float64 `json:"min"`
	Max       *float64 `json:"max"`
	Pattern   string   `json:"pattern"`
	Help      string   `json:"help"`
	Sensitive bool     `json:"sensitive"`
}

func toAPITemplate(e catalog.Entry) apiTemplate {
	t := e.Template
	out := apiTemplate{Name: t.Name, Version: t.Version, Title: t.Title, Description: t.Description, Owner: t.Owner,
		ModuleDigest: e.ModuleDigest, Refused: e.Refused, Inputs: []apiInput{}, Prices: t.Prices, Irreversible: nonNil(t.Irreversible),
		Rollback: t.Rollback}
	if out.Prices == nil {
		out.Prices = map[string]float64{}
	}
	for _, in := range t.Inputs {
		out.Inputs = append(out.Inputs, apiInput{Name: in.Name, Label: in.Label, Type: in.Type, Integer: in.Integer, Required: in.Required,
			Default: in.Default, Enum: nonNil(in.Enum), Min: in.Min, Max: in.Max, Pattern: in.Pattern, Help: in.Help, Sensitive: in.Sensitive})
	}
	return out
}

func (h API) templates(c echo.Context) error {
	all := h.Catalog.All()
	out := apiTemplateList{Templates: make([]apiTemplate, 0, len(all))}
	for _, e := range all {
		out.Templates = append(out.Templates, toAPITemplate(e))
	}
	sort.Slice(out.Templates, func(i, j int) bool { return out.Templates[i].Name < out.Templates[j].Name })
	return c.JSON(http.StatusOK, out)
}

func (h API) template(c echo.Context) error {
	e, err := h.Catalog.Get(c.Param("name"))
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, toAPITemplate(e))
}

// apiRequest asks for a run, as the request form does.
type apiRequest struct {
	Template string `json:"template"`
	// EnvironmentID or Environment (its name) says where; one of them is needed.
	EnvironmentID string `json:"environment_id,omitempty"`
	Environment   string `json:"environment,omitempty" doc:"the environment's name, instead of environment_id"`
	Workspace     string `json:"workspace"`
	// Kind: apply (plan, then apply once approved; the default) or plan_only (a dry run).
	Kind   string            `json:"kind,omitempty" doc:"apply (the default) or plan_only"`
	Inputs map[string]string `json:"inputs,omitempty" doc:"the template's inputs by name, as text (numbers and booleans too)"`
	// NewWorkspace confirms a new workspace whose name is close to an existing one.
	NewWorkspace bool `json:"new_workspace,omitempty"`
	// Reason and Ticket say why the run is asked for (optional free text).
	Reason string `json:"reason,omitempty" doc:"why the run is asked for, shown to whoever decides (at most 1000 characters; never decided on)"`
	Ticket string `json:"ticket,omitempty" doc:"the change ticket or issue the request answers (one line, at most 120 characters)"`
}

func (h API) request(c echo.Context) error {
	var body apiRequest
	if err := bindJSON(c, &body); err != nil {
		return err
	}
	kind := run.Kind(body.Kind)
	switch {
	case body.Kind == "":
		kind = run.KindApply
	case kind == run.KindDestroy:
		return invalid("kind", "A destroy is asked for on its workspace: POST "+paths.APIWorkspace("{id}")+"/destroy.")
	}
	if body.Inputs == nil {
		body.Inputs = map[string]string{}
	}
	if body.Environment != "" {
		id, err := h.environmentNamed(c, body.Environment)
		if err != nil {
			return err
		}
		body.EnvironmentID = id
	}
	r, err := h.Requests.Forms.Request(c.Request().Context(), run.Request{Template: body.Template, EnvironmentID: body.EnvironmentID,
		Workspace: body.Workspace, Kind: kind, Inputs: body.Inputs, NewWorkspace: body.NewWorkspace,
		Note: run.Note{Reason: body.Reason, Ticket: body.Ticket}})
	if err != nil {
		return err
	}
	return h.created(c, r)
}

// environmentNamed is the id of the environment named name among those the caller may
// request runs in; any other name (another organization's, a restricted one without a
// grant, none) is the same field message.
func (h API) environmentNamed(c echo.Context, name string) (string, error) {
	envs, err := h.Environments.Choices(c.Request().Context())
	if err != nil {
		return "", err
	}
	for _, e := range envs {
		if e.Name == name {
			return e.ID, nil
		}
	}
	return "", invalid("environment", "There is no environment named "+strconv.Quote(name)+" you may request runs in.")
}

// apiDestroy confirms a destroy by the workspace's name.
type apiDestroy struct {
	Confirm string `json:"confirm" doc:"the workspace's name"`
	// Inputs are the template's sensitive inputs (never stored readable, so sent again).
	Inputs map[string]string `json:"inputs,omitempty"`
}

func (h API) destroy(c echo.Context) error {
	var body apiDestroy
	if err := bindJSON(c, &body); err != nil {
		return err
	}
	r, refused, err := h.Requests.Forms.SubmitDestroy(c.Request().Context(), c.Param("id"),
		pages.DestroyConfirmation{Name: body.Confirm, Sensitive: body.Inputs})
	if err != nil {
		return err
	}
	if refused != nil {
		return &errs.Validation{Fields: refused.Errors}
	}
	return h.created(c, r)
}

// created answers a new run, as stored (the read models read it back with what the
// database filled in): 201, its API URL in Location.
func (h API) created(c echo.Context, r run.Run) error {
	c.Response().Header().Set(echo.HeaderLocation, paths.APIRun(r.ID))
	return c.JSON(http.StatusCreated, toAPIRun(r))
}
