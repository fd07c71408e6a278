package workspace

import (
	"context"
	"fmt"

	"gorm.io/gorm"
	"gorm.io/gorm/clause"

	"gantry/models/audit"
	"gantry/models/authz"
	"gantry/models/db"
	"gantry/models/errs"
)

// Archiving: a workspace that holds nothing any more (destroyed, or never applied) and
// has no run under way can be archived by whoever may request its destroy. It leaves
// the workspace lists (listed again on request) and keeps its runs, state history and
// audit; its page still answers. A new request into its name brings it back.

// Holdings says whether a workspace's newest state version holds any resource (none:
// never applied, or destroyed) (the state store).
type Holdings interface {
	Holds(ctx context.Context, orgID, workspaceID string) (bool, error)
}

// Activity counts a workspace's runs that have not finished (the runs).
type Activity interface {
	Unfinished(ctx context.Context, orgID, workspaceID string) (int64, error)
}

// MayArchive says whether subject may archive workspaces: who may request a destroy.
func MayArchive(subject authz.Subject) bool { return subject.Can(authz.PermRunsApply) }

// ArchiveRefusal says why a workspace cannot be archived now ("" when it can): the one
// rule the page's button and the service both ask.
func ArchiveRefusal(archived, applying, holds bool, unfinished int64) string {
	switch {
	case archived:
		return "The workspace is archived already."
	case applying || unfinished > 0:
		return "A run of this workspace has not finished: archive it once nothing is under way."
	case holds:
		return "The workspace still holds resources: destroy them first, then archive it."
	}
	return ""
}

// Archiver archives workspaces.
type Archiver struct {
	db       *gorm.DB
	audit    *audit.Log
	views    *Service
	holdings Holdings
	activity Activity
}

// NewArchiver returns the archiver over the workspaces' reads and what it asks of the
// state and the runs.
func NewArchiver(gdb *gorm.DB, log *audit.Log, views *Service, holdings Holdings, activity Activity) *Archiver {
	return &Archiver{db: gdb, audit: log, views: views, holdings: holdings, activity: activity}
}

// Archive archives workspace id of the subject's organization: not found for one they
// may not see, forbidden without the permission, a conflict that says why while it
// holds resources or a run is under way.
func (a *Archiver) Archive(ctx context.Context, id string) (View, error) {
	// A workspace the subject may not see is not found before anything is refused.
	ws, err := a.views.Get(ctx, id)
	if err != nil {
		return View{}, err
	}
	subject, err := authz.Require(ctx, authz.PermRunsApply)
	if err != nil {
		return View{}, err
	}
	err = db.Tx(ctx, a.db, func(ctx context.Context) error {
		var locked Workspace
		conn := db.Conn(ctx, a.db)
		if err := conn.Clauses(clause.Locking{Strength: "UPDATE"}).Where("organization_id = ? AND id = ?", subject.OrganizationID, ws.ID).
			Take(&locked).Error; err != nil {
			return fmt.Errorf("locking workspace: %w", db.Translate(err))
		}
		holds, err := a.holdings.Holds(ctx, subject.OrganizationID, ws.ID)
		if err != nil {
			return err
		}
		unfinished, err := a.activity.Unfinished(ctx, subject.OrganizationID, ws.ID)
		if err != nil {
			return err
		}
		if why := ArchiveRefusal(locked.ArchivedAt != nil, locked.ActiveRunID != nil, holds, unfinished); why != "" {
			return errs.Explain(errs.ErrConflict, why)
		}
		if err := conn.Model(&Workspace{}).Where("id = ?", ws.ID).
			Updates(map[string]any{"archived_at": gorm.Expr("now()"), "archived_by": subject.UserID, "archived_by_name": subject.Name}).Error; err != nil {
			return fmt.Errorf("archiving workspace: %w", err)
		}
		return a.audit.Record(ctx, audit.Entry{Action: "workspace.archived", TargetType: "workspace", TargetID: ws.ID,
			EnvironmentID: ws.EnvironmentID, Data: map[string]any{"name": ws.Name, "environment_id": ws.EnvironmentID}})
	})
	if err != nil {
		return View{}, err
	}
	return a.views.Get(ctx, id)
}
