package workspace

import (
	"context"
	"fmt"

	"gorm.io/gorm"

	"gantry/models/authz"
	"gantry/models/db"
)

// View is a workspace with its environment's name.
type View struct {
	Workspace
	EnvironmentName string
}

// Service reads workspaces of the subject's organization. Workspaces are created by
// requesting a run (models/run).
type Service struct{ db *gorm.DB }

// NewService returns the workspace service.
func NewService(gdb *gorm.DB) *Service { return &Service{db: gdb} }

const viewQuery = `SELECT w.*, e.name AS environment_name FROM workspaces w
	JOIN environments e ON e.id = w.environment_id AND e.organization_id = w.organization_id`

// List returns the organization's workspaces by environment tier, then name.
func (s *Service) List(ctx context.Context) ([]View, error) {
	subject, err := authz.Require(ctx, authz.PermOrgRead)
	if err != nil {
		return nil, err
	}
	var out []View
	err = db.Conn(ctx, s.db).Raw(viewQuery+` WHERE w.organization_id = ?
		ORDER BY CASE e.tier WHEN 'development' THEN 1 WHEN 'staging' THEN 2 ELSE 3 END, w.name`, subject.OrganizationID).Scan(&out).Error
	if err != nil {
		return nil, fmt.Errorf("listing workspaces: %w", err)
	}
	return out, nil
}

// Get returns workspace id of the subject's organization.
func (s *Service) Get(ctx context.Context, id string) (View, error) {
	subject, err := authz.Require(ctx, authz.PermOrgRead)
	if err != nil {
		return View{}, err
	}
	var out []View
	if err := db.Conn(ctx, s.db).Raw(viewQuery+` WHERE w.organization_id = ? AND w.id = ?`, subject.OrganizationID, id).Scan(&out).Error; err != nil {
		return View{}, fmt.Errorf("reading workspace: %w", err)
	}
	if len(out) == 0 {
		return View{}, fmt.Errorf("workspace %s: %w", id, db.Translate(gorm.ErrRecordNotFound))
	}
	return out[0], nil
}
