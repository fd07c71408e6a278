package handlers

import (
	"context"
	"net/http"

	"github.com/labstack/echo/v4"

	"gantry/handlers/render"
	"gantry/models/listing"
	"gantry/models/run"
	"gantry/views"
	"gantry/views/paths"
)

// RunSearcher searches the runs a member may see.
type RunSearcher interface {
	Search(ctx context.Context, q run.ListQuery) (run.SearchResult, error)
}

// RunList serves the runs list.
type RunList struct {
	Runs       RunSearcher
	Workspaces WorkspaceReader
	Names      ListNames
}

// Register adds the runs list's route to g.
func (h RunList) Register(g *echo.Group) { g.GET(paths.Runs(), h.list) }

// runColumns are the runs list's columns.
var runColumns = []sortColumn{{label: "Run"}, {label: "State"}, {label: "Template", key: run.SortTemplate, class: "hide-narrow"},
	{label: "Requested by", key: run.SortRequester, class: "hide-narrow"}, {label: "Requested", key: run.SortRequested, descFirst: true}}

// runStates and runKinds are the runs list's state and kind filters.
var runKinds = []views.ListChoice{{Value: string(run.KindApply), Label: "plan and apply"}, {Value: string(run.KindPlanOnly), Label: "dry run"},
	{Value: string(run.KindDestroy), Label: "destroy"}, {Value: string(run.KindDrift), Label: "drift check"}, {Value: string(run.KindCodify), Label: "codification"}}

func runStates() []views.ListChoice {
	out := make([]views.ListChoice, len(run.States))
	for i, s := range run.States {
		out[i] = views.ListChoice{Value: string(s), Label: string(s)}
	}
	return out
}

// list is one page of the runs the reader may see, newest first unless sorted otherwise.
func (h RunList) list(c echo.Context) error {
	ctx := c.Request().Context()
	l, err := readList(c, paths.Runs(), run.SortKeys(), listing.Sort{Key: run.SortRequested, Desc: true}, 50)
	if err != nil {
		return err
	}
	envs, templates, err := filterChoices(ctx, h.Names)
	if err != nil {
		return err
	}
	states := runStates()
	filters := []views.ListFilter{{Name: "state", Label: "State", Any: "Any state", Choices: states, Selected: choice(l, "state", states)},
		{Name: "environment", Label: "Environment", Any: "Any environment", Choices: envs, Selected: choice(l, "environment", envs)},
		{Name: "template", Label: "Template", Any: "Any template", Choices: templates, Selected: choice(l, "template", templates)},
		{Name: "kind", Label: "Kind", Any: "Any kind", Choices: runKinds, Selected: choice(l, "kind", runKinds)}}
	checks := []views.ListCheck{{Name: "mine", Label: "Only runs I requested", Checked: l.query.Get("mine") != ""}}
	p := views.RunListProps{Controls: l.controls("runs", "Search runs", "A workspace's name, a run such as billing-prod #3, a template, who requested it, or a run id.",
		filters, checks), Headers: l.headers(runColumns)}
	p.Controls.Noun, p.Controls.Nouns = "run", "runs"
	if l.refused() {
		return render.Page(c, http.StatusUnprocessableEntity, views.RunList(p))
	}
	res, err := h.Runs.Search(ctx, run.ListQuery{Text: l.text, State: run.State(filters[0].Selected), EnvironmentID: filters[1].Selected,
		Template: filters[2].Selected, Kind: run.Kind(filters[3].Selected), Mine: checks[0].Checked, Page: l.page})
	if err != nil {
		return err
	}
	p.Controls.Total = res.Total
	if res.Narrow {
		p.Controls.Note = "The search text is in more than 1,000 workspace names; only the runs of the first 1,000 by name are counted. Type more of the name."
	}
	if p.Runs, err = runRows(ctx, h.Workspaces, res.Rows); err != nil {
		return err
	}
	p.Pager = pager(l, "", res.Result, "Pages of runs")
	return render.Page(c, http.StatusOK, views.RunList(p))
}
