package handlers

import (
	"cmp"
	"context"
	"net/http"
	"time"

	"github.com/labstack/echo/v4"

	"gantry/handlers/render"
	"gantry/models/breakglass"
	"gantry/models/listing"
	"gantry/models/pages"
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

// WorkspacePages reads the workspace list and each workspace's page (pages.Workspaces).
type WorkspacePages interface {
	List(ctx context.Context, q pages.WorkspaceQuery) (pages.WorkspaceList, error)
	Page(ctx context.Context, id string) (pages.WorkspacePage, error)
	State(ctx context.Context, id string, limit int) (state.WorkspaceState, error)
}

// Workspaces serves the workspace list and workspace pages.
type Workspaces struct {
	Pages WorkspacePages
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
	l, err := readList(c, paths.Workspaces(), workspace.SortKeys(), listing.Sort{Key: workspace.SortName}, 50)
	if err != nil {
		return err
	}
	q := pages.WorkspaceQuery{Query: workspace.Query{Text: l.text, EnvironmentID: l.query.Get("environment"), Template: l.query.Get("template"),
		Applying: l.query.Get("applying") != "", Archived: l.query.Get("archived") != "", Page: l.page}, Rows: !l.refused()}
	list, err := h.Pages.List(c.Request().Context(), q)
	if err != nil {
		return err
	}
	status := http.StatusOK
	if l.refused() {
		status = http.StatusUnprocessableEntity
	}
	return render.Page(c, status, views.Workspaces(workspacesProps(l, list)))
}

// workspacesProps is the workspace list as drawn for list form l.
func workspacesProps(l listRequest, list pages.WorkspaceList) views.WorkspacesProps {
	envs, templates := listChoices(list.EnvironmentNames), listChoices(templateNames(list.Templates))
	filters := []views.ListFilter{{Name: "environment", Label: "Environment", Any: "Any environment", Choices: envs, Selected: choice(l, "environment", envs)},
		{Name: "template", Label: "Template", Any: "Any template", Choices: templates, Selected: choice(l, "template", templates)}}
	checks := []views.ListCheck{{Name: "applying", Label: "Only those applying now", Checked: l.query.Get("applying") != ""},
		{Name: "archived", Label: "Archived workspaces instead", Checked: l.query.Get("archived") != ""}}
	p := views.WorkspacesProps{Controls: l.controls("workspaces", "Search workspaces", "Part of a workspace's name.", filters, checks),
		Headers: l.headers(workspaceColumns)}
	p.Controls.Noun, p.Controls.Nouns = "workspace", "workspaces"
	if l.refused() {
		return p
	}
	p.Controls.Total, p.None = list.Total, list.Total == 0 && !p.Controls.Filtered
	for _, w := range list.Page.Rows {
		row := views.WorkspaceRow{ID: w.ID, Name: w.Name, Environment: w.EnvironmentName, Template: w.TemplateName, Applying: w.ActiveRunID != nil}
		if r, ok := list.Latest[w.ID]; ok {
			row.LastRun = &views.RunRow{ID: r.ID, Label: r.Label(), Workspace: w.Name, Environment: w.EnvironmentName,
				Kind: kindOf(r.Kind), State: stateOf(r.State), CreatedAt: r.CreatedAt, Simulated: r.Simulated}
		}
		p.Workspaces = append(p.Workspaces, row)
	}
	p.Pager = pager(l, "", list.Page, "Pages of workspaces")
	return p
}

// templateNames are templates as filter options: each its own name.
func templateNames(templates []string) map[string]string {
	out := make(map[string]string, len(templates))
	for _, t := range templates {
		out[t] = t
	}
	return out
}

func (h Workspaces) show(c echo.Context) error {
	page, err := h.Pages.Page(c.Request().Context(), c.Param("id"))
	if err != nil {
		return err
	}
	return render.Page(c, http.StatusOK, views.WorkspacePage(workspaceProps(page)))
}

// lifecycleProps puts into p what the page says of the workspace's life: archived,
// emptied by a destroy, and whether it can be archived.
func lifecycleProps(p *views.WorkspaceProps, page pages.WorkspacePage) {
	ws := page.Workspace
	p.CanArchive, p.ArchiveRefusal = page.CanArchive, page.ArchiveRefusal
	if ws.ArchivedAt != nil {
		p.Archived = "Archived on " + ws.ArchivedAt.UTC().Format("2 January 2006") + " by " + ws.ArchivedByName
	}
	if e := page.Emptied; e != nil {
		p.EmptiedBy = &views.RunLink{ID: e.ID, Label: e.Label(), Destroy: e.Kind == run.KindDestroy}
		p.EmptiedAt = page.State.Versions[0].CreatedAt
	}
}

// workspaceProps is a workspace's page as drawn.
func workspaceProps(page pages.WorkspacePage) views.WorkspaceProps {
	ws, st := page.Workspace, page.State
	p := views.WorkspaceProps{ID: ws.ID, Name: ws.Name, Environment: ws.EnvironmentName, Template: ws.TemplateName, Boundary: page.Boundary,
		Versions: stateVersionRows(page), Drift: views.WorkspaceDriftProps{WorkspaceID: ws.ID, Schedule: driftSchedule(ws.EnvironmentDriftMinutes),
			CanCheck: page.CanCheckDrift, CanCorrect: page.CanCorrect}, CanAskWindow: page.CanAskWindow,
		CanChange: page.CanChange, CanPromote: page.CanPromote, CanDestroy: page.CanDestroy,
		HasState: len(st.Versions) > 0}
	if ws.ActiveRunID != nil {
		p.ActiveRun = *ws.ActiveRunID
	}
	lifecycleProps(&p, page)
	for _, r := range page.Runs {
		p.Runs = append(p.Runs, runRow(r, ws))
	}
	for _, r := range st.Resources {
		p.Resources = append(p.Resources, views.ResourceRow{Address: r.Address, Type: r.Type, ID: r.ID})
	}
	p.Outputs = stateOutputs(st.Outputs)
	if latest := page.LatestDrift; latest != nil {
		v := driftView(*latest)
		p.Drift.Latest = &v
	}
	now := time.Now()
	for _, w := range page.Windows {
		row := windowRow(w, now)
		p.Windows = append(p.Windows, row)
		if p.Glass == nil && (w.State.Active() || w.State == breakglass.AwaitingCodification) {
			p.Glass = &row
		}
	}
	return p
}

// stateVersionRows are the workspace's state versions, each linked to the run that
// wrote it; an earlier version a run wrote can be rolled back to (the page that asks
// says when that run was a destroy).
func stateVersionRows(page pages.WorkspacePage) []views.StateVersionRow {
	labels := map[string]string{}
	for _, r := range page.Runs {
		labels[r.ID] = r.Label()
	}
	var rows []views.StateVersionRow
	for i, v := range page.State.Versions {
		row := views.StateVersionRow{Serial: v.Serial, At: v.CreatedAt, SHA256: v.SHA256}
		if v.RunID != nil {
			row.RunID, row.RunLabel = *v.RunID, cmp.Or(labels[*v.RunID], *v.RunID)
			if i > 0 && page.CanRollBack {
				row.RollbackURL = paths.WorkspaceRollback(page.Workspace.ID, v.ID)
			}
		}
		rows = append(rows, row)
	}
	return rows
}
