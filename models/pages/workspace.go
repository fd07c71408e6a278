package pages

import (
	"context"
	"slices"

	"gantry/models/authz"
	"gantry/models/breakglass"
	"gantry/models/listing"
	"gantry/models/rollback"
	"gantry/models/run"
	"gantry/models/state"
	"gantry/models/workspace"
)

// WorkspaceSearch searches and reads workspaces (workspace.Service).
type WorkspaceSearch interface {
	WorkspaceViews
	Search(ctx context.Context, q workspace.Query) (listing.Result[workspace.View], int64, error)
}

// WorkspaceRuns reads a workspace's runs, newest first, and the newest run of several
// (run.Reads).
type WorkspaceRuns interface {
	ListForWorkspace(ctx context.Context, workspaceID string, limit int) ([]run.Run, error)
	Latest(ctx context.Context, workspaceIDs []string) (map[string]run.LastRun, error)
}

// LatestDrift reads a workspace's newest drift check (run.DriftChecks).
type LatestDrift interface {
	LatestDrift(ctx context.Context, workspaceID string) (*run.Run, error)
}

// WorkspaceWindows lists a workspace's break-glass windows (breakglass.Service).
type WorkspaceWindows interface {
	OfWorkspace(ctx context.Context, workspaceID string, limit int) ([]breakglass.Window, error)
}

// Workspaces builds the workspace list and each workspace's page.
type Workspaces struct {
	Workspaces WorkspaceSearch
	Runs       WorkspaceRuns
	States     WorkspaceStates
	Names      ListNames
	// Catalog gives the template's irreversible types (the rollback boundary).
	Catalog CatalogReader
	Drift   LatestDrift
	Windows WorkspaceWindows
}

// Sizes of what a workspace's page lists.
const (
	workspaceRuns     = 100
	workspaceVersions = 20
	workspaceWindows  = 20
)

// WorkspaceQuery searches, filters, sorts and pages the workspace list.
type WorkspaceQuery struct {
	workspace.Query
	// Rows is false for a list form that was refused: the page without its rows.
	Rows bool
}

// WorkspaceList is one page of the workspaces the reader may see, each with its newest
// run, and what the list filters by.
type WorkspaceList struct {
	Page   listing.Result[workspace.View]
	Total  int64
	Latest map[string]run.LastRun
	// EnvironmentNames (by id) and Templates are what the filters choose from.
	EnvironmentNames map[string]string
	Templates        []string
}

// List reads the workspace list for q. An environment or template gone since the link
// was made filters nothing rather than everything.
func (s Workspaces) List(ctx context.Context, q WorkspaceQuery) (WorkspaceList, error) {
	envs, err := s.Names.EnvironmentNames(ctx)
	if err != nil {
		return WorkspaceList{}, err
	}
	l := WorkspaceList{EnvironmentNames: envs, Templates: s.Names.TemplateNames()}
	if !q.Rows {
		return l, nil
	}
	if _, known := envs[q.EnvironmentID]; !known {
		q.EnvironmentID = ""
	}
	if !slices.Contains(l.Templates, q.Template) {
		q.Template = ""
	}
	if l.Page, l.Total, err = s.Workspaces.Search(ctx, q.Query); err != nil {
		return WorkspaceList{}, err
	}
	ids := make([]string, len(l.Page.Rows))
	for i, w := range l.Page.Rows {
		ids[i] = w.ID
	}
	if l.Latest, err = s.Runs.Latest(ctx, ids); err != nil {
		return WorkspaceList{}, err
	}
	return l, nil
}

// WorkspacePage is a workspace's page: its runs and state, the rollback boundary, its
// newest drift check and break-glass windows, and the changes the reader may ask for
// there, each answered by the permission its service checks.
type WorkspacePage struct {
	Workspace workspace.View
	Runs      []run.Run
	State     state.WorkspaceState
	// Boundary says what a rollback of this workspace cannot bring back.
	Boundary    []string
	LatestDrift *run.Run
	Windows     []breakglass.Window
	// What the reader may ask for: a rollback to an earlier version, a drift check, a
	// plan correcting drift, a break-glass window. The changes are offered on a
	// workspace that holds something.
	CanRollBack, CanCheckDrift, CanCorrect, CanAskWindow bool
	// CanChange: the reader may ask for a change of the workspace (its change form),
	// CanPromote and CanDestroy its promotion and its destroy (on a workspace that holds
	// something): what the request service requires of a run that changes a workspace.
	CanChange, CanPromote, CanDestroy bool
	// Emptied is the run that wrote the newest state version when that version holds
	// nothing although the workspace was applied (a destroy, as a rule): the page says
	// it was destroyed, by which run, and that its state history is kept. Nil otherwise.
	Emptied *run.Run
	// CanArchive offers "Archive" (archive.go's rule: it holds nothing, no run is under
	// way, the reader may request a destroy); ArchiveRefusal says why not to one who may
	// archive workspaces ("" when it can be, or they may not anyway).
	CanArchive     bool
	ArchiveRefusal string
}

// MayChangeWorkspace reports whether s may ask for a run that changes a workspace (a
// change, a promotion, a destroy): what the request service requires of every run but
// a dry run (provisioning.plan and runs.apply; the environment's own rules, a grant or
// cloud.live, come on top and are said on the form). The pages offer those forms from it.
func MayChangeWorkspace(s authz.Subject) bool { return run.MayChangeWorkspace(s) }

// Page reads workspace id's page. Another organization's or a hidden workspace is not
// found.
func (s Workspaces) Page(ctx context.Context, id string) (WorkspacePage, error) {
	ws, err := s.Workspaces.Get(ctx, id)
	if err != nil {
		return WorkspacePage{}, err
	}
	p := WorkspacePage{Workspace: ws}
	if p.Runs, err = s.Runs.ListForWorkspace(ctx, ws.ID, workspaceRuns); err != nil {
		return WorkspacePage{}, err
	}
	if p.State, err = s.States.OfWorkspace(ctx, ws.ID, workspaceVersions); err != nil {
		return WorkspacePage{}, err
	}
	var irreversible []string
	if e, err := s.Catalog.Get(ws.TemplateName); err == nil {
		irreversible = e.Template.Irreversible
	}
	p.Boundary = append(rollback.TemplateBoundary(irreversible), rollback.WorkspaceBoundary(irreversible, StateResources(p.State))...)
	if p.LatestDrift, err = s.Drift.LatestDrift(ctx, ws.ID); err != nil {
		return WorkspacePage{}, err
	}
	if p.Windows, err = s.Windows.OfWorkspace(ctx, ws.ID, workspaceWindows); err != nil {
		return WorkspacePage{}, err
	}
	subject, _ := authz.SubjectFrom(ctx)
	holds := len(p.State.Resources) > 0
	p.CanRollBack = run.MayRollBack(subject)
	p.CanCheckDrift = holds && run.MayCheckDrift(subject)
	p.CanAskWindow = holds && breakglass.MayAsk(subject)
	p.CanChange = MayChangeWorkspace(subject)
	p.CanPromote, p.CanDestroy = holds && p.CanChange, holds && p.CanChange
	if d := p.LatestDrift; d != nil {
		p.CanCorrect = holds && run.MayPlanToCorrect(subject) && (d.DriftStatus == run.DriftExpected || d.DriftStatus == run.DriftUnowned)
	}
	p.Emptied = emptiedBy(p.State, p.Runs)
	if workspace.MayArchive(subject) {
		var unfinished int64
		for _, r := range p.Runs {
			if !r.Finished() {
				unfinished++
			}
		}
		p.ArchiveRefusal = workspace.ArchiveRefusal(ws.ArchivedAt != nil, ws.ActiveRunID != nil, holds, unfinished)
		p.CanArchive = p.ArchiveRefusal == ""
		if ws.ArchivedAt != nil {
			p.ArchiveRefusal = ""
		}
	}
	return p, nil
}

// emptiedBy is the run that wrote st's newest version when it holds nothing (nil when
// it holds something, there is no version, or the run is not among runs).
func emptiedBy(st state.WorkspaceState, runs []run.Run) *run.Run {
	if len(st.Resources) > 0 || len(st.Versions) == 0 || st.Versions[0].RunID == nil {
		return nil
	}
	for i := range runs {
		if runs[i].ID == *st.Versions[0].RunID {
			return &runs[i]
		}
	}
	return nil
}

// StateResources are the resources a workspace's state holds, as runs name them.
func StateResources(st state.WorkspaceState) []run.StateResource {
	out := make([]run.StateResource, len(st.Resources))
	for i, r := range st.Resources {
		out[i] = run.StateResource{Address: r.Address, Type: r.Type, ID: r.ID}
	}
	return out
}

// State reads what workspace id's state holds: its newest limit versions and the
// resources and outputs of the newest (the API's state versions and outputs). Another
// organization's or a hidden workspace is not found.
func (s Workspaces) State(ctx context.Context, id string, limit int) (state.WorkspaceState, error) {
	ws, err := s.Workspaces.Get(ctx, id)
	if err != nil {
		return state.WorkspaceState{}, err
	}
	return s.States.OfWorkspace(ctx, ws.ID, limit)
}
