package environment

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"strings"

	"gorm.io/gorm"

	"gantry/models/audit"
	"gantry/models/authz"
	"gantry/models/db"
	"gantry/models/errs"
)

// nameIndex is the unique index that keeps names unique per organization.
const nameIndex = "environments_org_name_idx"

// Service manages environments. Every method checks the subject's permission first and
// scopes every query to the subject's organization, so another tenant's environment is
// ErrNotFound.
type Service struct {
	*Directory
	db       *gorm.DB
	audit    *audit.Log
	deciders Deciders
}

// NewService returns the environment service, which tells d of every change that
// moves who may decide waiting runs. d is nil only where no run can exist (a test of
// environments alone, the demo's seed).
func NewService(gdb *gorm.DB, log *audit.Log, d Deciders) *Service {
	return &Service{Directory: NewDirectory(gdb), db: gdb, audit: log, deciders: d}
}

// Deciders is what an environment change tells the run lifecycle (run.Eligibility), in its
// transaction: who may decide waiting runs depends on the environment's named owners,
// restriction and grants.
type Deciders interface {
	RefreshDecidersIn(ctx context.Context, orgID, envID string) error
	RefreshDecidersOf(ctx context.Context, orgID, userID string) error
}

// decidersMoved tells the run lifecycle, if there is one (see NewService).
func (s *Service) decidersMoved(ctx context.Context, orgID, envID, userID string) error {
	switch {
	case s.deciders == nil:
		return nil
	case userID != "":
		return s.deciders.RefreshDecidersOf(ctx, orgID, userID)
	}
	return s.deciders.RefreshDecidersIn(ctx, orgID, envID)
}

// List returns the environments of the subject's organization by tier, then name.
func (s *Service) List(ctx context.Context) ([]Environment, error) {
	subject, err := authz.Require(ctx, authz.PermEnvironmentsManage)
	if err != nil {
		return nil, err
	}
	var envs []Environment
	err = db.Conn(ctx, s.db).Where("organization_id = ?", subject.OrganizationID).
		Order("CASE tier WHEN 'development' THEN 1 WHEN 'staging' THEN 2 ELSE 3 END, name").
		Find(&envs).Error
	if err != nil {
		return nil, fmt.Errorf("listing environments: %w", err)
	}
	return envs, nil
}

// Get returns environment id of the subject's organization (environments.manage);
// an environment the subject may not see is not found, permission or not.
func (s *Service) Get(ctx context.Context, id string) (Environment, error) {
	subject, err := authz.Require(ctx, authz.PermEnvironmentsManage)
	if err != nil {
		return Environment{}, s.refusal(ctx, id, err)
	}
	return s.Lookup(ctx, subject.OrganizationID, id)
}

// Grants returns the user ids granted use of environment id.
func (s *Service) Grants(ctx context.Context, id string) ([]string, error) {
	env, err := s.Get(ctx, id)
	if err != nil {
		return nil, err
	}
	return s.grants(ctx, env)
}

func (s *Service) grants(ctx context.Context, env Environment) ([]string, error) {
	var ids []string
	err := db.Conn(ctx, s.db).Model(&Grant{}).
		Where("organization_id = ? AND environment_id = ?", env.OrganizationID, env.ID).
		Order("user_id").Pluck("user_id", &ids).Error
	if err != nil {
		return nil, fmt.Errorf("reading grants: %w", err)
	}
	return ids, nil
}

// Create adds an environment. Bad input is an *errs.Validation and nothing is written.
func (s *Service) Create(ctx context.Context, in Input) (Environment, error) {
	subject, err := authz.Require(ctx, authz.PermEnvironmentsManage)
	if err != nil {
		return Environment{}, err
	}
	in.Name = strings.TrimSpace(in.Name)
	var env Environment
	err = db.Tx(ctx, s.db, func(ctx context.Context) error {
		if err := s.validate(ctx, subject.OrganizationID, "", in); err != nil {
			return err
		}
		env = Environment{
			ID:               db.NewID("env"),
			OrganizationID:   subject.OrganizationID,
			Name:             in.Name,
			Tier:             Tier(in.Tier),
			RequiresApproval: Tier(in.Tier).DefaultRequiresApproval(),
			Restricted:       in.Restricted,
			Executor:         executorOrDefault(in.Executor),
			// Written explicitly: gorm inserts a zero int as 0, not the column default.
			DecisionWindowHours: windowOrDefault(in.DecisionWindowHours),
			PromotionOrder:      cmp.Or(in.PromotionOrder, Tier(in.Tier).DefaultPromotionOrder()),
			// Written explicitly: the column's default is off whatever the tier.
			DriftIntervalMinutes: Tier(in.Tier).DefaultDriftIntervalMinutes(),
			Target:               Target{Kind: TargetSandbox},
		}
		if in.Target != nil {
			env.Target = in.Target.Normal()
		}
		if in.DriftIntervalMinutes != nil {
			env.DriftIntervalMinutes = *in.DriftIntervalMinutes
		}
		if in.RequiresApproval != nil {
			env.RequiresApproval = *in.RequiresApproval
		}
		if err := db.Conn(ctx, s.db).Create(&env).Error; err != nil {
			return s.nameConflict(err, in.Name)
		}
		grants, err := s.replaceGrants(ctx, env, in.Grants)
		if err != nil {
			return err
		}
		if env, err = s.replaceOwners(ctx, env, deref(in.Owners), deref(in.OwnerGroups)); err != nil {
			return err
		}
		return s.audit.Record(ctx, audit.Entry{
			Action: "environment.created", TargetType: "environment", TargetID: env.ID,
			Data: map[string]any{"after": snapshot(env, grants)},
		})
	})
	if err != nil {
		return Environment{}, err
	}
	return env, nil
}

// Update changes environment id under a row lock and audits the before and after.
// An update that changes nothing writes nothing, not even an audit event. An
// environment the subject may not see is not found, permission or not.
func (s *Service) Update(ctx context.Context, id string, in Input) (Environment, error) {
	subject, err := authz.Require(ctx, authz.PermEnvironmentsManage)
	if err != nil {
		return Environment{}, s.refusal(ctx, id, err)
	}
	in.Name = strings.TrimSpace(in.Name)
	var env Environment
	err = db.Tx(ctx, s.db, func(ctx context.Context) error {
		before, err := s.get(ctx, subject.OrganizationID, id, true)
		if err != nil {
			return err
		}
		if before, err = s.withOwners(ctx, before); err != nil {
			return err
		}
		if err := s.validate(ctx, subject.OrganizationID, id, in); err != nil {
			return err
		}
		beforeGrants, err := s.grants(ctx, before)
		if err != nil {
			return err
		}
		env = before
		env.Name = in.Name
		env.Tier = Tier(in.Tier)
		if in.RequiresApproval != nil {
			env.RequiresApproval = *in.RequiresApproval
		}
		env.Restricted = in.Restricted
		if in.Executor != "" {
			env.Executor = in.Executor
		}
		if in.DecisionWindowHours != 0 {
			env.DecisionWindowHours = in.DecisionWindowHours
		}
		if in.PromotionOrder != 0 {
			env.PromotionOrder = in.PromotionOrder
		}
		if in.DriftIntervalMinutes != nil {
			env.DriftIntervalMinutes = *in.DriftIntervalMinutes
		}
		if in.Target != nil {
			env.Target = in.Target.Normal()
		}
		afterGrants := normaliseIDs(in.Grants)
		if in.Owners != nil {
			env.Owners = normaliseIDs(*in.Owners)
		}
		if in.OwnerGroups != nil {
			env.OwnerGroups = normaliseIDs(*in.OwnerGroups)
		}
		if sameSettings(env, before) && slices.Equal(beforeGrants, afterGrants) {
			return nil
		}
		// Explicit column map: gorm's Updates(struct) would skip false booleans.
		err = db.Conn(ctx, s.db).Model(&Environment{}).
			Where("organization_id = ? AND id = ?", env.OrganizationID, env.ID).
			Updates(map[string]any{
				"name": env.Name, "tier": env.Tier, "requires_approval": env.RequiresApproval,
				"restricted": env.Restricted, "executor": env.Executor, "decision_window_hours": env.DecisionWindowHours,
				"promotion_order": env.PromotionOrder, "drift_interval_minutes": env.DriftIntervalMinutes, "target": env.Target,
				"updated_at": gorm.Expr("now()"),
			}).Error
		if err != nil {
			return s.nameConflict(err, in.Name)
		}
		if _, err := s.replaceGrants(ctx, env, afterGrants); err != nil {
			return err
		}
		if env, err = s.replaceOwners(ctx, env, env.Owners, env.OwnerGroups); err != nil {
			return err
		}
		if err := s.audit.Record(ctx, audit.Entry{
			Action: "environment.updated", TargetType: "environment", TargetID: env.ID,
			Data: map[string]any{"before": snapshot(before, beforeGrants), "after": snapshot(env, afterGrants)},
		}); err != nil {
			return err
		}
		return s.decidersMoved(ctx, env.OrganizationID, env.ID, "")
	})
	if err != nil {
		return Environment{}, err
	}
	return s.Lookup(ctx, subject.OrganizationID, id)
}

// sameSettings reports whether an edit changes nothing of a and b.
func sameSettings(a, b Environment) bool {
	return a.Name == b.Name && a.Tier == b.Tier && a.RequiresApproval == b.RequiresApproval && a.Restricted == b.Restricted &&
		a.Executor == b.Executor && a.DecisionWindowHours == b.DecisionWindowHours && a.PromotionOrder == b.PromotionOrder &&
		a.DriftIntervalMinutes == b.DriftIntervalMinutes && a.Target.Same(b.Target) &&
		slices.Equal(a.Owners, b.Owners) && slices.Equal(a.OwnerGroups, b.OwnerGroups)
}

// validate runs the input's own checks, then those that need the database: a name
// already taken in the organization, and grants naming people who are not members.
func (s *Service) validate(ctx context.Context, orgID, selfID string, in Input) error {
	v := in.Validate()
	if _, bad := v.Fields["name"]; !bad {
		var taken int64
		q := db.Conn(ctx, s.db).Model(&Environment{}).
			Where("organization_id = ? AND lower(name) = lower(?)", orgID, in.Name)
		if selfID != "" {
			q = q.Where("id <> ?", selfID)
		}
		if err := q.Count(&taken).Error; err != nil {
			return fmt.Errorf("checking name: %w", err)
		}
		if taken > 0 {
			v.Add("name", fmt.Sprintf("An environment named %q already exists.", in.Name))
		}
	}
	for field, ids := range map[string][]string{"grants": normaliseIDs(in.Grants), "owners": normaliseIDs(deref(in.Owners))} {
		if len(ids) == 0 {
			continue
		}
		var members int64
		err := db.Conn(ctx, s.db).Table("memberships").
			Where("organization_id = ? AND user_id IN ?", orgID, ids).Count(&members).Error
		if err != nil {
			return fmt.Errorf("checking %s: %w", field, err)
		}
		if int(members) != len(ids) {
			v.Add(field, "Name only members of this organization.")
		}
	}
	return v.Err()
}

// nameConflict turns a unique-index race (two admins creating the same name at once)
// into the same field message the pre-check gives.
func (s *Service) nameConflict(err error, name string) error {
	if db.IsUniqueViolation(err, nameIndex) {
		v := &errs.Validation{}
		v.Add("name", fmt.Sprintf("An environment named %q already exists.", name))
		return v
	}
	return fmt.Errorf("saving environment: %w", db.Translate(err))
}

// snapshot is the audited form of an environment.
func snapshot(env Environment, grants []string) map[string]any {
	if grants == nil {
		grants = []string{}
	}
	return map[string]any{
		"name": env.Name, "tier": env.Tier, "requires_approval": env.RequiresApproval,
		"restricted": env.Restricted, "grants": grants, "executor": env.Executor,
		"decision_window_hours": env.DecisionWindowHours, "promotion_order": env.PromotionOrder,
		"drift_interval_minutes": env.DriftIntervalMinutes, "owners": nonNil(env.Owners), "owner_groups": nonNil(env.OwnerGroups),
		"target": env.Target.Audited(),
	}
}

func nonNil(xs []string) []string {
	if xs == nil {
		return []string{}
	}
	return xs
}

func windowOrDefault(hours int) int {
	if hours == 0 {
		return DefaultDecisionWindowHours
	}
	return hours
}

func executorOrDefault(e string) string {
	if e == "" {
		return "default"
	}
	return e
}

// Choices returns the environments the subject may request runs in: every
// environment of the organization except restricted ones without a grant (admins and
// owners manage grants and are not restricted).
func (s *Service) Choices(ctx context.Context) ([]Environment, error) {
	subject, err := authz.Require(ctx, authz.PermProvisioningPlan)
	if err != nil {
		return nil, err
	}
	q := db.Conn(ctx, s.db).Where("organization_id = ?", subject.OrganizationID)
	if !subject.Role.AtLeast(authz.RoleAdmin) {
		q = q.Where("NOT restricted OR id IN (SELECT environment_id FROM environment_grants WHERE user_id = ?)", subject.UserID)
	}
	var envs []Environment
	if err := q.Order("CASE tier WHEN 'development' THEN 1 WHEN 'staging' THEN 2 ELSE 3 END, name").Find(&envs).Error; err != nil {
		return nil, fmt.Errorf("listing environments: %w", err)
	}
	return envs, nil
}
