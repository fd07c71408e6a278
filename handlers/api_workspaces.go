package handlers

import (
	"net/http"
	"net/url"
	"strconv"
	"time"

	"github.com/labstack/echo/v4"

	"gantry/handlers/openapi"
	"gantry/models/errs"
	"gantry/models/listing"
	"gantry/models/workspace"
	"gantry/views/paths"
)

func (h API) registerWorkspaces(g *echo.Group, spec *openapi.Spec) {
	list := []openapi.Param{{Name: "q", Description: "part of a workspace's name"}, {Name: "environment_id"}, {Name: "template"},
		{Name: "applying", Type: "boolean", Description: "only those applying now"},
		{Name: "archived", Type: "boolean", Description: "the archived workspaces instead of the others"},
		{Name: "sort", Description: "name, environment, template or activity; a leading - reverses"},
		{Name: "after"}, {Name: "before"}, {Name: "limit", Type: "integer", Description: "1 to 200; 50 by default"}}
	spec.Route(g, openapi.Op{Method: http.MethodGet, Path: paths.APIWorkspaces(), ID: "listWorkspaces", Tag: "workspaces", Scope: "read",
		Summary: "The workspaces the caller may see", Query: list, Response: apiWorkspaceList{}}, h.workspaces)
	spec.Route(g, openapi.Op{Method: http.MethodGet, Path: paths.RouteAPIWorkspace, ID: "getWorkspace", Tag: "workspaces", Scope: "read",
		Summary: "One workspace", Response: apiWorkspace{}}, h.workspace)
	spec.Route(g, openapi.Op{Method: http.MethodGet, Path: paths.RouteAPIWorkspace + "/state-versions", ID: "listStateVersions", Tag: "workspaces", Scope: "read",
		Summary: "The workspace's state versions, newest first, with the resources the newest holds", Response: apiStateVersions{}}, h.stateVersions)
	spec.Route(g, openapi.Op{Method: http.MethodGet, Path: paths.RouteAPIWorkspace + "/outputs", ID: "getWorkspaceOutputs", Tag: "workspaces", Scope: "read",
		Summary: "The outputs of the workspace's newest state (a sensitive one carries no value)", Response: apiOutputs{}}, h.outputs)
	spec.Route(g, openapi.Op{Method: http.MethodPost, Path: paths.RouteAPIWorkspace + "/archive", ID: "archiveWorkspace", Tag: "workspaces", Scope: "apply",
		Summary: "Archive a workspace that holds nothing (destroyed, or never applied) and has no run under way: it leaves the list, its runs, state history and audit stay; a new request into its name brings it back",
		Status:  http.StatusOK, Response: apiWorkspace{}}, h.archiveWorkspace)
}

func (h API) archiveWorkspace(c echo.Context) error {
	w, err := h.Archiver.Archive(c.Request().Context(), c.Param("id"))
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, toAPIWorkspace(w))
}

type apiWorkspace struct {
	ID            string `json:"id"`
	Name          string `json:"name"`
	EnvironmentID string `json:"environment_id"`
	Environment   string `json:"environment"`
	Template      string `json:"template"`
	// ApplyingRunID is the run applying or verifying now, if any.
	ApplyingRunID *string   `json:"applying_run_id"`
	LastRunAt     time.Time `json:"last_run_at"`
	CreatedAt     time.Time `json:"created_at"`
	// ArchivedAt is when it was archived (null: it is listed).
	ArchivedAt *time.Time `json:"archived_at"`
}

type apiWorkspaceList struct {
	Workspaces []apiWorkspace `json:"workspaces"`
	Total      int64          `json:"total"`
	Next       string         `json:"next,omitempty"`
	Prev       string         `json:"prev,omitempty"`
}

func toAPIWorkspace(w workspace.View) apiWorkspace {
	return apiWorkspace{ID: w.ID, Name: w.Name, EnvironmentID: w.EnvironmentID, Environment: w.EnvironmentName, Template: w.TemplateName,
		ApplyingRunID: w.ActiveRunID, LastRunAt: w.LastRunAt.UTC(), CreatedAt: w.CreatedAt.UTC(), ArchivedAt: utcPtr(w.ArchivedAt)}
}

// apiLimit reads the limit parameter (1 to listing.MaxLimit, def when absent).
func apiLimit(c echo.Context, def int) (int, error) {
	raw := c.QueryParam("limit")
	if raw == "" {
		return def, nil
	}
	n, err := strconv.Atoi(raw)
	if err != nil || n < 1 || n > listing.MaxLimit {
		return 0, invalid("limit", "must be a whole number from 1 to "+strconv.Itoa(listing.MaxLimit))
	}
	return n, nil
}

// pageLink is the URL of the page at cursor cur of the list at path, with the
// request's other parameters ("" when there is no such page).
func pageLink(c echo.Context, path, key string, cur *listing.Cursor) string {
	if cur == nil {
		return ""
	}
	v := url.Values{}
	for k, vals := range c.QueryParams() {
		if k != "after" && k != "before" && len(vals) > 0 && vals[0] != "" {
			v.Set(k, vals[0])
		}
	}
	v.Set(key, cur.String())
	return path + "?" + v.Encode()
}

// boolParam reads a true/false parameter (absent: false).
func boolParam(c echo.Context, name string) (bool, error) {
	raw := c.QueryParam(name)
	if raw == "" {
		return false, nil
	}
	b, err := strconv.ParseBool(raw)
	if err != nil {
		return false, invalid(name, "must be true or false")
	}
	return b, nil
}

func (h API) workspaces(c echo.Context) error {
	limit, err := apiLimit(c, 50)
	if err != nil {
		return err
	}
	l, err := readList(c, paths.APIWorkspaces(), workspace.SortKeys(), listing.Sort{Key: workspace.SortName}, limit)
	if err != nil {
		return err
	}
	if l.refused() {
		return &errs.Validation{Fields: l.errors}
	}
	applying, err := boolParam(c, "applying")
	if err != nil {
		return err
	}
	archived, err := boolParam(c, "archived")
	if err != nil {
		return err
	}
	page, total, err := h.Workspaces.Search(c.Request().Context(), workspace.Query{Text: l.text, EnvironmentID: c.QueryParam("environment_id"),
		Template: c.QueryParam("template"), Applying: applying, Archived: archived, Page: l.page})
	if err != nil {
		return err
	}
	out := apiWorkspaceList{Workspaces: make([]apiWorkspace, 0, len(page.Rows)), Total: total,
		Next: pageLink(c, paths.APIWorkspaces(), "after", page.Next), Prev: pageLink(c, paths.APIWorkspaces(), "before", page.Prev)}
	for _, w := range page.Rows {
		out.Workspaces = append(out.Workspaces, toAPIWorkspace(w))
	}
	return c.JSON(http.StatusOK, out)
}

func (h API) workspace(c echo.Context) error {
	w, err := h.Workspaces.Get(c.Request().Context(), c.Param("id"))
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, toAPIWorkspace(w))
}

type apiStateVersions struct {
	Versions []apiStateVersion `json:"versions"`
	// Resources are what the newest version holds.
	Resources []apiResource `json:"resources"`
}

type apiStateVersion struct {
	ID      string    `json:"id"`
	Serial  int64     `json:"serial"`
	Lineage string    `json:"lineage"`
	SHA256  string    `json:"sha256"`
	RunID   *string   `json:"run_id"`
	Created time.Time `json:"created_at"`
}

type apiResource struct {
	Address string `json:"address"`
	Type    string `json:"type"`
	ID      string `json:"id"`
}

type apiOutputs struct {
	Outputs []apiOutput `json:"outputs"`
}

type apiOutput struct {
	Name      string `json:"name"`
	Value     string `json:"value" doc:"as text; empty for a sensitive output"`
	Sensitive bool   `json:"sensitive"`
}

func (h API) stateVersions(c echo.Context) error {
	st, err := h.WorkspacePages.State(c.Request().Context(), c.Param("id"), 100)
	if err != nil {
		return err
	}
	out := apiStateVersions{Versions: []apiStateVersion{}, Resources: []apiResource{}}
	for _, v := range st.Versions {
		out.Versions = append(out.Versions, apiStateVersion{ID: v.ID, Serial: v.Serial, Lineage: v.Lineage, SHA256: v.SHA256, RunID: v.RunID,
			Created: v.CreatedAt.UTC()})
	}
	for _, r := range st.Resources {
		out.Resources = append(out.Resources, apiResource{Address: r.Address, Type: r.Type, ID: r.ID})
	}
	return c.JSON(http.StatusOK, out)
}

func (h API) outputs(c echo.Context) error {
	st, err := h.WorkspacePages.State(c.Request().Context(), c.Param("id"), 1)
	if err != nil {
		return err
	}
	out := apiOutputs{Outputs: []apiOutput{}}
	for _, o := range st.Outputs {
		value := o.Value
		if o.Sensitive {
			value = ""
		}
		out.Outputs = append(out.Outputs, apiOutput{Name: o.Name, Value: value, Sensitive: o.Sensitive})
	}
	return c.JSON(http.StatusOK, out)
}
