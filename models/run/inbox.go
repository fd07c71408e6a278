package run

import (
	"context"
	"fmt"
	"time"

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

// waitingRuns is the SQL of "the run still waits for a person's decision": the rows
// of run_deciders are rewritten as runs move, and this guards against one written a
// moment late.
const waitingRuns = `(runs.state = 'PENDING_APPROVAL' OR (runs.state = 'POLICY_BLOCKED' AND runs.policy_outcome <> 'hard_failed'))`

// WaitingForYou lists the runs the subject may decide now (the rows of run_deciders:
// Permissions, kept current), deadline first, after the cursor.
func (s *Service) WaitingForYou(ctx context.Context, after *InboxCursor, limit int) ([]InboxEntry, error) {
	return s.inbox(ctx, true, after, limit)
}

// WaitingForOthers lists the waiting runs the subject sees but may not decide now
// (the page says who must, and why), deadline first, after the cursor.
func (s *Service) WaitingForOthers(ctx context.Context, after *InboxCursor, limit int) ([]InboxEntry, error) {
	return s.inbox(ctx, false, after, limit)
}

// inbox walks the subject's rows of run_deciders (deciding or not) in deadline order:
// one range of the inbox index, each row checked against its run.
func (s *Service) inbox(ctx context.Context, decides bool, after *InboxCursor, limit int) ([]InboxEntry, error) {
	subject, err := authz.Require(ctx, authz.PermOrgRead)
	if err != nil {
		return nil, err
	}
	var rows []struct {
		RunID            string
		Action           *Action
		NeedsFreshSignIn bool
	}
	q := db.Conn(ctx, s.store.db).Table("run_deciders AS d").Select("d.run_id, d.action, d.needs_fresh_sign_in").
		Joins("JOIN runs ON runs.id = d.run_id").
		Where("d.organization_id = ? AND d.user_id = ? AND d.decides = ? AND d.decision_deadline > clock_timestamp()",
			subject.OrganizationID, subject.UserID, decides).
		Where("runs.organization_id = ?", subject.OrganizationID).Where(waitingRuns)
	if after != nil {
		q = q.Where("(d.decision_deadline, d.run_id) > (?, ?)", after.Deadline, after.ID)
	}
	if err := q.Order("d.decision_deadline, d.run_id").Limit(pageSize(limit)).Scan(&rows).Error; err != nil {
		return nil, fmt.Errorf("listing the inbox: %w", err)
	}
	ids := make([]string, len(rows))
	for i, r := range rows {
		ids[i] = r.RunID
	}
	runs, err := s.runsInOrder(ctx, subject.OrganizationID, ids)
	if err != nil {
		return nil, err
	}
	out := make([]InboxEntry, 0, len(runs))
	for _, r := range runs {
		for _, row := range rows {
			if row.RunID == r.ID {
				e := InboxEntry{Run: r, NeedsFreshSignIn: row.NeedsFreshSignIn}
				if row.Action != nil {
					e.Action = *row.Action
				}
				out = append(out, e)
			}
		}
	}
	return out, nil
}

// CountWaitingForYou is how many runs the subject may decide now (the navigation's
// count): one count of the inbox index.
func (s *Service) CountWaitingForYou(ctx context.Context) (int64, error) {
	subject, err := authz.Require(ctx, authz.PermOrgRead)
	if err != nil {
		return 0, err
	}
	var n int64
	err = db.Conn(ctx, s.store.db).Table("run_deciders").
		Where("organization_id = ? AND user_id = ? AND decides AND decision_deadline > clock_timestamp()", subject.OrganizationID, subject.UserID).
		Count(&n).Error
	if err != nil {
		return 0, fmt.Errorf("counting runs waiting for you: %w", err)
	}
	return n, nil
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
