package pages

import (
	"context"

	"gantry/models/rollback"
	"gantry/models/run"
	"gantry/models/state"
	"gantry/models/workspace"
)

// DriftRuns asks for drift checks and corrections, and lists the newest check of every
// workspace (run.DriftChecks).
type DriftRuns interface {
	CheckDrift(ctx context.Context, workspaceID string) (run.Run, error)
	PlanToCorrect(ctx context.Context, workspaceID string) (run.Run, error)
	DriftList(ctx context.Context) ([]run.Run, error)
}

// RollbackRuns is what rolling back needs (rollback.Service, which checks who may, and
// what can be planned).
type RollbackRuns interface {
	RollBack(ctx context.Context, workspaceID, versionID string) (run.Run, error)
	// Candidate says what a rollback would re-apply, or why it cannot.
	Candidate(ctx context.Context, workspaceID, versionID string) (rollback.Candidate, error)
}

// Changes asks for the runs a workspace's page offers beside a change of its inputs
// (a drift check, a correction of drift, a rollback to an earlier state version), reads
// the page that asks before a rollback and the organization's drift list.
type Changes struct {
	Workspaces WorkspaceViews
	// Runs reads an asked-for run back as stored.
	Runs      RunGetter
	Drift     DriftRuns
	Rollbacks RollbackRuns
	States    WorkspaceStates
	Catalog   CatalogReader
}

// Asked is a run asked for on a workspace, as stored (with what the database filled
// in), with the workspace.
type Asked struct {
	Workspace workspace.View
	Run       run.Run
}

// CheckDrift asks for a drift check of workspace id. Only who may request runs asks;
// the service checks the rest.
func (s Changes) CheckDrift(ctx context.Context, id string) (Asked, error) {
	return s.ask(ctx, id, s.Drift.CheckDrift)
}

// PlanToCorrect asks for a plan bringing workspace id's live resources back to its
// state.
func (s Changes) PlanToCorrect(ctx context.Context, id string) (Asked, error) {
	return s.ask(ctx, id, s.Drift.PlanToCorrect)
}

// RollBack asks for a rollback of workspace id to state version versionID; refusals
// (the current version, a destroy's empty state, a bundle that can no longer be
// planned) come back in words from the service.
func (s Changes) RollBack(ctx context.Context, id, versionID string) (Asked, error) {
	return s.ask(ctx, id, func(ctx context.Context, wsID string) (run.Run, error) {
		return s.Rollbacks.RollBack(ctx, wsID, versionID)
	})
}

// ask asks for a run on workspace id, which the asker must be able to change.
func (s Changes) ask(ctx context.Context, id string, ask func(ctx context.Context, workspaceID string) (run.Run, error)) (Asked, error) {
	ws, err := workspaceToChange(ctx, s.Workspaces, id)
	if err != nil {
		return Asked{}, err
	}
	r, err := ask(ctx, ws.ID)
	if err != nil {
		return Asked{}, err
	}
	if r, err = s.Runs.Get(ctx, r.ID); err != nil {
		return Asked{}, err
	}
	return Asked{Workspace: ws, Run: r}, nil
}

// rollbackVersions is how many versions the page without a version offers to choose
// from (the workspace page lists the newest 20; any version can be named).
const rollbackVersions = 200

// RollbackPage asks before rolling a workspace back: with a version named, what the
// rollback re-applies (or why it cannot) and what it cannot bring back; without one,
// the earlier versions runs wrote, to choose from.
type RollbackPage struct {
	Workspace workspace.View
	// Candidate is the named version's rollback (nil: none was named).
	Candidate *rollback.Candidate
	// Boundary says what the workspace holds now that a rollback cannot bring back.
	Boundary []string
	// Choices are the earlier versions a run wrote (no version named).
	Choices []state.Version
}

// Rollback reads the page asking before rolling workspace id back to versionID ("":
// choose one).
func (s Changes) Rollback(ctx context.Context, id, versionID string) (RollbackPage, error) {
	ws, err := workspaceToChange(ctx, s.Workspaces, id)
	if err != nil {
		return RollbackPage{}, err
	}
	p := RollbackPage{Workspace: ws}
	if versionID == "" {
		st, err := s.States.OfWorkspace(ctx, ws.ID, rollbackVersions)
		if err != nil {
			return RollbackPage{}, err
		}
		for i, v := range st.Versions {
			if i > 0 && v.RunID != nil {
				p.Choices = append(p.Choices, v)
			}
		}
		return p, nil
	}
	cand, err := s.Rollbacks.Candidate(ctx, ws.ID, versionID)
	if err != nil {
		return RollbackPage{}, err
	}
	p.Candidate = &cand
	st, err := s.States.OfWorkspace(ctx, ws.ID, 1)
	if err != nil {
		return RollbackPage{}, err
	}
	var irreversible []string
	if e, err := s.Catalog.Get(ws.TemplateName); err == nil {
		irreversible = e.Template.Irreversible
	}
	p.Boundary = append(rollback.TemplateBoundary(irreversible), rollback.WorkspaceBoundary(irreversible, StateResources(st))...)
	return p, nil
}

// DriftLine is a workspace's newest drift check, with the workspace.
type DriftLine struct {
	Check     run.Run
	Workspace workspace.View
}

// DriftList reads the newest drift check of every workspace the reader may see.
func (s Changes) DriftList(ctx context.Context) ([]DriftLine, error) {
	checks, err := s.Drift.DriftList(ctx)
	if err != nil {
		return nil, err
	}
	ids := make([]string, len(checks))
	for i, r := range checks {
		ids[i] = r.WorkspaceID
	}
	names, err := s.Workspaces.Views(ctx, ids)
	if err != nil {
		return nil, err
	}
	var out []DriftLine
	for _, r := range checks {
		if ws, ok := names[r.WorkspaceID]; ok {
			out = append(out, DriftLine{Check: r, Workspace: ws})
		}
	}
	return out, nil
}
