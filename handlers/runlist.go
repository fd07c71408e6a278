package handlers

import (
	"context"
	"net/http"

	"github.com/labstack/echo/v4"

	"gantry/handlers/render"
	"gantry/models/listing"
	"gantry/models/pages"
	"gantry/models/run"
	"gantry/views"
	"gantry/views/paths"
)

// RunSearcher searches the runs a member may see (run.Reads; the API's run list).
type RunSearcher interface {
	Search(ctx context.Context, q run.ListQuery) (run.SearchResult, error)
}

// RunListPages reads the runs list (pages.RunList).
type RunListPages interface {
	List(ctx context.Context, q pages.RunListQuery) (pages.RunListPage, error)
}

// RunList serves the runs list.
type RunList struct {
	Pages RunListPages
}

// Register adds the runs list's route to g.
func (h RunList) Register(g *echo.Group) { g.GET(paths.Runs(), h.list) }

// runColumns are the runs list's columns.
var runColumns = []sortColumn{{label: "Run"}, {label: "State"}, {label: "Template", key: run.SortTemplate, class: "hide-narrow"},
	{label: "Requested by", key: run.SortRequester, class: "hide-narrow"}, {label: "Requested", key: run.SortRequested, descFirst: true}}

// runStates and runKinds are the runs list's state and kind filters: the codes as
// values (the query keeps them), the words as labels.
func runStates() []views.ListChoice {
	out := make([]views.ListChoice, len(run.States))
	for i, s := range run.States {
		out[i] = views.ListChoice{Value: string(s), Label: s.Words()}
	}
	return out
}

func runKinds() []views.ListChoice {
	out := make([]views.ListChoice, len(run.Kinds))
	for i, k := range run.Kinds {
		out[i] = views.ListChoice{Value: string(k), Label: k.Words()}
	}
	return out
}

// list is one page of the runs the reader may see, newest first unless sorted otherwise.
func (h RunList) list(c echo.Context) error {
	l, err := readList(c, paths.Runs(), run.SortKeys(), listing.Sort{Key: run.SortRequested, Desc: true}, 50)
	if err != nil {
		return err
	}
	q := pages.RunListQuery{ListQuery: run.ListQuery{Text: l.text, State: run.State(choice(l, "state", runStates())),
		EnvironmentID: l.query.Get("environment"), Template: l.query.Get("template"), Kind: run.Kind(choice(l, "kind", runKinds())),
		Mine: l.query.Get("mine") != "", Page: l.page}, Rows: !l.refused()}
	page, err := h.Pages.List(c.Request().Context(), q)
	if err != nil {
		return err
	}
	status := http.StatusOK
	if l.refused() {
		status = http.StatusUnprocessableEntity
	}
	return render.Page(c, status, views.RunList(runListProps(l, page)))
}

// runListProps is the runs list as drawn for list form l.
func runListProps(l listRequest, page pages.RunListPage) views.RunListProps {
	states, envs, templates := runStates(), listChoices(page.EnvironmentNames), listChoices(templateNames(page.Templates))
	filters := []views.ListFilter{{Name: "state", Label: "State", Any: "Any state", Choices: states, Selected: choice(l, "state", states)},
		{Name: "environment", Label: "Environment", Any: "Any environment", Choices: envs, Selected: choice(l, "environment", envs)},
		{Name: "template", Label: "Template", Any: "Any template", Choices: templates, Selected: choice(l, "template", templates)},
		{Name: "kind", Label: "Kind", Any: "Any kind", Choices: runKinds(), Selected: choice(l, "kind", runKinds())}}
	checks := []views.ListCheck{{Name: "mine", Label: "Only runs I requested", Checked: l.query.Get("mine") != ""}}
	p := views.RunListProps{Controls: l.controls("runs", "Search runs", "A workspace's name, a run such as billing-prod #3, a template, who requested it, or a run id.",
		filters, checks), Headers: l.headers(runColumns)}
	p.Controls.Noun, p.Controls.Nouns = "run", "runs"
	if l.refused() {
		return p
	}
	p.Controls.Total = page.Result.Total
	if page.Result.Narrow {
		p.Controls.Note = "The search text is in more than 1,000 workspace names; only the runs of the first 1,000 by name are counted. Type more of the name."
	}
	for _, r := range page.Lines {
		p.Runs = append(p.Runs, runRow(r.Run, r.Workspace))
	}
	p.Pager = pager(l, "", page.Result.Result, "Pages of runs")
	return p
}
