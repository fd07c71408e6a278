package breakglass

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"gorm.io/gorm"
	"gorm.io/gorm/clause"

	"gantry/models/audit"
	"gantry/models/authz"
	"gantry/models/db"
	"gantry/models/run"
	"gantry/models/runport"
)

// Store is the breakglass_windows table and what the run lifecycle asks of it
// (run.Windows, in models/runport's words): the window open on a workspace, the windows a drift is attributed to,
// and what a drift check found, told to the windows awaiting codification in the
// transaction that records the check. It checks no permission: the run lifecycle and
// this package's Service authorize their own subjects.
type Store struct {
	db    *gorm.DB
	audit *audit.Log
}

// NewStore returns the store.
func NewStore(gdb *gorm.DB, log *audit.Log) *Store { return &Store{db: gdb, audit: log} }

func (s *Store) conn(ctx context.Context) *gorm.DB { return db.Conn(ctx, s.db) }

// clock is the database clock now (clock_timestamp(): judged when it commits).
func (s *Store) clock(ctx context.Context) (time.Time, error) {
	var t time.Time
	if err := s.conn(ctx).Raw("SELECT clock_timestamp()").Scan(&t).Error; err != nil {
		return time.Time{}, fmt.Errorf("reading database clock: %w", err)
	}
	return t.UTC(), nil
}

// get reads window id of organization orgID ("" is the system's lookup by id alone),
// under a row lock when lock is set.
func (s *Store) get(ctx context.Context, orgID, id string, lock bool) (Window, error) {
	q := s.conn(ctx).Where("id = ?", id)
	if orgID != "" {
		q = q.Where("organization_id = ?", orgID)
	}
	if lock {
		q = q.Clauses(clause.Locking{Strength: "UPDATE"})
	}
	var w Window
	if err := q.Take(&w).Error; err != nil {
		return Window{}, fmt.Errorf("reading break-glass window %s: %w", id, db.Translate(err))
	}
	return w, nil
}

// list reads windows by a where clause, newest first.
func (s *Store) list(ctx context.Context, limit int, where string, args ...any) ([]Window, error) {
	var out []Window
	q := s.conn(ctx).Where(where, args...).Order("created_at DESC, id DESC")
	if limit > 0 {
		q = q.Limit(limit)
	}
	if err := q.Find(&out).Error; err != nil {
		return nil, fmt.Errorf("listing break-glass windows: %w", err)
	}
	return out, nil
}

// save writes every column of a locked window, audits its moves as who, and tells live
// pages, in the transaction carried by ctx.
func (s *Store) save(ctx context.Context, w *Window, who authz.Subject, now time.Time) error {
	if w.State.Terminal() && w.FinishedAt == nil {
		w.FinishedAt = &now
	}
	w.UpdatedAt = now
	if err := s.conn(ctx).Model(&Window{}).Where("id = ?", w.ID).Select("*").Omit("id", "created_at").Updates(w).Error; err != nil {
		return fmt.Errorf("saving break-glass window %s: %w", w.ID, db.Translate(err))
	}
	for _, m := range w.moves {
		if err := s.audit.RecordAs(ctx, who, transitionEntry(*w, m)); err != nil {
			return err
		}
	}
	w.moves = nil
	return s.announce(ctx, *w)
}

// announce tells live pages that window w changed, on the run changes' channel (at
// commit): the inbox count and the workspace's page re-read what they show. It names
// no run, so no run page wakes.
func (s *Store) announce(ctx context.Context, w Window) error {
	payload, _ := json.Marshal(map[string]string{"workspace": w.WorkspaceID, "org": w.OrganizationID, "window": w.ID})
	if err := s.conn(ctx).Exec("SELECT pg_notify(?, ?)", run.ChangesChannel, string(payload)).Error; err != nil {
		return fmt.Errorf("announcing break-glass window %s: %w", w.ID, err)
	}
	return nil
}

// transitionEntry is the audit event of one move of a window.
func transitionEntry(w Window, m move) audit.Entry {
	data := map[string]any{"from": m.From, "to": m.To, "reason": m.Reason, "workspace_id": w.WorkspaceID,
		"terms_digest": w.TermsDigest, "duration_minutes": w.DurationMinutes}
	for k, v := range m.Data {
		data[k] = v
	}
	return audit.Entry{Action: "breakglass." + actionOf[m.To], TargetType: "breakglass_window", TargetID: w.ID, Data: data,
		EnvironmentID: w.EnvironmentID, WorkspaceID: w.WorkspaceID}
}

// actionOf names the audit action of a move to a state.
var actionOf = map[State]string{Approved: "approved", Rejected: "rejected", Cancelled: "cancelled", Expired: "expired",
	Open: "opened", AwaitingCodification: "ended", Codified: "codified", Closed: "closed"}

// info is a window as runs see it.
func info(w Window) runport.WindowInfo {
	out := runport.WindowInfo{ID: w.ID, WorkspaceID: w.WorkspaceID, RequestedByName: w.RequestedByName, Reason: w.Reason,
		OpenedAt: w.OpenedAt, EndedAt: w.EndedAt}
	if w.State == Open {
		out.EndsAt = w.EndsAt
	}
	return out
}

// OpenOn is the window open on workspaceID (nil: none). A window whose clock ran out
// counts as open until its end is recorded (seconds later, by its job): nothing applies
// on the strength of a clock alone.
func (s *Store) OpenOn(ctx context.Context, orgID, workspaceID string) (*runport.WindowInfo, error) {
	ws, err := s.list(ctx, 1, "organization_id = ? AND workspace_id = ? AND state = ?", orgID, workspaceID, Open)
	if err != nil || len(ws) == 0 {
		return nil, err
	}
	i := info(ws[0])
	return &i, nil
}

// WindowOpen reports whether window id of organization orgID is open now, for its
// credentials (identity.WindowGrants: the workload issuer asks at every call a window's
// token makes to a cloud). Unlike OpenOn, the clock alone ends it: a window whose end
// passed by the database clock holds no credential while its end job is on its way, and
// "End the window now", its end job and an owner's close (of an ended window) each
// leave its token refused from their commit on.
func (s *Store) WindowOpen(ctx context.Context, orgID, id string) (bool, error) {
	var open bool
	if err := s.conn(ctx).Raw(`SELECT EXISTS (SELECT 1 FROM breakglass_windows WHERE id = ? AND organization_id = ? AND state = ?
		AND ends_at > clock_timestamp())`, id, orgID, Open).Scan(&open).Error; err != nil {
		return false, fmt.Errorf("asking whether break-glass window %s is open: %w", id, err)
	}
	return open, nil
}

// Named are the windows of workspaceID among ids.
func (s *Store) Named(ctx context.Context, orgID, workspaceID string, ids []string) (map[string]runport.WindowInfo, error) {
	out := map[string]runport.WindowInfo{}
	if len(ids) == 0 {
		return out, nil
	}
	ws, err := s.list(ctx, 0, "organization_id = ? AND workspace_id = ? AND id IN ?", orgID, workspaceID, ids)
	if err != nil {
		return nil, err
	}
	for _, w := range ws {
		out[w.ID] = info(w)
	}
	return out, nil
}

// DriftChecked tells the windows of c's workspace awaiting codification what drift
// check c found: nothing drifted and the state checked is the one a codification of the
// window wrote, it is CODIFIED; nothing drifted otherwise, there is nothing left to
// codify (CLOSED); drift, it keeps waiting, with the check on record.
func (s *Store) DriftChecked(ctx context.Context, c runport.DriftCheck) error {
	if c.Status == "" {
		return nil
	}
	waiting, err := s.list(ctx, 0, "workspace_id = ? AND state = ?", c.WorkspaceID, AwaitingCodification)
	if err != nil || len(waiting) == 0 {
		return err
	}
	now, err := s.clock(ctx)
	if err != nil {
		return err
	}
	for _, found := range waiting {
		w, err := s.get(ctx, c.OrganizationID, found.ID, true)
		if err != nil {
			return err
		}
		if w.State != AwaitingCodification {
			continue
		}
		w.DriftCheckRunID = &c.RunID
		codified := w.CodifyRunID != nil && c.SourceRunID != nil && *c.SourceRunID == *w.CodifyRunID
		switch {
		case c.Status != runport.DriftClean:
		case codified:
			err = w.Codify("codified: the state its codification wrote matches the world (drift check " + c.Label + " found nothing)")
		default:
			err = w.Close(nil, "nothing left to codify: drift check "+c.Label+" found the live resources matching the state")
		}
		if err != nil {
			return err
		}
		if m := w.moves.Last(); m != nil {
			m.Data = map[string]any{"drift_check_run_id": c.RunID, "codify_run_id": w.CodifyRunID}
		}
		if err := s.save(ctx, &w, authz.System(c.OrganizationID), now); err != nil {
			return err
		}
	}
	return nil
}

// Summary counts an organization's windows for the governance report.
type Summary struct {
	Total, Open, Awaiting, Codified, ClosedUncodified, Refused int
	// Recent are the newest windows, newest first.
	Recent []Window
}

// SummaryOf counts organization orgID's windows since since and lists the newest few.
func (s *Store) SummaryOf(ctx context.Context, orgID string, since time.Time, recent int) (Summary, error) {
	var rows []struct {
		State State
		N     int
	}
	if err := s.conn(ctx).Model(&Window{}).Select("state, count(*) AS n").Where("organization_id = ? AND created_at >= ?", orgID, since).
		Group("state").Scan(&rows).Error; err != nil {
		return Summary{}, fmt.Errorf("counting break-glass windows: %w", err)
	}
	var out Summary
	for _, r := range rows {
		out.Total += r.N
		switch r.State {
		case Open:
			out.Open += r.N
		case AwaitingCodification:
			out.Awaiting += r.N
		case Codified:
			out.Codified += r.N
		case Closed:
			out.ClosedUncodified += r.N
		case Rejected, Expired, Cancelled:
			out.Refused += r.N
		}
	}
	var err error
	out.Recent, err = s.list(ctx, recent, "organization_id = ? AND created_at >= ?", orgID, since)
	return out, err
}

// normalized is a reason as stored: trimmed.
func normalized(reason string) string { return strings.TrimSpace(reason) }
