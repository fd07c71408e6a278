package workspace

import (
	"context"
	"errors"
	"fmt"

	"gorm.io/gorm"
	"gorm.io/gorm/clause"

	"gantry/models/audit"
	"gantry/models/db"
	"gantry/models/errs"
	"gantry/models/listing"
)

// Store holds what the run lifecycle asks of workspaces: finding and creating them,
// numbering their runs and their apply slot. It checks no permission: the run service
// authorizes its subject first.
type Store struct {
	db    *gorm.DB
	audit *audit.Log
}

// NewStore returns the workspace store.
func NewStore(gdb *gorm.DB, log *audit.Log) *Store { return &Store{db: gdb, audit: log} }

// Find returns the workspace named name in environment envID of orgID, or nil.
func (s *Store) Find(ctx context.Context, orgID, envID, name string) (*Workspace, error) {
	var ws Workspace
	err := db.Conn(ctx, s.db).Where("organization_id = ? AND environment_id = ? AND name = ?", orgID, envID, name).Take(&ws).Error
	switch {
	case errors.Is(err, gorm.ErrRecordNotFound):
		return nil, nil
	case err != nil:
		return nil, fmt.Errorf("reading workspace: %w", err)
	}
	return &ws, nil
}

// Get is workspace id of orgID (errs.ErrNotFound when orgID has none such).
func (s *Store) Get(ctx context.Context, orgID, id string) (Workspace, error) {
	var ws Workspace
	if err := db.Conn(ctx, s.db).Where("organization_id = ? AND id = ?", orgID, id).Take(&ws).Error; err != nil {
		return Workspace{}, fmt.Errorf("workspace %s: %w", id, db.Translate(err))
	}
	return ws, nil
}

// NameOf is the name of workspace id of orgID.
func (s *Store) NameOf(ctx context.Context, orgID, id string) (string, error) {
	var names []string
	if err := db.Conn(ctx, s.db).Model(&Workspace{}).Where("organization_id = ? AND id = ?", orgID, id).Pluck("name", &names).Error; err != nil {
		return "", fmt.Errorf("reading workspace: %w", err)
	}
	if len(names) == 0 {
		return "", fmt.Errorf("workspace %s: %w", id, errs.ErrNotFound)
	}
	return names[0], nil
}

// Names lists the names of environment envID's workspaces (a request's "did you mean").
func (s *Store) Names(ctx context.Context, orgID, envID string) ([]string, error) {
	var names []string
	if err := db.Conn(ctx, s.db).Model(&Workspace{}).Where("organization_id = ? AND environment_id = ?", orgID, envID).
		Order("name").Pluck("name", &names).Error; err != nil {
		return nil, fmt.Errorf("listing workspaces: %w", err)
	}
	return names, nil
}

// Matching lists, by name, the ids of orgID's workspaces whose name holds text (is
// text, when exact), at most limit of them, leaving out those of the hidden
// environments (the reader's): a search of the runs list and the inbox.
func (s *Store) Matching(ctx context.Context, orgID, text string, exact bool, hidden []string, limit int) ([]string, error) {
	q := db.Conn(ctx, s.db).Model(&Workspace{}).Where("organization_id = ?", orgID)
	if len(hidden) > 0 {
		q = q.Where("environment_id NOT IN ?", hidden)
	}
	if exact {
		q = q.Where("name = ?", text)
	} else {
		q = q.Where(listing.Contains("name"), text)
	}
	var ids []string
	if err := q.Order("name, id").Limit(limit).Pluck("id", &ids).Error; err != nil {
		return nil, fmt.Errorf("searching workspaces: %w", err)
	}
	return ids, nil
}

// Ensure finds or creates the named workspace under a row lock held until the
// transaction in ctx ends, so two requests for the same new workspace get one
// workspace and consecutive run numbers. A workspace holding another template is a
// field message.
func (s *Store) Ensure(ctx context.Context, orgID, envID, name, template string) (Workspace, error) {
	conn := db.Conn(ctx, s.db)
	ws := Workspace{ID: db.NewID("ws"), OrganizationID: orgID, EnvironmentID: envID, Name: name, TemplateName: template, NextRunNumber: 1}
	res := conn.Clauses(clause.OnConflict{DoNothing: true}).Create(&ws)
	if res.Error != nil {
		return Workspace{}, fmt.Errorf("creating workspace: %w", db.Translate(res.Error))
	}
	if res.RowsAffected == 1 {
		if err := s.audit.Record(ctx, audit.Entry{Action: "workspace.created", TargetType: "workspace", TargetID: ws.ID, EnvironmentID: envID,
			Data: map[string]any{"name": name, "environment_id": envID, "template": template}}); err != nil {
			return Workspace{}, err
		}
	}
	var locked Workspace
	err := conn.Clauses(clause.Locking{Strength: "UPDATE"}).Where("organization_id = ? AND environment_id = ? AND name = ?", orgID, envID, name).Take(&locked).Error
	if err != nil {
		return Workspace{}, fmt.Errorf("locking workspace: %w", err)
	}
	if locked.TemplateName != template {
		v := &errs.Validation{}
		v.Add("workspace", fmt.Sprintf("Workspace %s holds a %s; choose another name for a %s.", name, locked.TemplateName, template))
		return Workspace{}, v
	}
	if locked.ArchivedAt != nil {
		// A request into an archived workspace's name brings it back to the lists.
		if err := conn.Model(&Workspace{}).Where("id = ?", locked.ID).
			Updates(map[string]any{"archived_at": nil, "archived_by": nil, "archived_by_name": ""}).Error; err != nil {
			return Workspace{}, fmt.Errorf("restoring workspace: %w", err)
		}
		if err := s.audit.Record(ctx, audit.Entry{Action: "workspace.restored", TargetType: "workspace", TargetID: locked.ID, EnvironmentID: envID,
			Data: map[string]any{"name": name, "environment_id": envID}}); err != nil {
			return Workspace{}, err
		}
		locked.ArchivedAt, locked.ArchivedBy, locked.ArchivedByName = nil, nil, ""
	}
	return locked, nil
}

// TakeRunNumber returns workspace id's next run number and counts it used; the run
// requested now is its newest (last activity).
func (s *Store) TakeRunNumber(ctx context.Context, id string) (int, error) {
	var n int
	err := db.Conn(ctx, s.db).Raw(`UPDATE workspaces SET next_run_number = next_run_number + 1, last_run_at = now()
		WHERE id = ? RETURNING next_run_number - 1`, id).Scan(&n).Error
	if err != nil {
		return 0, fmt.Errorf("numbering run: %w", err)
	}
	if n == 0 {
		return 0, fmt.Errorf("workspace %s: %w", id, errs.ErrNotFound)
	}
	return n, nil
}

// LockSlot locks workspace id's row until the transaction in ctx ends and returns the
// run holding its apply slot ("" when free).
func (s *Store) LockSlot(ctx context.Context, id string) (string, error) {
	var ws Workspace
	if err := db.Conn(ctx, s.db).Clauses(clause.Locking{Strength: "UPDATE"}).Where("id = ?", id).Take(&ws).Error; err != nil {
		return "", fmt.Errorf("locking workspace: %w", db.Translate(err))
	}
	if ws.ActiveRunID == nil {
		return "", nil
	}
	return *ws.ActiveRunID, nil
}

// SetSlot gives workspace id's apply slot to run runID.
func (s *Store) SetSlot(ctx context.Context, id, runID string) error {
	if err := db.Conn(ctx, s.db).Model(&Workspace{}).Where("id = ?", id).Update("active_run_id", runID).Error; err != nil {
		return fmt.Errorf("taking the apply slot: %w", err)
	}
	return nil
}

// ReleaseSlot frees workspace id's apply slot if run runID holds it.
func (s *Store) ReleaseSlot(ctx context.Context, id, runID string) error {
	err := db.Conn(ctx, s.db).Exec("UPDATE workspaces SET active_run_id = NULL, updated_at = now() WHERE id = ? AND active_run_id = ?", id, runID).Error
	if err != nil {
		return fmt.Errorf("releasing apply slot: %w", err)
	}
	return nil
}
