package audit

import (
	"context"
	"fmt"
	"strings"
	"time"

	"gorm.io/gorm"

	"gantry/models/authz"
	"gantry/models/db"
	"gantry/models/errs"
)

// Query is what the audit history is filtered by; every field is optional. Paging is
// by keyset: Before is the seq the previous page ended at, so a page costs the same at
// the millionth event as at the first.
type Query struct {
	From, To      time.Time // [From, To); zero means open
	ActorID       string
	Action        string
	RunID         string
	EnvironmentID string
	WorkspaceID   string
	Before        int64 // only events with seq below this; 0 means the newest
	Limit         int   // 1..MaxPage; 0 means DefaultPage
}

// Page sizes of the history.
const (
	DefaultPage = 50
	MaxPage     = 500
)

// maxFilter bounds a filter value: ids and action codes are short.
const maxFilter = 200

// Validate names the query's bad fields.
func (q Query) Validate() error {
	var v errs.Validation
	if !q.From.IsZero() && !q.To.IsZero() && !q.To.After(q.From) {
		v.Add("to", "must be after from")
	}
	for field, value := range map[string]string{"actor": q.ActorID, "action": q.Action, "run": q.RunID,
		"environment": q.EnvironmentID, "workspace": q.WorkspaceID} {
		if len(value) > maxFilter || strings.ContainsRune(value, 0) {
			v.Add(field, fmt.Sprintf("must be at most %d characters, without NUL", maxFilter))
		}
	}
	if q.Before < 0 {
		v.Add("before", "must be a positive sequence number")
	}
	if q.Limit < 0 || q.Limit > MaxPage {
		v.Add("limit", fmt.Sprintf("must be between 1 and %d", MaxPage))
	}
	return v.Err()
}

// Filtered reports whether the query narrows the log by anything but time: such an
// export is verified event by event, not as a chain.
func (q Query) Filtered() bool {
	return q.ActorID != "" || q.Action != "" || q.RunID != "" || q.EnvironmentID != "" || q.WorkspaceID != ""
}

// HistoryPage is one page of the history, newest first. Next is the Before of the
// following page, 0 when this is the last.
type HistoryPage struct {
	Events []Event
	Next   int64
}

// History returns one page of the subject's organization's log, newest first.
// Reading it needs audit.read.
func (l *Log) History(ctx context.Context, q Query) (HistoryPage, error) {
	subject, err := authz.Require(ctx, authz.PermAuditRead)
	if err != nil {
		return HistoryPage{}, err
	}
	if err := q.Validate(); err != nil {
		return HistoryPage{}, err
	}
	if q.Limit == 0 {
		q.Limit = DefaultPage
	}
	tx := l.filtered(ctx, subject.OrganizationID, q)
	if q.Before > 0 {
		tx = tx.Where("seq < ?", q.Before)
	}
	var events []Event
	// One more than the page tells whether there is a next page without a count.
	if err := tx.Order("seq DESC").Limit(q.Limit + 1).Find(&events).Error; err != nil {
		return HistoryPage{}, fmt.Errorf("reading audit history: %w", err)
	}
	page := HistoryPage{Events: events}
	if len(events) > q.Limit {
		page.Events = events[:q.Limit]
		page.Next = page.Events[q.Limit-1].Seq
	}
	return page, nil
}

// filtered is the query's WHERE clause on the organization's events.
func (l *Log) filtered(ctx context.Context, orgID string, q Query) *gorm.DB {
	tx := db.Conn(ctx, l.db).Model(&Event{}).Where("organization_id = ?", orgID)
	if !q.From.IsZero() {
		tx = tx.Where("occurred_at >= ?", q.From)
	}
	if !q.To.IsZero() {
		tx = tx.Where("occurred_at < ?", q.To)
	}
	for _, f := range []struct{ column, value string }{{"actor_id", q.ActorID}, {"action", q.Action}, {"run_id", q.RunID},
		{"environment_id", q.EnvironmentID}, {"workspace_id", q.WorkspaceID}} {
		if f.value != "" {
			tx = tx.Where(f.column+" = ?", f.value)
		}
	}
	return tx
}

// Head is the newest event's sequence number of organization orgID (0 when none).
func (l *Log) Head(ctx context.Context, orgID string) (int64, error) {
	var seq int64
	err := db.Conn(ctx, l.db).Raw(`SELECT COALESCE(MAX(seq), 0) FROM audit_events WHERE organization_id = ?`, orgID).Scan(&seq).Error
	if err != nil {
		return 0, fmt.Errorf("reading the audit head: %w", err)
	}
	return seq, nil
}

// OfRun returns the events about run runID of organization orgID, oldest first: the
// run's own and those scoped to it (the state version its apply wrote, its
// credentials), for a service that has already decided its subject may see the run
// (the evidence report); it checks no permission itself.
func (l *Log) OfRun(ctx context.Context, orgID, runID string) ([]Event, error) {
	var events []Event
	err := db.Conn(ctx, l.db).Where("organization_id = ? AND (run_id = ? OR (target_type = 'run' AND target_id = ?))", orgID, runID, runID).
		Order("seq").Find(&events).Error
	if err != nil {
		return nil, fmt.Errorf("reading the history of run %s: %w", runID, err)
	}
	return events, nil
}
