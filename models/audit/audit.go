// Package audit is the append-only, hash-chained audit log. Every mutation in Gantry
// records its event through Record inside the transaction that makes the change, so the
// change and its evidence commit together or not at all.
package audit

import (
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"time"

	"gorm.io/gorm"

	"gantry/models/authz"
	"gantry/models/db"
)

// Event is one row of audit_events.
type Event struct {
	ID             int64 `gorm:"primaryKey;->"`
	OrganizationID string
	Seq            int64
	OccurredAt     time.Time
	ActorID        string
	ActorName      string
	Action         string
	TargetType     string
	TargetID       string
	Data           json.RawMessage `gorm:"type:jsonb"`
	// The scope the event concerns, for filtering; hashed with the event. Empty (NULL)
	// where it does not apply, and on every event recorded before scopes existed.
	EnvironmentID string `gorm:"default:null"`
	WorkspaceID   string `gorm:"default:null"`
	RunID         string `gorm:"default:null"`
	PrevHash      []byte
	Hash          []byte
	// HashedBody is Body() exactly as it was hashed when the event was recorded (the
	// database checks sha256(PrevHash || HashedBody) = Hash). Nil on events recorded
	// before bodies were stored: Body() rebuilds theirs from the columns.
	HashedBody []byte `gorm:"column:body"`
}

// TableName pins the table; gorm would guess the same, but the log must not move.
func (Event) TableName() string { return "audit_events" }

// Entry is what a service says happened; Record adds who, when and the chain.
type Entry struct {
	Action     string // e.g. "environment.created"
	TargetType string // e.g. "environment"
	TargetID   string
	Data       any // marshalled to JSON; must not hold secrets
	// Scope: the environment, workspace and run the event concerns, as far as they
	// apply. The target fills in its own (a run's event is about that run), so callers
	// name the rest.
	EnvironmentID string
	WorkspaceID   string
	RunID         string
}

// scoped fills in the scope the target implies.
func (e Entry) scoped() Entry {
	switch e.TargetType {
	case "run":
		e.RunID = cmp.Or(e.RunID, e.TargetID)
	case "workspace":
		e.WorkspaceID = cmp.Or(e.WorkspaceID, e.TargetID)
	case "environment":
		e.EnvironmentID = cmp.Or(e.EnvironmentID, e.TargetID)
	}
	return e
}

// Log appends events and reads them back.
type Log struct{ db *gorm.DB }

// New returns the audit log on gdb.
func New(gdb *gorm.DB) *Log { return &Log{db: gdb} }

// Record appends e for the subject in ctx, in the transaction carried by ctx (it opens
// one when there is none). Events of one organization are serialised by a transaction
// advisory lock, so the chain never forks even under concurrent changes.
func (l *Log) Record(ctx context.Context, e Entry) error {
	subject, ok := authz.SubjectFrom(ctx)
	if !ok || subject.OrganizationID == "" {
		return errors.New("recording audit event: no subject in context")
	}
	return l.RecordAs(ctx, subject, e)
}

// Lock takes organization orgID's audit chain lock in the transaction carried by ctx,
// until it ends (taking it again is free). Every audited change holds it from its
// first event to its commit, so a transaction that will lock several rows and audit
// (a decision, a state write, a member's demotion voiding approvals) takes it first:
// one lock order for all of them, no deadlock between the chain and the rows.
func (l *Log) Lock(ctx context.Context, orgID string) error {
	if err := db.Conn(ctx, l.db).Exec("SELECT pg_advisory_xact_lock(hashtextextended('audit:' || ?, 0))", orgID).Error; err != nil {
		return fmt.Errorf("locking audit chain: %w", err)
	}
	return nil
}

// RecordAs is Record for an explicit subject (used where the context has none yet,
// such as a login).
func (l *Log) RecordAs(ctx context.Context, subject authz.Subject, e Entry) error {
	data, err := canonicalJSON(e.Data)
	if err != nil {
		return fmt.Errorf("encoding audit data: %w", err)
	}
	e = e.scoped()
	return db.Tx(ctx, l.db, func(ctx context.Context) error {
		conn := db.Conn(ctx, l.db)
		if err := l.Lock(ctx, subject.OrganizationID); err != nil {
			return err
		}
		var head struct {
			Now  time.Time
			Seq  int64
			Hash []byte
		}
		// The database clock, not the portal's, dates every event, and never earlier
		// than the event before it (now() is when the transaction began, which may be
		// before the event the lock made it wait for): time follows the sequence, so a
		// time range is one stretch of the chain.
		err := conn.Raw(`SELECT GREATEST(now(), h.occurred_at) AS now, COALESCE(h.seq, 0) AS seq, h.hash AS hash
		        FROM (SELECT 1) AS one
		        LEFT JOIN LATERAL (SELECT seq, hash, occurred_at FROM audit_events WHERE organization_id = ? ORDER BY seq DESC LIMIT 1) AS h ON true`,
			subject.OrganizationID).Scan(&head).Error
		if err != nil {
			return fmt.Errorf("reading audit chain head: %w", err)
		}
		ev := Event{
			OrganizationID: subject.OrganizationID,
			Seq:            head.Seq + 1,
			OccurredAt:     head.Now.UTC().Truncate(time.Microsecond),
			ActorID:        subject.UserID,
			ActorName:      subject.Name,
			Action:         e.Action,
			TargetType:     e.TargetType,
			TargetID:       e.TargetID,
			Data:           data,
			EnvironmentID:  e.EnvironmentID,
			WorkspaceID:    e.WorkspaceID,
			RunID:          e.RunID,
			PrevHash:       head.Hash,
		}
		if ev.HashedBody, err = ev.Body(); err != nil {
			return err
		}
		ev.Hash = HashOf(ev.PrevHash, ev.HashedBody)
		if err := conn.Create(&ev).Error; err != nil {
			return fmt.Errorf("inserting audit event: %w", db.Translate(err)) // a NUL in the data is the request's fault
		}
		return nil
	})
}

// Body returns the exact bytes an event's hash covers after its predecessor's hash:
// Hash = sha256(PrevHash || Body). It is the JSON object of the event's fields in a
// fixed order, with no insignificant space, strings escaped as encoding/json escapes
// them and Data in canonical form (object keys sorted, numbers as written), so the
// bytes are the same when recomputed from the jsonb column months later; the scopes
// are left out when empty, so events recorded before they existed hash as they did.
// Exports carry these bytes (docs/audit-format.md). It is written by hand because an
// export rebuilds a million of them; TestBodyMatchesEncodingJSON holds it equal to the
// same struct through encoding/json.
func (e Event) Body() ([]byte, error) {
	var p parser
	return e.appendBody(make([]byte, 0, 256+len(e.Data)), &p)
}

// appendBody appends the body to dst, canonicalising the data with p.
func (e Event) appendBody(dst []byte, p *parser) ([]byte, error) {
	dst = append(dst, `{"organization_id":`...)
	dst = appendJSONString(dst, e.OrganizationID)
	dst = append(dst, `,"seq":`...)
	dst = strconv.AppendInt(dst, e.Seq, 10)
	dst = append(dst, `,"occurred_at":`...)
	dst = appendJSONString(dst, e.OccurredAt.UTC().Format("2006-01-02T15:04:05.000000Z"))
	for _, f := range []struct{ name, value string }{{`,"actor_id":`, e.ActorID}, {`,"actor_name":`, e.ActorName},
		{`,"action":`, e.Action}, {`,"target_type":`, e.TargetType}, {`,"target_id":`, e.TargetID}} {
		dst = appendJSONString(append(dst, f.name...), f.value)
	}
	dst = append(dst, `,"data":`...)
	var err error
	if e.Data == nil {
		dst = append(dst, "{}"...)
	} else if dst, err = p.canonical(dst, e.Data); err != nil {
		return nil, fmt.Errorf("canonicalising audit data: %w", err)
	}
	for _, f := range []struct{ name, value string }{{`,"environment_id":`, e.EnvironmentID}, {`,"workspace_id":`, e.WorkspaceID},
		{`,"run_id":`, e.RunID}} {
		if f.value != "" {
			dst = appendJSONString(append(dst, f.name...), f.value)
		}
	}
	return append(dst, '}'), nil
}

// HashOf is an event's hash: sha256(prevHash || body).
func HashOf(prevHash, body []byte) []byte {
	h := sha256.New()
	h.Write(prevHash)
	h.Write(body)
	return h.Sum(nil)
}

// canonicalJSON encodes v (or takes raw JSON) and returns its canonical form: sorted
// object keys, exact numbers, no insignificant space; the form that survives a round
// trip through jsonb unchanged.
func canonicalJSON(v any) (json.RawMessage, error) {
	var raw []byte
	switch t := v.(type) {
	case nil:
		return json.RawMessage("{}"), nil
	case json.RawMessage:
		raw = t
	case []byte:
		raw = t
	default:
		var err error
		if raw, err = json.Marshal(v); err != nil {
			return nil, err
		}
	}
	return appendCanonical(nil, raw)
}

// ErrChainBroken means an event's hash or link does not match: the log was altered.
var ErrChainBroken = errors.New("audit chain broken")

// Verify recomputes the chain of organization orgID from its first event and returns
// the number of events checked, or ErrChainBroken naming the first bad sequence number.
func (l *Log) Verify(ctx context.Context, orgID string) (int, error) {
	var events []Event
	if err := db.Conn(ctx, l.db).Where("organization_id = ?", orgID).Order("seq").Find(&events).Error; err != nil {
		return 0, fmt.Errorf("reading audit events: %w", err)
	}
	var prev []byte
	for i, ev := range events {
		if reason := link(int64(i), prev, ev); reason != "" {
			return i, fmt.Errorf("seq %d: %s: %w", i+1, reason, ErrChainBroken)
		}
		prev = ev.Hash
	}
	return len(events), nil
}

// Filter narrows a listing of events.
type Filter struct {
	TargetType string
	TargetID   string
	Limit      int
}

// List returns the newest events of the subject's organization first. Reading the log
// needs audit.read.
func (l *Log) List(ctx context.Context, f Filter) ([]Event, error) {
	subject, err := authz.Require(ctx, authz.PermAuditRead)
	if err != nil {
		return nil, err
	}
	q := db.Conn(ctx, l.db).Where("organization_id = ?", subject.OrganizationID)
	if f.TargetType != "" {
		q = q.Where("target_type = ?", f.TargetType)
	}
	if f.TargetID != "" {
		q = q.Where("target_id = ?", f.TargetID)
	}
	if f.Limit <= 0 || f.Limit > 500 {
		f.Limit = 100
	}
	var events []Event
	if err := q.Order("seq DESC").Limit(f.Limit).Find(&events).Error; err != nil {
		return nil, fmt.Errorf("listing audit events: %w", err)
	}
	return events, nil
}

// OfTarget returns the events about one object of organization orgID, oldest first,
// for a service that has already decided its subject may see that object (a run's
// timeline); it checks no permission itself.
func (l *Log) OfTarget(ctx context.Context, orgID, targetType, targetID string) ([]Event, error) {
	var events []Event
	err := db.Conn(ctx, l.db).Where("organization_id = ? AND target_type = ? AND target_id = ?", orgID, targetType, targetID).
		Order("seq").Find(&events).Error
	if err != nil {
		return nil, fmt.Errorf("reading the history of %s %s: %w", targetType, targetID, err)
	}
	return events, nil
}
