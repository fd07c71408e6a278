package risk

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"gorm.io/gorm"

	"gantry/models/audit"
	"gantry/models/authz"
	"gantry/models/db"
	"gantry/models/errs"
)

// Version is one saved matrix of an organization. Version 0 is the built-in default, which
// an organization uses until its owners first save a matrix (no row is stored for it).
type Version struct {
	OrganizationID string
	Version        int
	Matrix         Matrix
	Comment        string
	CreatedByName  string
	CreatedAt      time.Time
}

// versionRow is one row of risk_matrix_versions.
type versionRow struct {
	OrganizationID string
	Version        int
	Matrix         json.RawMessage `gorm:"type:jsonb"`
	Comment        string
	CreatedBy      *string
	CreatedByName  string
	CreatedAt      time.Time
}

func (versionRow) TableName() string { return "risk_matrix_versions" }

func (r versionRow) version() (Version, error) {
	var m Matrix
	if err := json.Unmarshal(r.Matrix, &m); err != nil {
		return Version{}, fmt.Errorf("decoding risk matrix version %d: %w", r.Version, err)
	}
	return Version{OrganizationID: r.OrganizationID, Version: r.Version, Matrix: m, Comment: r.Comment,
		CreatedByName: r.CreatedByName, CreatedAt: r.CreatedAt}, nil
}

// Latest is the newest of history (newest first, as History returns it), or version 0 with
// the default matrix when nothing was saved yet.
func Latest(history []Version) Version {
	if len(history) == 0 {
		return Version{Version: 0, Matrix: Default()}
	}
	return history[0]
}

// MaxComment bounds a version's comment.
const MaxComment = 500

// AnyVersion, as SaveOnto's base, saves onto whatever version is current.
const AnyVersion = -1

// Store keeps the versions of every organization's matrix. Versions are append-only (the
// database refuses UPDATE and DELETE): a run names the version that classified it.
type Store struct {
	db     *gorm.DB
	audit  *audit.Log
	floors Floors
}

// NewStore returns the matrix store.
func NewStore(gdb *gorm.DB, log *audit.Log, floors Floors) *Store {
	return &Store{db: gdb, audit: log, floors: floors}
}

// Current returns organization orgID's newest version, or version 0 with Default() when
// none is stored. It checks no permission: the run service classifies runs with it as the
// system. It reads in the transaction carried by ctx, if any.
func (s *Store) Current(ctx context.Context, orgID string) (Version, error) {
	var row versionRow
	err := db.Conn(ctx, s.db).Where("organization_id = ?", orgID).Order("version DESC").Take(&row).Error
	if errors.Is(err, gorm.ErrRecordNotFound) {
		return Version{OrganizationID: orgID, Version: 0, Matrix: Default()}, nil
	}
	if err != nil {
		return Version{}, fmt.Errorf("reading the risk matrix: %w", db.Translate(err))
	}
	return row.version()
}

// History returns the saved versions of the subject's organization, newest first (empty
// while the organization uses the default). Every member may read it.
func (s *Store) History(ctx context.Context) ([]Version, error) {
	subject, err := authz.Require(ctx, authz.PermOrgRead)
	if err != nil {
		return nil, err
	}
	var rows []versionRow
	if err := db.Conn(ctx, s.db).Where("organization_id = ?", subject.OrganizationID).Order("version DESC").Find(&rows).Error; err != nil {
		return nil, fmt.Errorf("listing risk matrix versions: %w", err)
	}
	out := make([]Version, 0, len(rows))
	for _, r := range rows {
		v, err := r.version()
		if err != nil {
			return nil, err
		}
		out = append(out, v)
	}
	return out, nil
}

// Save stores m as the next version of the subject's organization's matrix (owners only).
// See SaveOnto.
func (s *Store) Save(ctx context.Context, m Matrix, comment string) (Version, error) {
	return s.SaveOnto(ctx, AnyVersion, m, comment)
}

// SaveOnto stores m as the next version, provided the current version is still base (the
// one the editor started from; AnyVersion skips the check): an edit made on an older
// version is ErrConflict rather than silently undoing another owner's change. Bad input is
// an *errs.Validation and nothing is written. A matrix equal to the current one writes
// nothing and returns the current version. The new version and its audit event
// ("risk_matrix.updated", naming the versions and every changed row) commit together.
func (s *Store) SaveOnto(ctx context.Context, base int, m Matrix, comment string) (Version, error) {
	subject, err := authz.Require(ctx, authz.PermMatrixManage)
	if err != nil {
		return Version{}, err
	}
	comment = strings.TrimSpace(comment)
	if err := validateSave(m, comment, s.floors); err != nil {
		return Version{}, err
	}
	raw, err := json.Marshal(m)
	if err != nil {
		return Version{}, fmt.Errorf("encoding the risk matrix: %w", err)
	}
	var saved Version
	err = db.Tx(ctx, s.db, func(ctx context.Context) error {
		conn := db.Conn(ctx, s.db)
		// Versions of one organization are numbered under a transaction lock: two owners
		// saving at once get consecutive versions, never the same number or a gap, and
		// the second one's base check sees the first one's version.
		if err := conn.Exec("SELECT pg_advisory_xact_lock(hashtextextended('risk_matrix:' || ?, 0))", subject.OrganizationID).Error; err != nil {
			return fmt.Errorf("locking the risk matrix: %w", err)
		}
		cur, err := s.Current(ctx, subject.OrganizationID)
		if err != nil {
			return err
		}
		if base != AnyVersion && cur.Version != base {
			return fmt.Errorf("the risk matrix is at version %d, the edit started from version %d: %w", cur.Version, base, errs.ErrConflict)
		}
		changes := Diff(cur.Matrix, m)
		if len(changes) == 0 {
			saved = cur
			return nil
		}
		row := versionRow{OrganizationID: subject.OrganizationID, Version: cur.Version + 1, Matrix: raw,
			Comment: comment, CreatedByName: subject.Name}
		if !subject.System {
			row.CreatedBy = &subject.UserID
		}
		// The database clock dates the version, as it dates the audit event.
		var inserted struct{ CreatedAt time.Time }
		err = conn.Raw(`INSERT INTO risk_matrix_versions (organization_id, version, matrix, comment, created_by, created_by_name)
			VALUES (?, ?, ?, ?, ?, ?) RETURNING created_at`,
			row.OrganizationID, row.Version, string(row.Matrix), row.Comment, row.CreatedBy, row.CreatedByName).Scan(&inserted).Error
		if err != nil {
			return fmt.Errorf("saving risk matrix version %d: %w", row.Version, db.Translate(err))
		}
		row.CreatedAt = inserted.CreatedAt
		if saved, err = row.version(); err != nil {
			return err
		}
		return s.audit.Record(ctx, audit.Entry{
			Action: "risk_matrix.updated", TargetType: "risk_matrix", TargetID: strconv.Itoa(row.Version),
			Data: map[string]any{"before_version": cur.Version, "after_version": row.Version, "changes": changes, "comment": comment},
		})
	})
	if err != nil {
		return Version{}, err
	}
	return saved, nil
}

// validateSave checks the matrix and the comment together, so a form shows every message.
func validateSave(m Matrix, comment string, floors Floors) error {
	v, _ := errs.AsValidation(m.Validate())
	if v == nil {
		v = &errs.Validation{}
	}
	if below, ok := errs.AsValidation(floors.Check(m)); ok {
		for field, msg := range below.Fields {
			v.Add(field, msg)
		}
	}
	if len([]rune(comment)) > MaxComment {
		v.Add("comment", fmt.Sprintf("Use at most %d characters.", MaxComment))
	}
	return v.Err()
}
