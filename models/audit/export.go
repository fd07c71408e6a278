package audit

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"gorm.io/gorm"

	"gantry/models/audit/exportfile"
	"gantry/models/authz"
	"gantry/models/db"
	"gantry/models/errs"
	"gantry/models/keyring"
)

// Export statuses.
const (
	ExportQueued   = "queued"
	ExportBuilding = "building"
	ExportReady    = "ready"
	ExportFailed   = "failed"
)

// ChunkSize is the plaintext size of an export's encrypted chunks: memory holds one.
const ChunkSize = 1 << 20

// exportBatch is how many events the builder reads per query.
const exportBatch = 2000

// Export is one row of audit_exports.
type Export struct {
	ID             string
	OrganizationID string
	RequestedBy    string
	Format         string
	FromTime       time.Time
	ToTime         time.Time
	Filters        exportfile.Filters `gorm:"serializer:json"`
	LastSeq        int64
	Status         string
	EventsTotal    *int64
	EventsDone     int64
	Size           *int64
	SHA256         string          `gorm:"column:sha256;default:null"`
	Manifest       json.RawMessage `gorm:"type:jsonb;default:null"`
	Error          string          `gorm:"default:null"`
	ChunkSize      int
	KeyID          string
	WrappedKey     []byte
	CreatedAt      time.Time
	FinishedAt     *time.Time
}

func (Export) TableName() string { return "audit_exports" }

// Percent is the build's progress, 0..100.
func (e Export) Percent() int {
	switch {
	case e.Status == ExportReady:
		return 100
	case e.EventsTotal == nil || *e.EventsTotal == 0:
		return 0
	}
	return int(min(99, e.EventsDone*100 / *e.EventsTotal))
}

// FileName is what the download is saved as.
func (e Export) FileName() string {
	return fmt.Sprintf("gantry-audit-%s-%s-%s.%s", e.ID, e.FromTime.UTC().Format("20060102T150405Z"), e.ToTime.UTC().Format("20060102T150405Z"), e.Format)
}

// ExportRequest is what a person asks to export: a time range, filters and a format.
type ExportRequest struct {
	Query  Query
	Format string
}

// ExportEnqueuer puts an export's build job on the queue inside the caller's
// transaction (implemented by the runner package).
type ExportEnqueuer interface {
	EnqueueExport(ctx context.Context, exportID string) error
}

// Exports builds and serves signed exports of the audit log.
type Exports struct {
	db      *gorm.DB
	log     *Log
	keys    *keyring.Keyring
	signers *Keys
	enqueue ExportEnqueuer
	// chunkSize is ChunkSize; tests make it small to cross chunk boundaries.
	chunkSize int
}

// NewExports returns the export service.
func NewExports(gdb *gorm.DB, log *Log, keys *keyring.Keyring, signers *Keys, enqueue ExportEnqueuer) *Exports {
	return &Exports{db: gdb, log: log, keys: keys, signers: signers, enqueue: enqueue, chunkSize: ChunkSize}
}

// Request records an export of the subject's organization's log and queues its build.
// The export is pinned to the events that exist now: later events in its range are not
// in it. Asking for it is itself an audit event (which the export does not contain).
func (x *Exports) Request(ctx context.Context, req ExportRequest) (Export, error) {
	subject, err := authz.Require(ctx, authz.PermAuditExport)
	if err != nil {
		return Export{}, err
	}
	var v errs.Validation
	if req.Format != exportfile.JSONL && req.Format != exportfile.CSV {
		v.Add("format", "must be csv or jsonl")
	}
	if req.Query.From.IsZero() {
		v.Add("from", "is required")
	}
	if req.Query.To.IsZero() {
		v.Add("to", "is required")
	}
	if err := req.Query.Validate(); err != nil {
		ve, _ := errs.AsValidation(err)
		for f, m := range ve.Fields {
			v.Add(f, m)
		}
	}
	if err := v.Err(); err != nil {
		return Export{}, err
	}
	dataKey, wrapped, err := x.keys.NewDataKey()
	if err != nil {
		return Export{}, err
	}
	clear(dataKey) // the builder unwraps it again
	q := req.Query
	e := Export{ID: db.NewID("exp"), OrganizationID: subject.OrganizationID, RequestedBy: subject.UserID, Format: req.Format,
		FromTime: q.From.UTC(), ToTime: q.To.UTC(), Filters: filtersOf(q), Status: ExportQueued, ChunkSize: x.chunkSize,
		KeyID: wrapped.KeyID, WrappedKey: wrapped.WrappedKey}
	err = db.Tx(ctx, x.db, func(ctx context.Context) error {
		if err := x.log.Lock(ctx, subject.OrganizationID); err != nil { // the head cannot move under us
			return err
		}
		if e.LastSeq, err = x.log.Head(ctx, subject.OrganizationID); err != nil {
			return err
		}
		if err := db.Conn(ctx, x.db).Omit("CreatedAt").Create(&e).Error; err != nil {
			return fmt.Errorf("saving export: %w", db.Translate(err))
		}
		if err := x.log.Record(ctx, Entry{Action: "audit.export_requested", TargetType: "audit_export", TargetID: e.ID,
			Data:          map[string]any{"format": e.Format, "from": e.FromTime, "to": e.ToTime, "filters": e.Filters, "last_seq": e.LastSeq},
			EnvironmentID: q.EnvironmentID, WorkspaceID: q.WorkspaceID, RunID: q.RunID}); err != nil {
			return err
		}
		return x.enqueue.EnqueueExport(ctx, e.ID)
	})
	if err != nil {
		return Export{}, err
	}
	return x.get(ctx, subject.OrganizationID, e.ID)
}

func filtersOf(q Query) exportfile.Filters {
	return exportfile.Filters{Actor: q.ActorID, Action: q.Action, Run: q.RunID, Environment: q.EnvironmentID, Workspace: q.WorkspaceID}
}

func queryOf(e Export) Query {
	f := e.Filters
	return Query{From: e.FromTime, To: e.ToTime, ActorID: f.Actor, Action: f.Action, RunID: f.Run, EnvironmentID: f.Environment, WorkspaceID: f.Workspace}
}

// Get returns one export of the subject's organization (another's is not found).
func (x *Exports) Get(ctx context.Context, id string) (Export, error) {
	subject, err := authz.Require(ctx, authz.PermAuditExport)
	if err != nil {
		return Export{}, err
	}
	return x.get(ctx, subject.OrganizationID, id)
}

func (x *Exports) get(ctx context.Context, orgID, id string) (Export, error) {
	var e Export
	if err := db.Conn(ctx, x.db).Where("organization_id = ? AND id = ?", orgID, id).First(&e).Error; err != nil {
		return Export{}, fmt.Errorf("export %s: %w", id, db.Translate(err))
	}
	return e, nil
}

// List returns the subject's organization's most recent exports, newest first.
func (x *Exports) List(ctx context.Context, limit int) ([]Export, error) {
	subject, err := authz.Require(ctx, authz.PermAuditExport)
	if err != nil {
		return nil, err
	}
	var out []Export
	if err := db.Conn(ctx, x.db).Where("organization_id = ?", subject.OrganizationID).Order("created_at DESC").Limit(limit).Find(&out).Error; err != nil {
		return nil, fmt.Errorf("listing exports: %w", err)
	}
	return out, nil
}

// Build writes export id: it streams the pinned events (batch by batch, in seq order)
// through the export file writer into encrypted chunks, reports progress on the row,
// signs the manifest and records that the export is ready. It is the job's work: a
// retry starts over. It checks no permission (the request did).
func (x *Exports) Build(ctx context.Context, id string) error {
	var e Export
	if err := db.Conn(ctx, x.db).Where("id = ?", id).First(&e).Error; err != nil {
		return fmt.Errorf("export %s: %w", id, db.Translate(err))
	}
	if e.Status == ExportReady || e.Status == ExportFailed {
		return nil // done already: the job ran twice
	}
	q := queryOf(e)
	var total int64
	if err := x.log.filtered(ctx, e.OrganizationID, q).Where("seq <= ?", e.LastSeq).Count(&total).Error; err != nil {
		return fmt.Errorf("counting events: %w", err)
	}
	conn := db.Conn(ctx, x.db)
	if err := conn.Exec("DELETE FROM audit_export_chunks WHERE export_id = ?", id).Error; err != nil {
		return fmt.Errorf("clearing an earlier attempt: %w", err)
	}
	if err := conn.Model(&Export{}).Where("id = ?", id).Updates(map[string]any{"status": ExportBuilding, "events_total": total, "events_done": 0}).Error; err != nil {
		return fmt.Errorf("starting export: %w", err)
	}
	dataKey, err := x.keys.DataKey(keyring.Sealed{KeyID: e.KeyID, WrappedKey: e.WrappedKey})
	if err != nil {
		return x.failed(ctx, e, err)
	}
	chunks, err := newChunkWriter(ctx, x.db, e, dataKey)
	if err != nil {
		return x.failed(ctx, e, err)
	}
	digest := sha256.New()
	out := io.MultiWriter(chunks, digest)
	w, err := exportfile.NewWriter(out, e.Format, exportfile.Manifest{ExportID: e.ID, OrganizationID: e.OrganizationID,
		From: e.FromTime, To: e.ToTime, Filters: e.Filters, CreatedAt: e.CreatedAt.UTC()})
	if err != nil {
		return x.failed(ctx, e, err)
	}
	var parser parser
	var rebuilt []byte
	err = x.stream(ctx, e, q, func(ev Event) error {
		// The body as it was hashed; an event recorded before bodies were stored is
		// rebuilt from its columns (the chain check holds both to be the same).
		body := ev.HashedBody
		if body == nil {
			var err error
			if rebuilt, err = ev.appendBody(rebuilt[:0], &parser); err != nil {
				return err
			}
			body = rebuilt
		}
		line := exportfile.Line{Seq: ev.Seq, PrevHash: ev.PrevHash, Hash: ev.Hash, Body: body}
		if e.Format == exportfile.CSV {
			line.OccurredAt, line.ActorName, line.Action = ev.OccurredAt.UTC().Format(time.RFC3339Nano), ev.ActorName, ev.Action
			line.TargetType, line.TargetID = ev.TargetType, ev.TargetID
		}
		return w.Write(line)
	}, func(done int64) error {
		return db.Conn(ctx, x.db).Model(&Export{}).Where("id = ?", id).Update("events_done", done).Error
	})
	if err != nil {
		return err // a database error: River retries
	}
	signer, err := x.signers.Signer(ctx, e.OrganizationID)
	if err != nil {
		return err
	}
	manifest, err := w.Close(signer)
	if err != nil {
		return x.failed(ctx, e, err)
	}
	if err := chunks.Close(); err != nil {
		return err
	}
	raw, err := json.Marshal(manifest)
	if err != nil {
		return err
	}
	sum := hex.EncodeToString(digest.Sum(nil))
	now := time.Now().UTC()
	return db.Tx(ctx, x.db, func(ctx context.Context) error {
		if err := db.Conn(ctx, x.db).Model(&Export{}).Where("id = ?", id).Updates(map[string]any{"status": ExportReady,
			"events_done": manifest.Events, "size": chunks.written, "sha256": sum, "manifest": raw, "finished_at": now}).Error; err != nil {
			return fmt.Errorf("finishing export: %w", err)
		}
		return x.log.RecordAs(ctx, authz.System(e.OrganizationID), Entry{Action: "audit.exported", TargetType: "audit_export", TargetID: e.ID,
			Data: map[string]any{"sha256": sum, "size": chunks.written, "events": manifest.Events, "first_seq": manifest.FirstSeq,
				"last_seq": manifest.LastSeq, "key_id": manifest.KeyID, "key_fingerprint": manifest.KeyFingerprint, "mode": manifest.Mode}})
	})
}

// failed marks the export failed for a reason a retry would not change.
func (x *Exports) failed(ctx context.Context, e Export, cause error) error {
	msg := strings.TrimSpace(cause.Error())
	if err := db.Conn(ctx, x.db).Model(&Export{}).Where("id = ?", e.ID).Updates(map[string]any{"status": ExportFailed, "error": msg,
		"finished_at": time.Now().UTC()}).Error; err != nil {
		return errors.Join(cause, err)
	}
	return nil
}
