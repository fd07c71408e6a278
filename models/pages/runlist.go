package pages

import (
	"context"
	"slices"

	"gantry/models/run"
)

// RunSearcher searches the runs the reader may see (run.Reads).
type RunSearcher interface {
	Search(ctx context.Context, q run.ListQuery) (run.SearchResult, error)
}

// RunList builds the runs list.
type RunList struct {
	Runs       RunSearcher
	Workspaces WorkspaceViews
	Names      ListNames
}

// RunListQuery searches, filters, sorts and pages the runs list.
type RunListQuery struct {
	run.ListQuery
	// Rows is false for a list form that was refused: the page without its rows.
	Rows bool
}

// RunListPage is one page of the runs the reader may see, with their workspaces, and
// what the list filters by.
type RunListPage struct {
	Result run.SearchResult
	Lines  []RunLine
	// EnvironmentNames (by id) and Templates are what the filters choose from.
	EnvironmentNames map[string]string
	Templates        []string
}

// List reads the runs list for q. An environment or template gone since the link was
// made filters nothing rather than everything.
func (s RunList) List(ctx context.Context, q RunListQuery) (RunListPage, error) {
	envs, err := s.Names.EnvironmentNames(ctx)
	if err != nil {
		return RunListPage{}, err
	}
	p := RunListPage{EnvironmentNames: envs, Templates: s.Names.TemplateNames()}
	if !q.Rows {
		return p, nil
	}
	if _, known := envs[q.EnvironmentID]; !known {
		q.EnvironmentID = ""
	}
	if !slices.Contains(p.Templates, q.Template) {
		q.Template = ""
	}
	if p.Result, err = s.Runs.Search(ctx, q.ListQuery); err != nil {
		return RunListPage{}, err
	}
	if p.Lines, err = RunLines(ctx, s.Workspaces, p.Result.Rows); err != nil {
		return RunListPage{}, err
	}
	return p, nil
}
