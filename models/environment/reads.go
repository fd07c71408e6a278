package environment

import (
	"context"
	"fmt"
	"slices"

	"gorm.io/gorm"
	"gorm.io/gorm/clause"

	"gantry/models/authz"
	"gantry/models/db"
)

// Directory reads environments for the other aggregates (runs, policies, windows,
// workspaces): an environment with its owners, grants, visibility, promotion order and
// drift schedules. It checks no permission and changes nothing, so it needs no one to
// tell; the run lifecycle is built on it, and the Service that changes environments
// (and tells the run lifecycle) after it.
type Directory struct{ db *gorm.DB }

// NewDirectory returns the environments' reads.
func NewDirectory(gdb *gorm.DB) *Directory { return &Directory{db: gdb} }

// get reads environment id of organization orgID, without its owners; forUpdate locks
// its row until the transaction in ctx ends.
func (s *Directory) get(ctx context.Context, orgID, id string, forUpdate bool) (Environment, error) {
	q := db.Conn(ctx, s.db).Where("organization_id = ? AND id = ?", orgID, id)
	if forUpdate {
		q = q.Clauses(clause.Locking{Strength: "UPDATE"})
	}
	var env Environment
	if err := q.Take(&env).Error; err != nil {
		return Environment{}, fmt.Errorf("reading environment %s: %w", id, db.Translate(err))
	}
	return env, nil
}

// Reads for the auditors' pages: environments by name for the audit history, and all
// of an organization's with their static credentials for the governance report.

// AllOf lists organization orgID's environments by tier, then name, with the static
// credentials those that hold one hold, for a service that has checked its own
// permission (the governance report, audit.read); it checks none itself.
func (s *Service) AllOf(ctx context.Context, orgID string) ([]Environment, map[string]Standing, error) {
	var envs []Environment
	err := db.Conn(ctx, s.db).Where("organization_id = ?", orgID).
		Order("CASE tier WHEN 'development' THEN 1 WHEN 'staging' THEN 2 ELSE 3 END, name").Find(&envs).Error
	if err != nil {
		return nil, nil, fmt.Errorf("listing environments: %w", err)
	}
	creds, err := standingOf(ctx, s.db, orgID, "")
	if err != nil {
		return nil, nil, err
	}
	return envs, creds, nil
}

// Names maps the ids of the environments the subject may see to their names, for
// pages that show what an id is (the audit history). Any member may read it.
func (s *Service) Names(ctx context.Context) (map[string]string, error) {
	subject, err := authz.Require(ctx, authz.PermOrgRead)
	if err != nil {
		return nil, err
	}
	hidden, err := s.HiddenFrom(ctx, subject)
	if err != nil {
		return nil, err
	}
	var envs []Environment
	if err := db.Conn(ctx, s.db).Where("organization_id = ?", subject.OrganizationID).Find(&envs).Error; err != nil {
		return nil, fmt.Errorf("listing environments: %w", err)
	}
	out := make(map[string]string, len(envs))
	for _, e := range envs {
		if !slices.Contains(hidden, e.ID) {
			out[e.ID] = e.Name
		}
	}
	return out, nil
}

// NextInPromotion lists the environments of orgID a workspace in environment id is
// promoted to: those of the smallest promotion order above id's (none for the last).
func (s *Directory) NextInPromotion(ctx context.Context, orgID, id string) ([]Environment, error) {
	var envs []Environment
	err := db.Conn(ctx, s.db).Where(`organization_id = ? AND promotion_order = (SELECT min(n.promotion_order) FROM environments n
		WHERE n.organization_id = ? AND n.promotion_order > (SELECT e.promotion_order FROM environments e WHERE e.organization_id = ? AND e.id = ?))`,
		orgID, orgID, orgID, id).Order("name").Find(&envs).Error
	if err != nil {
		return nil, fmt.Errorf("listing the next environments: %w", err)
	}
	return envs, nil
}

// DriftSchedules lists every environment, of every organization, whose workspaces are
// checked for drift on a schedule: the scheduler's read (the system acts; no subject).
func (s *Directory) DriftSchedules(ctx context.Context) ([]DriftSchedule, error) {
	var rows []Environment
	if err := db.Conn(ctx, s.db).Where("drift_interval_minutes > 0").Order("organization_id, id").Find(&rows).Error; err != nil {
		return nil, fmt.Errorf("listing drift schedules: %w", err)
	}
	out := make([]DriftSchedule, len(rows))
	for i, e := range rows {
		out[i] = DriftSchedule{OrganizationID: e.OrganizationID, EnvironmentID: e.ID, Interval: e.DriftInterval()}
	}
	return out, nil
}

// AllNames maps every environment, of every organization, to its name: the operators'
// metrics label their counts with it (the system reads; no subject).
func (s *Directory) AllNames(ctx context.Context) (map[string]string, error) {
	var rows []struct{ ID, Name string }
	if err := db.Conn(ctx, s.db).Table("environments").Select("id, name").Scan(&rows).Error; err != nil {
		return nil, fmt.Errorf("listing environment names: %w", err)
	}
	out := make(map[string]string, len(rows))
	for _, r := range rows {
		out[r.ID] = r.Name
	}
	return out, nil
}

// Target is the target of environment envID of organization orgID (the sandbox cloud
// for one that names none): the runner's read when it hands a phase its credentials (the
// system acts; no subject). Another organization's environment is not found.
func (s *Directory) Target(ctx context.Context, orgID, envID string) (Target, error) {
	env, err := s.get(ctx, orgID, envID, false)
	if err != nil {
		return Target{}, err
	}
	return env.Target.OrSandbox(), nil
}
