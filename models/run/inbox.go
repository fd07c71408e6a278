package run

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"gorm.io/gorm"

	"gantry/models/authz"
	"gantry/models/db"
	"gantry/models/errs"
	"gantry/models/listing"
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
func (s *Inbox) WaitingForYou(ctx context.Context, after *InboxCursor, limit int) ([]InboxEntry, error) {
	page, err := s.Inbox(ctx, true, InboxQuery{Page: listing.Page{After: after.listing(), Limit: pageSize(limit)}})
	return page.Rows, err
}

// WaitingForOthers lists the waiting runs the subject sees but may not decide now
// (the page says who must, and why), deadline first, after the cursor.
func (s *Inbox) WaitingForOthers(ctx context.Context, after *InboxCursor, limit int) ([]InboxEntry, error) {
	page, err := s.Inbox(ctx, false, InboxQuery{Page: listing.Page{After: after.listing(), Limit: pageSize(limit)}})
	return page.Rows, err
}

// listing is the cursor as the deadline order's (nil for none).
func (c *InboxCursor) listing() *listing.Cursor {
	if c == nil {
		return nil
	}
	return &listing.Cursor{Values: []string{listing.TimeValue(c.Deadline), c.ID}}
}

// InboxQuery narrows one list of the inbox: a text (in the workspace's name, the
// template or the requester's name), an environment, a risk class; Count asks for the
// number of runs that match too.
type InboxQuery struct {
	Text          string
	EnvironmentID string
	Risk          int // 0: any
	Count         bool
	Page          listing.Page
}

// InboxPage is one page of an inbox list and, when asked, how many runs match.
type InboxPage struct {
	listing.Result[InboxEntry]
	Total int64
}

// Sort keys of the inbox.
const (
	SortDeadline = "deadline"
	SortRisk     = "risk"
)

// inboxRow is one row of run_deciders as an inbox list reads it.
type inboxRow struct {
	RunID            string
	Action           *Action
	NeedsFreshSignIn bool
	DecisionDeadline time.Time
	RiskClass        int
}

// InboxOrders are the inbox's orders: the decisions that close first come first (one
// walk of run_deciders_inbox_idx), or by risk class. Every column of an order runs one
// way, so the risk order's deadline is negated (in microseconds, the database's
// precision): descending ("-risk") is the riskiest first and, within a class, the
// decision that closes first.
var inboxOrders = []listing.Order[inboxRow]{
	{Key: SortDeadline, Columns: []listing.Column[inboxRow]{
		{SQL: "d.decision_deadline", Kind: listing.Time, Value: func(r inboxRow) string { return listing.TimeValue(r.DecisionDeadline) }},
		{SQL: "d.run_id", Value: func(r inboxRow) string { return r.RunID }}}},
	{Key: SortRisk, Columns: []listing.Column[inboxRow]{
		{SQL: "COALESCE(runs.risk_class, 0)", Kind: listing.Int, Value: func(r inboxRow) string { return strconv.Itoa(r.RiskClass) }},
		{SQL: "(-(EXTRACT(EPOCH FROM d.decision_deadline) * 1000000)::bigint)", Kind: listing.Int,
			Value: func(r inboxRow) string { return strconv.FormatInt(-r.DecisionDeadline.UnixMicro(), 10) }},
		{SQL: "d.run_id", Value: func(r inboxRow) string { return r.RunID }}}},
}

// InboxSortKeys are the inbox's sort keys.
func InboxSortKeys() []string { return []string{SortDeadline, SortRisk} }

// DefaultInboxSort is the inbox's order when its reader chooses none. An owner decides
// the risk-3 runs (destroys, data lost, org-wide policy: the floors keep them an
// owner's), so an owner's inbox shows the riskiest first, the decisions that close first
// within a class; everyone else's shows the decisions that close first.
func DefaultInboxSort(role authz.Role) listing.Sort {
	if role == authz.RoleOwner {
		return listing.Sort{Key: SortRisk, Desc: true}
	}
	return listing.Sort{Key: SortDeadline}
}

// Decided is run id as the subject decided it (approved or rejected it), for the page
// that follows a decision. Any other run, even one the subject sees, is not found: the
// page names only the subject's own decision.
func (s *Inbox) Decided(ctx context.Context, id string) (Run, error) {
	subject, err := authz.Require(ctx, authz.PermOrgRead)
	if err != nil {
		return Run{}, err
	}
	var runs []Run
	err = db.Conn(ctx, s.k.store.db).Where("organization_id = ? AND id = ? AND (approved_by = ? OR rejected_by = ?)",
		subject.OrganizationID, id, subject.UserID, subject.UserID).Limit(1).Find(&runs).Error
	if err != nil {
		return Run{}, fmt.Errorf("reading the decided run: %w", err)
	}
	if len(runs) == 0 {
		return Run{}, fmt.Errorf("run %s decided by %s: %w", id, subject.UserID, errs.ErrNotFound)
	}
	return runs[0], nil
}

// Inbox is one page of the subject's inbox: the runs they may decide now (decides), or
// the other waiting runs they see. It walks the subject's rows of run_deciders, each
// checked against its run.
func (s *Inbox) Inbox(ctx context.Context, decides bool, q InboxQuery) (InboxPage, error) {
	subject, err := authz.Require(ctx, authz.PermOrgRead)
	if err != nil {
		return InboxPage{}, err
	}
	var wsIDs []string
	if q.Text != "" {
		hidden, err := s.k.environments.HiddenFrom(ctx, subject)
		if err != nil {
			return InboxPage{}, err
		}
		if wsIDs, err = s.k.workspaces.Matching(ctx, subject.OrganizationID, q.Text, false, hidden, MaxSearchedWorkspaces); err != nil {
			return InboxPage{}, err
		}
	}
	filtered := func() *gorm.DB {
		tx := db.Conn(ctx, s.k.store.db).Table("run_deciders AS d").
			Joins("JOIN runs ON runs.id = d.run_id").
			Where("d.organization_id = ? AND d.user_id = ? AND d.decides = ? AND d.decision_deadline > clock_timestamp()",
				subject.OrganizationID, subject.UserID, decides).
			Where("runs.organization_id = ?", subject.OrganizationID).Where(waitingRuns)
		if q.Text != "" {
			text := db.Conn(ctx, s.k.store.db).Where(listing.Contains("runs.template_name"), q.Text).
				Or(listing.Contains("runs.requested_by_name"), q.Text)
			if len(wsIDs) > 0 {
				text = text.Or("runs.workspace_id IN ?", wsIDs)
			}
			tx = tx.Where(text)
		}
		if q.EnvironmentID != "" {
			tx = tx.Where("runs.environment_id = ?", q.EnvironmentID)
		}
		if q.Risk > 0 {
			tx = tx.Where("runs.risk_class = ?", q.Risk)
		}
		return tx
	}
	var out InboxPage
	if q.Count {
		// Unfiltered, a list is counted in its range of the inbox index alone, as the
		// navigation's count is (the join to runs is for filters).
		count := filtered()
		if q.Text == "" && q.EnvironmentID == "" && q.Risk == 0 {
			count = db.Conn(ctx, s.k.store.db).Table("run_deciders").
				Where("organization_id = ? AND user_id = ? AND decides = ? AND decision_deadline > clock_timestamp()",
					subject.OrganizationID, subject.UserID, decides)
		}
		if err := count.Count(&out.Total).Error; err != nil {
			return InboxPage{}, fmt.Errorf("counting the inbox: %w", err)
		}
	}
	rows, err := listing.Fetch(filtered().Select("d.run_id, d.action, d.needs_fresh_sign_in, d.decision_deadline, COALESCE(runs.risk_class, 0) AS risk_class"),
		inboxOrders, q.Page)
	if err != nil {
		return InboxPage{}, fmt.Errorf("listing the inbox: %w", err)
	}
	ids := make([]string, len(rows.Rows))
	for i, r := range rows.Rows {
		ids[i] = r.RunID
	}
	runs, err := s.runsInOrder(ctx, subject.OrganizationID, ids)
	if err != nil {
		return InboxPage{}, err
	}
	out.Next, out.Prev = rows.Next, rows.Prev
	for _, r := range runs {
		for _, row := range rows.Rows {
			if row.RunID == r.ID {
				e := InboxEntry{Run: r, NeedsFreshSignIn: row.NeedsFreshSignIn}
				if row.Action != nil {
					e.Action = *row.Action
				}
				out.Rows = append(out.Rows, e)
			}
		}
	}
	return out, nil
}

// Emergencies count the break-glass requests waiting for the subject in ctx to decide
// (breakglass.Service, whose rules say who may): they wait for a person like runs do,
// and come first.
type Emergencies interface {
	CountToDecide(ctx context.Context) (int64, error)
}

// CountEmergencies makes the inbox's count include e's. The composition root calls it
// once, before serving: the window service is built on the run roles, so it cannot be
// handed to them when they are built.
func (s *Inbox) CountEmergencies(e Emergencies) { s.emergencies = e }

// CountWaitingForYou is how many decisions the subject may take now (the navigation's
// count): the runs, one count of the inbox index, and the break-glass requests.
func (s *Inbox) CountWaitingForYou(ctx context.Context) (int64, error) {
	subject, err := authz.Require(ctx, authz.PermOrgRead)
	if err != nil {
		return 0, err
	}
	var n int64
	err = db.Conn(ctx, s.k.store.db).Table("run_deciders").
		Where("organization_id = ? AND user_id = ? AND decides AND decision_deadline > clock_timestamp()", subject.OrganizationID, subject.UserID).
		Count(&n).Error
	if err != nil {
		return 0, fmt.Errorf("counting runs waiting for you: %w", err)
	}
	if s.emergencies == nil {
		return n, nil
	}
	windows, err := s.emergencies.CountToDecide(ctx)
	if err != nil {
		return 0, fmt.Errorf("counting break-glass requests waiting for you: %w", err)
	}
	return n + windows, nil
}

func pageSize(limit int) int {
	if limit <= 0 || limit > MaxInboxPage {
		return MaxInboxPage
	}
	return limit
}

// runsInOrder loads runs ids of organization orgID in the order given.
func (s *Inbox) runsInOrder(ctx context.Context, orgID string, ids []string) ([]Run, error) {
	if len(ids) == 0 {
		return nil, nil
	}
	var runs []Run
	if err := db.Conn(ctx, s.k.store.db).Where("organization_id = ? AND id IN ?", orgID, ids).Find(&runs).Error; err != nil {
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
