package run

import (
	"context"
	"fmt"
	"time"

	"gorm.io/gorm"

	"gantry/models/authz"
	"gantry/models/db"
)

// InboxEntry is a run waiting for a decision, as a person's inbox lists it.
type InboxEntry struct {
	Run
	// Action is the decision the run waits for from this person (approve, or override
	// a soft policy block); empty on "Waiting for others".
	Action Action
	// NeedsFreshSignIn: deciding needs a sign-in within the elevation window.
	NeedsFreshSignIn bool
}

// InboxCursor pages an inbox by (decision deadline, run id): the decisions that close
// first come first.
type InboxCursor struct {
	Deadline time.Time
	ID       string
}

// MaxInboxPage bounds a page of an inbox.
const MaxInboxPage = 100

// waitingRuns is the SQL of "waits for a person's decision whose window is open".
const waitingRuns = `(runs.state = 'PENDING_APPROVAL' OR (runs.state = 'POLICY_BLOCKED' AND runs.policy_outcome <> 'hard_failed'))
	AND runs.decision_deadline > clock_timestamp()`

// WaitingForYou lists the runs the subject may decide now (the rows of run_deciders:
// Permissions, kept current), deadline first, after the cursor.
func (s *Service) WaitingForYou(ctx context.Context, after *InboxCursor, limit int) ([]InboxEntry, error) {
	subject, err := authz.Require(ctx, authz.PermOrgRead)
	if err != nil {
		return nil, err
	}
	var rows []struct {
		ID               string
		Action           Action
		NeedsFreshSignIn bool
	}
	q := db.Conn(ctx, s.store.db).Table("run_deciders AS d").Select("runs.id, d.action, d.needs_fresh_sign_in").
		Joins("JOIN runs ON runs.id = d.run_id").
		Where("d.organization_id = ? AND d.user_id = ? AND runs.organization_id = ?", subject.OrganizationID, subject.UserID, subject.OrganizationID).
		Where(waitingRuns)
	q = pageAfter(q, after).Order("runs.decision_deadline, runs.id").Limit(pageSize(limit))
	if err := q.Scan(&rows).Error; err != nil {
		return nil, fmt.Errorf("listing runs waiting for you: %w", err)
	}
	ids := make([]string, len(rows))
	for i, r := range rows {
		ids[i] = r.ID
	}
	runs, err := s.runsInOrder(ctx, subject.OrganizationID, ids)
	if err != nil {
		return nil, err
	}
	out := make([]InboxEntry, 0, len(runs))
	for _, r := range runs {
		for _, row := range rows {
			if row.ID == r.ID {
				out = append(out, InboxEntry{Run: r, Action: row.Action, NeedsFreshSignIn: row.NeedsFreshSignIn})
			}
		}
	}
	return out, nil
}

// CountWaitingForYou is how many runs the subject may decide now (the navigation's
// count).
func (s *Service) CountWaitingForYou(ctx context.Context) (int64, error) {
	subject, err := authz.Require(ctx, authz.PermOrgRead)
	if err != nil {
		return 0, err
	}
	var n int64
	err = db.Conn(ctx, s.store.db).Table("run_deciders AS d").Joins("JOIN runs ON runs.id = d.run_id").
		Where("d.organization_id = ? AND d.user_id = ? AND runs.organization_id = ?", subject.OrganizationID, subject.UserID, subject.OrganizationID).
		Where(waitingRuns).Count(&n).Error
	if err != nil {
		return 0, fmt.Errorf("counting runs waiting for you: %w", err)
	}
	return n, nil
}

// WaitingForOthers lists the waiting runs the subject sees but may not decide now
// (the page says who must, and why), deadline first, after the cursor.
func (s *Service) WaitingForOthers(ctx context.Context, after *InboxCursor, limit int) ([]InboxEntry, error) {
	subject, err := authz.Require(ctx, authz.PermOrgRead)
	if err != nil {
		return nil, err
	}
	hidden, err := s.environments.HiddenFrom(ctx, subject)
	if err != nil {
		return nil, err
	}
	q := db.Conn(ctx, s.store.db).Model(&Run{}).Where("runs.organization_id = ?", subject.OrganizationID).Where(waitingRuns).
		Where("NOT EXISTS (SELECT 1 FROM run_deciders d WHERE d.run_id = runs.id AND d.user_id = ?)", subject.UserID)
	if len(hidden) > 0 {
		q = q.Where("runs.environment_id NOT IN ?", hidden)
	}
	var runs []Run
	if err := pageAfter(q, after).Order("runs.decision_deadline, runs.id").Limit(pageSize(limit)).Find(&runs).Error; err != nil {
		return nil, fmt.Errorf("listing runs waiting for others: %w", err)
	}
	out := make([]InboxEntry, len(runs))
	for i, r := range runs {
		out[i] = InboxEntry{Run: r}
	}
	return out, nil
}

func pageAfter(q *gorm.DB, after *InboxCursor) *gorm.DB {
	if after == nil {
		return q
	}
	return q.Where("(runs.decision_deadline, runs.id) > (?, ?)", after.Deadline, after.ID)
}

func pageSize(limit int) int {
	if limit <= 0 || limit > MaxInboxPage {
		return MaxInboxPage
	}
	return limit
}

// runsInOrder loads runs ids of organization orgID in the order given.
func (s *Service) runsInOrder(ctx context.Context, orgID string, ids []string) ([]Run, error) {
	if len(ids) == 0 {
		return nil, nil
	}
	var runs []Run
	if err := db.Conn(ctx, s.store.db).Where("organization_id = ? AND id IN ?", orgID, ids).Find(&runs).Error; err != nil {
		return nil, fmt.Errorf("reading runs: %w", err)
	}
	byID := make(map[string]Run, len(runs))
	for _, r := range runs {
		byID[r.ID] = r
	}
	out := make([]Run, 0, len(ids))
	for _, id := range ids {
		if r, ok := byID[id]; ok {
			out = append(out, r)
		}
	}
	return out, nil
}
