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

// Access says which environments a member may not see (environment.Service): the
// workspaces of a restricted environment without a grant do not exist for them.
type Access interface {
	HiddenFrom(ctx context.Context, subject authz.Subject) ([]string, error)
}

// Service reads workspaces of the subject's organization. Workspaces are created by
// requesting a run (models/run, through Store).
type Service struct {
	db     *gorm.DB
	access Access
}

// NewService returns the workspace service.
func NewService(gdb *gorm.DB, access Access) *Service { return &Service{db: gdb, access: access} }

const viewQuery = `SELECT w.*, e.name AS environment_name FROM workspaces w
	JOIN environments e ON e.id = w.environment_id AND e.organization_id = w.organization_id`

// hidden is the SQL that leaves out the workspaces of environments subject may not see.
func (s *Service) hidden(ctx context.Context, subject authz.Subject) (string, []any, error) {
	ids, err := s.access.HiddenFrom(ctx, subject)
	if err != nil || len(ids) == 0 {
		return "", nil, err
	}
	return " AND w.environment_id NOT IN ?", []any{ids}, nil
}

// List returns the organization's workspaces by environment tier, then name.
func (s *Service) List(ctx context.Context) ([]View, error) {
	subject, err := authz.Require(ctx, authz.PermOrgRead)
	if err != nil {
		return nil, err
	}
	hide, args, err := s.hidden(ctx, subject)
	if err != nil {
		return nil, err
	}
	var out []View
	err = db.Conn(ctx, s.db).Raw(viewQuery+` WHERE w.organization_id = ?`+hide+`
		ORDER BY CASE e.tier WHEN 'development' THEN 1 WHEN 'staging' THEN 2 ELSE 3 END, w.name`, append([]any{subject.OrganizationID}, args...)...).Scan(&out).Error
	if err != nil {
		return nil, fmt.Errorf("listing workspaces: %w", err)
	}
	return out, nil
}

// Get returns workspace id of the subject's organization, if the subject may see it.
func (s *Service) Get(ctx context.Context, id string) (View, error) {
	subject, err := authz.Require(ctx, authz.PermOrgRead)
	if err != nil {
		return View{}, err
	}
	hide, args, err := s.hidden(ctx, subject)
	if err != nil {
		return View{}, err
	}
	var out []View
	if err := db.Conn(ctx, s.db).Raw(viewQuery+` WHERE w.organization_id = ? AND w.id = ?`+hide, append([]any{subject.OrganizationID, id}, args...)...).Scan(&out).Error; err != nil {
		return View{}, fmt.Errorf("reading workspace: %w", err)
	}
	if len(out) == 0 {
		return View{}, fmt.Errorf("workspace %s: %w", id, db.Translate(gorm.ErrRecordNotFound))
	}
	return out[0], nil
}

// Names maps those of ids that are workspaces the subject may see to their names
// (others are left out), for pages that show what an id is (the audit history).
func (s *Service) Names(ctx context.Context, ids []string) (map[string]string, error) {
	subject, err := authz.Require(ctx, authz.PermOrgRead)
	if err != nil {
		return nil, err
	}
	out := map[string]string{}
	if len(ids) == 0 {
		return out, nil
	}
	hide, args, err := s.hidden(ctx, subject)
	if err != nil {
		return nil, err
	}
	var rows []View
	err = db.Conn(ctx, s.db).Raw(viewQuery+` WHERE w.organization_id = ? AND w.id IN ?`+hide,
		append([]any{subject.OrganizationID, ids}, args...)...).Scan(&rows).Error
	if err != nil {
		return nil, fmt.Errorf("naming workspaces: %w", err)
	}
	for _, w := range rows {
		out[w.ID] = w.Name
	}
	return out, nil
}
