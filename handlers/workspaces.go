package handlers

import (
	"cmp"
	"context"
	"net/http"
	"slices"
	"time"

	"github.com/labstack/echo/v4"

	"gantry/handlers/render"
	"gantry/models/authz"
	"gantry/models/breakglass"
	"gantry/models/listing"
	"gantry/models/rollback"
	"gantry/models/run"
	"gantry/models/state"
	"gantry/models/workspace"
	"gantry/views"
	"gantry/views/paths"
)

// WorkspaceLister searches and reads workspaces.
type WorkspaceLister interface {
	Search(ctx context.Context, q workspace.Query) (listing.Result[workspace.View], int64, error)
	Get(ctx context.Context, id string) (workspace.View, error)
	Views(ctx context.Context, ids []string) (map[string]workspace.View, error)
}

// RunLister lists runs.
type RunLister interface {
	ListForWorkspace(ctx context.Context, workspaceID string, limit int) ([]run.Run, error)
	Latest(ctx context.Context, workspaceIDs []string) (map[string]run.LastRun, error)
}

// ListNames names what lists filter by: the environments the reader may see (id to
// name) and the catalog's templates.
type ListNames interface {
	EnvironmentNames(ctx context.Context) (map[string]string, error)
	TemplateNames() []string
}

// Workspaces serves the workspace list and workspace pages.
type Workspaces struct {
	Workspaces WorkspaceLister
	Runs       RunLister
	States     WorkspaceStates
	Names      ListNames
	// Catalog gives the template's irreversible types (the rollback boundary).
	Catalog CatalogReader
	// Drift reads the workspace's newest drift check; Windows its break-glass windows.
	Drift   DriftRuns
	Windows WorkspaceWindows
}

// WorkspaceWindows lists a workspace's break-glass windows (breakglass.Service).
type WorkspaceWindows interface {
	OfWorkspace(ctx context.Context, workspaceID string, limit int) ([]breakglass.Window, error)
}

// WorkspaceStates reads what a workspace's state holds (state.Store).
type WorkspaceStates interface {
	OfWorkspace(ctx context.Context, workspaceID string, limit int) (state.WorkspaceState, error)
}

// Register adds the workspace routes to g.
func (h Workspaces) Register(g *echo.Group) {
	g.GET(paths.Workspaces(), h.list)
	g.GET(paths.RouteWorkspace, h.show)
}

// workspaceColumns are the workspace list's columns.
var workspaceColumns = []sortColumn{{label: "Workspace", key: workspace.SortName}, {label: "Environment", key: workspace.SortEnvironment},
	{label: "Template", key: workspace.SortTemplate}, {label: "Last run", key: workspace.SortActivity, descFirst: true}}

// list is one page of the workspaces the reader may see: searched by name, filtered by
// environment, template or an apply in progress, sorted by a column, each with its
// newest run.
func (h Workspaces) list(c echo.Context) error {
	ctx := c.Request().Context()
	l, err := readList(c, paths.Workspaces(), workspace.SortKeys(), listing.Sort{Key: workspace.SortName}, 50)
	if err != nil {
		return err
	}
	envs, templates, err := filterChoices(ctx, h.Names)
	if err != nil {
		return err
	}
	filters := []views.ListFilter{{Name: "environment", Label: "Environment", Any: "Any environment", Choices: envs, Selected: choice(l, "environment", envs)},
		{Name: "template", Label: "Template", Any: "Any template", Choices: templates, Selected: choice(l, "template", templates)}}
	checks := []views.ListCheck{{Name: "applying", Label: "Only those applying now", Checked: l.query.Get("applying") != ""}}
	p := views.WorkspacesProps{Controls: l.controls("workspaces", "Search workspaces", "Part of a workspace's name.", filters, checks),
		Headers: l.headers(workspaceColumns)}
	p.Controls.Noun, p.Controls.Nouns = "workspace", "workspaces"
	if l.refused() {
		return render.Page(c, http.StatusUnprocessableEntity, views.Workspaces(p))
	}
	page, total, err := h.Workspaces.Search(ctx, workspace.Query{Text: l.text, EnvironmentID: filters[0].Selected, Template: filters[1].Selected,
		Applying: checks[0].Checked, Page: l.page})
	if err != nil {
		return err
	}
	p.Controls.Total, p.None = total, total == 0 && !p.Controls.Filtered
	ids := make([]string, len(page.Rows))
	for i, w := range page.Rows {
		ids[i] = w.ID
	}
	last, err := h.Runs.Latest(ctx, ids)
	if err != nil {
		return err
	}
	for _, w := range page.Rows {
		row := views.WorkspaceRow{ID: w.ID, Name: w.Name, Environment: w.EnvironmentName, Template: w.TemplateName, Applying: w.ActiveRunID != nil}
		if r, ok := last[w.ID]; ok {
			row.LastRun = &views.RunRow{ID: r.ID, Label: r.Label(), Workspace: w.Name, Environment: w.EnvironmentName,
				Kind: string(r.Kind), State: stateOf(r.State), CreatedAt: r.CreatedAt, Simulated: r.Simulated}
		}
		p.Workspaces = append(p.Workspaces, row)
	}
	p.Pager = pager(l, "", page, "Pages of workspaces")
	return render.Page(c, http.StatusOK, views.Workspaces(p))
}

// filterChoices are the environments (by name) and templates lists filter by.
func filterChoices(ctx context.Context, names ListNames) (envs, templates []views.ListChoice, err error) {
	byID, err := names.EnvironmentNames(ctx)
	if err != nil {
		return nil, nil, err
	}
	for id, name := range byID {
		envs = append(envs, views.ListChoice{Value: id, Label: name})
	}
	slices.SortFunc(envs, func(a, b views.ListChoice) int { return cmp.Compare(a.Label, b.Label) })
	for _, t := range names.TemplateNames() {
		templates = append(templates, views.ListChoice{Value: t, Label: t})
	}
	return envs, templates, nil
}

func (h Workspaces) show(c echo.Context) error {
	ctx := c.Request().Context()
	ws, err := h.Workspaces.Get(ctx, c.Param("id"))
	if err != nil {
		return err
	}
	runs, err := h.Runs.ListForWorkspace(ctx, ws.ID, 100)
	if err != nil {
		return err
	}
	p := views.WorkspaceProps{ID: ws.ID, Name: ws.Name, Environment: ws.EnvironmentName, Template: ws.TemplateName}
	if ws.ActiveRunID != nil {
		p.ActiveRun = *ws.ActiveRunID
	}
	if p.Runs, err = runRows(ctx, h.Workspaces, runs); err != nil {
		return err
	}
	st, err := h.States.OfWorkspace(ctx, ws.ID, 20)
	if err != nil {
		return err
	}
	labels := map[string]string{}
	for _, r := range runs {
		labels[r.ID] = r.Label()
	}
	subject, _ := authz.SubjectFrom(ctx)
	for i, v := range st.Versions {
		row := views.StateVersionRow{Serial: v.Serial, At: v.CreatedAt, SHA256: v.SHA256}
		if v.RunID != nil {
			row.RunID, row.RunLabel = *v.RunID, cmp.Or(labels[*v.RunID], *v.RunID)
			// An earlier version a run wrote can be rolled back to (the page that asks
			// says when that run was a destroy).
			if i > 0 && subject.Can(authz.PermProvisioningPlan) {
				row.RollbackURL = paths.WorkspaceRollback(ws.ID, v.ID)
			}
		}
		p.Versions = append(p.Versions, row)
	}
	var irreversible []string
	if e, err := h.Catalog.Get(ws.TemplateName); err == nil {
		irreversible = e.Template.Irreversible
	}
	p.Boundary = append(rollback.TemplateBoundary(irreversible), rollback.WorkspaceBoundary(irreversible, stateResources(st))...)
	for _, r := range st.Resources {
		p.Resources = append(p.Resources, views.ResourceRow{Address: r.Address, Type: r.Type, ID: r.ID})
	}
	for _, o := range st.Outputs {
		value := o.Value
		if o.Sensitive {
			value = "(sensitive)"
		}
		p.Outputs = append(p.Outputs, views.KV{Key: o.Name, Value: value})
	}
	if err := h.operations(ctx, ws, subject, len(st.Resources) > 0, &p); err != nil {
		return err
	}
	return render.Page(c, http.StatusOK, views.WorkspacePage(p))
}

// operations fills the workspace page's drift section and break-glass windows; changes
// (checking drift, correcting it, asking for a window) are offered on a workspace that
// holds something, each to who holds what its service requires.
func (h Workspaces) operations(ctx context.Context, ws workspace.View, subject authz.Subject, holds bool, p *views.WorkspaceProps) error {
	latest, err := h.Drift.LatestDrift(ctx, ws.ID)
	if err != nil {
		return err
	}
	p.Drift = views.WorkspaceDriftProps{WorkspaceID: ws.ID, Schedule: driftSchedule(ws.EnvironmentDriftMinutes),
		CanCheck: holds && run.MayCheckDrift(subject)}
	if latest != nil {
		v := driftView(*latest)
		p.Drift.Latest = &v
		p.Drift.CanCorrect = holds && run.MayPlanToCorrect(subject) && (latest.DriftStatus == run.DriftExpected || latest.DriftStatus == run.DriftUnowned)
	}
	windows, err := h.Windows.OfWorkspace(ctx, ws.ID, 20)
	if err != nil {
		return err
	}
	now := time.Now()
	for _, w := range windows {
		row := windowRow(w, now)
		p.Windows = append(p.Windows, row)
		if p.Glass == nil && (w.State.Active() || w.State == breakglass.AwaitingCodification) {
			p.Glass = &row
		}
	}
	p.CanAskWindow = holds && breakglass.MayAsk(subject)
	return nil
}
