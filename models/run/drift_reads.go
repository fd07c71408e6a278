package run

import (
	"context"
	"sort"
	"time"

	"gantry/models/authz"
)

// Reads of drift checks and of what a workspace's state was written by.

// WorkspaceExecutor is the executor of the run that wrote workspaceID's state (what a
// break-glass window needs: a live world to change by hand); a workspace with nothing
// applied is a refusal in words.
func (s *DriftChecks) WorkspaceExecutor(ctx context.Context, orgID, workspaceID string) (RunnerInfo, error) {
	w, _, err := s.stateWriter(ctx, orgID, workspaceID)
	if err != nil {
		return RunnerInfo{}, err
	}
	return RunnerInfo{Name: w.Runner, Simulated: w.Simulated}, nil
}

// LatestDrift is workspaceID's newest drift check, finished or not (nil: never
// checked), for a subject who may see the workspace.
func (s *DriftChecks) LatestDrift(ctx context.Context, workspaceID string) (*Run, error) {
	runs, err := s.k.list(ctx, listQuery{workspaceID: workspaceID, kinds: []Kind{KindDrift}, order: "number DESC", limit: 1})
	if err != nil || len(runs) == 0 {
		return nil, err
	}
	return &runs[0], nil
}

// MaxDriftList bounds the organization's drift list.
const MaxDriftList = 1000

// DriftList is each workspace's newest drift check in the subject's organization (of
// the environments they may see): unowned drift first, then drift from break-glass
// windows, checks still running, failed ones, and clean ones, newest first within each.
func (s *DriftChecks) DriftList(ctx context.Context) ([]Run, error) {
	subject, err := authz.Require(ctx, authz.PermOrgRead)
	if err != nil {
		return nil, err
	}
	hidden, err := s.k.environments.HiddenFrom(ctx, subject)
	if err != nil {
		return nil, err
	}
	runs, err := s.k.store.newestDrift(ctx, subject.OrganizationID, hidden, MaxDriftList)
	if err != nil {
		return nil, err
	}
	rank := func(r Run) int {
		switch {
		case r.DriftStatus == DriftUnowned:
			return 0
		case r.DriftStatus == DriftExpected:
			return 1
		case r.DriftStatus == DriftClean:
			return 4
		case r.State == Failed:
			return 3
		}
		return 2
	}
	sort.SliceStable(runs, func(i, j int) bool {
		if a, b := rank(runs[i]), rank(runs[j]); a != b {
			return a < b
		}
		return runs[i].CreatedAt.After(runs[j].CreatedAt)
	})
	return runs, nil
}

// DriftCounts counts organization orgID's finished drift checks since since by what
// they found (the governance report; its caller authorized the reader).
func (s *DriftChecks) DriftCounts(ctx context.Context, orgID string, since time.Time) (map[DriftStatus]int, error) {
	return s.k.store.driftCounts(ctx, orgID, since)
}
