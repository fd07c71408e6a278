package workspace

import (
	"context"
	"fmt"
	"strconv"

	"gorm.io/gorm"

	"gantry/models/authz"
	"gantry/models/db"
	"gantry/models/listing"
)

// View is a workspace with its environment's name.
type View struct {
	Workspace
	EnvironmentName string
	// EnvironmentOrder is its environment's place in the organization's promotion order
	// (by tier unless an admin set it): the order environments are listed in.
	EnvironmentOrder int
	// EnvironmentDriftMinutes is how often its environment checks drift (0: never).
	EnvironmentDriftMinutes int
}

// Access says which environments a member may not see (environment.Directory): the
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

const (
	viewColumns = `w.*, e.name AS environment_name, e.promotion_order AS environment_order, e.drift_interval_minutes AS environment_drift_minutes`
	viewJoin    = `JOIN environments e ON e.id = w.environment_id AND e.organization_id = w.organization_id`
	viewQuery   = `SELECT ` + viewColumns + ` FROM workspaces w ` + viewJoin
)

// hidden is the SQL that leaves out the workspaces of environments subject may not see.
func (s *Service) hidden(ctx context.Context, subject authz.Subject) (string, []any, error) {
	ids, err := s.access.HiddenFrom(ctx, subject)
	if err != nil || len(ids) == 0 {
		return "", nil, err
	}
	return " AND w.environment_id NOT IN ?", []any{ids}, nil
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

// Views returns those of ids that are workspaces the subject may see, by id (others
// are left out): one read for a page of runs.
func (s *Service) Views(ctx context.Context, ids []string) (map[string]View, error) {
	subject, err := authz.Require(ctx, authz.PermOrgRead)
	if err != nil {
		return nil, err
	}
	out := map[string]View{}
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
		return nil, fmt.Errorf("reading workspaces: %w", err)
	}
	for _, w := range rows {
		out[w.ID] = w
	}
	return out, nil
}

// Names maps those of ids that are workspaces the subject may see to their names
// (others are left out), for pages that show what an id is (the audit history).
func (s *Service) Names(ctx context.Context, ids []string) (map[string]string, error) {
	views, err := s.Views(ctx, ids)
	if err != nil {
		return nil, err
	}
	out := make(map[string]string, len(views))
	for id, w := range views {
		out[id] = w.Name
	}
	return out, nil
}

// Named returns the workspaces the subject may see whose name is name, archived ones
// included, in the environments' order (a name is unique within an environment): the
// audit history's filter finds a workspace people name through it.
func (s *Service) Named(ctx context.Context, name string) ([]View, error) {
	subject, err := authz.Require(ctx, authz.PermOrgRead)
	if err != nil {
		return nil, err
	}
	hide, args, err := s.hidden(ctx, subject)
	if err != nil {
		return nil, err
	}
	var out []View
	if err := db.Conn(ctx, s.db).Raw(viewQuery+` WHERE w.organization_id = ? AND w.name = ?`+hide+` ORDER BY e.promotion_order, e.name, w.id`,
		append([]any{subject.OrganizationID, name}, args...)...).Scan(&out).Error; err != nil {
		return nil, fmt.Errorf("finding workspaces named %q: %w", name, err)
	}
	return out, nil
}

// Query narrows the workspace list: a text in the name, an environment, a template,
// only those applying now; and the page.
type Query struct {
	Text          string
	EnvironmentID string
	Template      string
	Applying      bool
	// Archived lists the archived workspaces instead of the others (archive.go).
	Archived bool
	Page     listing.Page
}

// Sort keys of the workspace list.
const (
	SortName        = "name"
	SortEnvironment = "environment"
	SortTemplate    = "template"
	SortActivity    = "activity"
)

// Orders are the workspace list's orders, each ending in the id; the first is the
// default. Name and activity walk an index of their own (workspaces_org_*_idx).
var Orders = []listing.Order[View]{
	{Key: SortName, Columns: []listing.Column[View]{
		{SQL: "w.name", Value: func(v View) string { return v.Name }},
		{SQL: "w.id", Value: func(v View) string { return v.ID }}}},
	{Key: SortEnvironment, Columns: []listing.Column[View]{
		{SQL: "e.promotion_order", Kind: listing.Int, Value: func(v View) string { return strconv.Itoa(v.EnvironmentOrder) }},
		{SQL: "e.name", Value: func(v View) string { return v.EnvironmentName }},
		{SQL: "w.name", Value: func(v View) string { return v.Name }},
		{SQL: "w.id", Value: func(v View) string { return v.ID }}}},
	{Key: SortTemplate, Columns: []listing.Column[View]{
		{SQL: "w.template_name", Value: func(v View) string { return v.TemplateName }},
		{SQL: "w.name", Value: func(v View) string { return v.Name }},
		{SQL: "w.id", Value: func(v View) string { return v.ID }}}},
	{Key: SortActivity, Columns: []listing.Column[View]{
		{SQL: "w.last_run_at", Kind: listing.Time, Value: func(v View) string { return listing.TimeValue(v.LastRunAt) }},
		{SQL: "w.id", Value: func(v View) string { return v.ID }}}},
}

// SortKeys are the keys of Orders.
func SortKeys() []string {
	keys := make([]string, len(Orders))
	for i, o := range Orders {
		keys[i] = o.Key
	}
	return keys
}

// Search returns one page of the organization's workspaces the subject may see that
// match q, and how many match in all.
func (s *Service) Search(ctx context.Context, q Query) (listing.Result[View], int64, error) {
	subject, err := authz.Require(ctx, authz.PermOrgRead)
	if err != nil {
		return listing.Result[View]{}, 0, err
	}
	hidden, err := s.access.HiddenFrom(ctx, subject)
	if err != nil {
		return listing.Result[View]{}, 0, err
	}
	filtered := func() *gorm.DB {
		tx := db.Conn(ctx, s.db).Table("workspaces w").Joins(viewJoin).Where("w.organization_id = ?", subject.OrganizationID)
		if len(hidden) > 0 {
			tx = tx.Where("w.environment_id NOT IN ?", hidden)
		}
		if q.Text != "" {
			tx = tx.Where(listing.Contains("w.name"), q.Text)
		}
		if q.EnvironmentID != "" {
			tx = tx.Where("w.environment_id = ?", q.EnvironmentID)
		}
		if q.Template != "" {
			tx = tx.Where("w.template_name = ?", q.Template)
		}
		if q.Applying {
			tx = tx.Where("w.active_run_id IS NOT NULL")
		}
		if q.Archived {
			tx = tx.Where("w.archived_at IS NOT NULL")
		} else {
			tx = tx.Where("w.archived_at IS NULL")
		}
		return tx
	}
	var total int64
	if err := filtered().Count(&total).Error; err != nil {
		return listing.Result[View]{}, 0, fmt.Errorf("counting workspaces: %w", err)
	}
	page, err := listing.Fetch(filtered().Select(viewColumns), Orders, q.Page)
	if err != nil {
		return listing.Result[View]{}, 0, fmt.Errorf("listing workspaces: %w", err)
	}
	return page, total, nil
}
