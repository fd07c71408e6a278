package environment

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strings"

	"gantry/models/audit"
	"gantry/models/authz"
	"gantry/models/db"
	"gantry/models/errs"
)

// Visible reports whether a member with role, holding an explicit grant on env or
// not, may see env's workspaces, runs and everything under them (DESIGN §4): a
// restricted environment is visible to admins and owners (who manage grants), to
// auditors (who read everything and never act), and to members with a grant; to every
// other member it does not exist, exactly as another tenant's objects do not.
func Visible(env Environment, role authz.Role, granted bool) bool {
	return !env.Restricted || granted || role.AtLeast(authz.RoleAdmin) || role == authz.RoleAuditor
}

// NeedsGrant reports whether role must hold a grant to use a restricted environment.
func NeedsGrant(role authz.Role) bool { return !role.AtLeast(authz.RoleAdmin) }

// OwnedBy reports whether the member userID, in groups, is a named owner of env: listed
// by id, or a member of one of its owner groups.
func (e Environment) OwnedBy(userID string, groups []string) bool {
	if slices.Contains(e.Owners, userID) {
		return true
	}
	for _, g := range groups {
		if slices.Contains(e.OwnerGroups, g) {
			return true
		}
	}
	return false
}

// Lookup returns environment id of organization orgID with its named owners, for other
// aggregates' services (runs): it checks no permission, they authorize their own
// subject. It reads in the transaction carried by ctx, if any, in one round trip (it is
// on the path of every decision and apply).
func (s *Directory) Lookup(ctx context.Context, orgID, id string) (Environment, error) {
	var row struct {
		Environment
		OwnersJSON      string
		OwnerGroupsJSON string
	}
	err := db.Conn(ctx, s.db).Raw(`SELECT e.*,
		    coalesce((SELECT json_agg(user_id ORDER BY user_id) FROM environment_owners WHERE environment_id = e.id), '[]')::text AS owners_json,
		    coalesce((SELECT json_agg(group_name ORDER BY group_name) FROM environment_owner_groups WHERE environment_id = e.id), '[]')::text AS owner_groups_json
		  FROM environments e WHERE e.organization_id = ? AND e.id = ?`, orgID, id).Scan(&row).Error
	if err != nil {
		return Environment{}, fmt.Errorf("reading environment %s: %w", id, db.Translate(err))
	}
	if row.ID == "" {
		return Environment{}, fmt.Errorf("environment %s: %w", id, errs.ErrNotFound)
	}
	env := row.Environment
	if err := json.Unmarshal([]byte(row.OwnersJSON), &env.Owners); err != nil {
		return Environment{}, fmt.Errorf("reading environment owners: %w", err)
	}
	if err := json.Unmarshal([]byte(row.OwnerGroupsJSON), &env.OwnerGroups); err != nil {
		return Environment{}, fmt.Errorf("reading environment owner groups: %w", err)
	}
	return env, nil
}

func (s *Directory) withOwners(ctx context.Context, env Environment) (Environment, error) {
	conn := db.Conn(ctx, s.db)
	if err := conn.Model(&Owner{}).Where("environment_id = ?", env.ID).Order("user_id").Pluck("user_id", &env.Owners).Error; err != nil {
		return Environment{}, fmt.Errorf("reading environment owners: %w", err)
	}
	if err := conn.Model(&OwnerGroup{}).Where("environment_id = ?", env.ID).Order("group_name").Pluck("group_name", &env.OwnerGroups).Error; err != nil {
		return Environment{}, fmt.Errorf("reading environment owner groups: %w", err)
	}
	return env, nil
}

// HasGrant reports whether user userID holds an explicit grant on environment envID.
func (s *Directory) HasGrant(ctx context.Context, envID, userID string) (bool, error) {
	var n int64
	if err := db.Conn(ctx, s.db).Model(&Grant{}).Where("environment_id = ? AND user_id = ?", envID, userID).Count(&n).Error; err != nil {
		return false, fmt.Errorf("checking grants: %w", err)
	}
	return n > 0, nil
}

// Grantees lists the users holding a grant on environment envID (run.Environments:
// who may decide its waiting runs). It checks no permission.
func (s *Directory) Grantees(ctx context.Context, envID string) ([]string, error) {
	var ids []string
	if err := db.Conn(ctx, s.db).Model(&Grant{}).Where("environment_id = ?", envID).Order("user_id").Pluck("user_id", &ids).Error; err != nil {
		return nil, fmt.Errorf("listing grants: %w", err)
	}
	return ids, nil
}

// CheckVisible answers ErrNotFound unless environment id is one of subject's
// organization's and subject may see it (Visible). Other aggregates whose objects
// live in an environment ask it before anything else, so that a hidden environment
// is not found rather than forbidden.
func (s *Directory) CheckVisible(ctx context.Context, subject authz.Subject, id string) error {
	env, err := s.get(ctx, subject.OrganizationID, id, false)
	if err != nil {
		return err
	}
	granted := false
	if env.Restricted && NeedsGrant(subject.Role) {
		if granted, err = s.HasGrant(ctx, env.ID, subject.UserID); err != nil {
			return err
		}
	}
	if !Visible(env, subject.Role, granted) {
		return fmt.Errorf("environment %s: %w", id, errs.ErrNotFound)
	}
	return nil
}

// refusal is what someone refused permission to act on environment id is answered:
// ErrNotFound when they may not even see it (another organization's, an id of none,
// or restricted without a grant), else refused. Cannot see wins over cannot act
// (DESIGN §4): a 403 for a hidden environment would say that it exists.
func (s *Service) refusal(ctx context.Context, id string, refused error) error {
	subject, ok := authz.SubjectFrom(ctx)
	if !ok || subject.OrganizationID == "" || !errors.Is(refused, errs.ErrForbidden) {
		return refused
	}
	if err := s.CheckVisible(ctx, subject, id); err != nil {
		return err
	}
	return refused
}

// HiddenFrom lists the environments of subject's organization that subject may not
// see (restricted, without a grant; see Visible), so list queries can leave out what
// lives in them.
func (s *Directory) HiddenFrom(ctx context.Context, subject authz.Subject) ([]string, error) {
	if !NeedsGrant(subject.Role) || subject.Role == authz.RoleAuditor {
		return nil, nil
	}
	var ids []string
	err := db.Conn(ctx, s.db).Model(&Environment{}).
		Where("organization_id = ? AND restricted AND id NOT IN (SELECT environment_id FROM environment_grants WHERE user_id = ?)",
			subject.OrganizationID, subject.UserID).Order("id").Pluck("id", &ids).Error
	if err != nil {
		return nil, fmt.Errorf("listing restricted environments: %w", err)
	}
	return ids, nil
}

// Owner names a member as an owner of an environment (a decider when the approval
// matrix names the environment's owners).
type Owner struct {
	OrganizationID string
	EnvironmentID  string `gorm:"primaryKey"`
	UserID         string `gorm:"primaryKey"`
}

// TableName: gorm would say "owners".
func (Owner) TableName() string { return "environment_owners" }

// OwnerGroup names a group (from the ID token's groups claim) whose members own an
// environment.
type OwnerGroup struct {
	OrganizationID string
	EnvironmentID  string `gorm:"primaryKey"`
	GroupName      string `gorm:"primaryKey"`
}

// TableName: gorm would say "owner_groups".
func (OwnerGroup) TableName() string { return "environment_owner_groups" }

// groupPattern is what a group name may look like: the characters identity providers
// use for group names and paths (Keycloak's "/platform/leads", Entra's object ids).
var groupPattern = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9 ._:/@-]{0,127}$`)

// RestrictedGrants lists the subject's organization's restricted environments and, per
// member, the ones they hold a grant on (the members page; environments.manage).
func (s *Service) RestrictedGrants(ctx context.Context) ([]Environment, map[string][]string, error) {
	subject, err := authz.Require(ctx, authz.PermEnvironmentsManage)
	if err != nil {
		return nil, nil, err
	}
	var envs []Environment
	if err := db.Conn(ctx, s.db).Where("organization_id = ? AND restricted", subject.OrganizationID).Order("name").Find(&envs).Error; err != nil {
		return nil, nil, fmt.Errorf("listing restricted environments: %w", err)
	}
	var grants []Grant
	if err := db.Conn(ctx, s.db).Where("organization_id = ?", subject.OrganizationID).Order("environment_id").Find(&grants).Error; err != nil {
		return nil, nil, fmt.Errorf("listing grants: %w", err)
	}
	byMember := map[string][]string{}
	for _, g := range grants {
		byMember[g.UserID] = append(byMember[g.UserID], g.EnvironmentID)
	}
	return envs, byMember, nil
}

// SetMemberGrants makes envIDs the restricted environments member userID holds grants
// on (environments.manage), auditing each grant given or taken. An approval the member
// gave in an environment they lose is refused before its apply (the worker re-checks).
func (s *Service) SetMemberGrants(ctx context.Context, userID string, envIDs []string) error {
	subject, err := authz.Require(ctx, authz.PermEnvironmentsManage)
	if err != nil {
		return err
	}
	want := normaliseIDs(envIDs)
	return db.Tx(ctx, s.db, func(ctx context.Context) error {
		conn := db.Conn(ctx, s.db)
		var member int64
		if err := conn.Table("memberships").Where("organization_id = ? AND user_id = ?", subject.OrganizationID, userID).Count(&member).Error; err != nil {
			return fmt.Errorf("checking member: %w", err)
		}
		if member == 0 {
			return fmt.Errorf("member %s: %w", userID, errs.ErrNotFound)
		}
		var restricted []string
		if err := conn.Model(&Environment{}).Where("organization_id = ? AND restricted", subject.OrganizationID).Pluck("id", &restricted).Error; err != nil {
			return fmt.Errorf("listing restricted environments: %w", err)
		}
		for _, id := range want {
			if !slices.Contains(restricted, id) {
				v := &errs.Validation{}
				v.Add("grants", "Grant only this organization's restricted environments.")
				return v
			}
		}
		var have []string
		if err := conn.Model(&Grant{}).Where("organization_id = ? AND user_id = ?", subject.OrganizationID, userID).Pluck("environment_id", &have).Error; err != nil {
			return fmt.Errorf("reading grants: %w", err)
		}
		for _, id := range restricted {
			switch had, wants := slices.Contains(have, id), slices.Contains(want, id); {
			case wants && !had:
				if err := conn.Create(&Grant{OrganizationID: subject.OrganizationID, EnvironmentID: id, UserID: userID}).Error; err != nil {
					return fmt.Errorf("granting: %w", db.Translate(err))
				}
				if err := s.audit.Record(ctx, audit.Entry{Action: "environment.grant_added", TargetType: "environment", TargetID: id,
					Data: map[string]any{"user_id": userID}}); err != nil {
					return err
				}
			case had && !wants:
				if err := conn.Where("environment_id = ? AND user_id = ?", id, userID).Delete(&Grant{}).Error; err != nil {
					return fmt.Errorf("revoking grant: %w", err)
				}
				if err := s.audit.Record(ctx, audit.Entry{Action: "environment.grant_removed", TargetType: "environment", TargetID: id,
					Data: map[string]any{"user_id": userID}}); err != nil {
					return err
				}
			}
		}
		return s.decidersMoved(ctx, subject.OrganizationID, "", userID)
	})
}

// replaceOwners stores the named owners of env and returns env carrying them.
func (s *Service) replaceOwners(ctx context.Context, env Environment, users, groups []string) (Environment, error) {
	conn := db.Conn(ctx, s.db)
	if err := conn.Where("environment_id = ?", env.ID).Delete(&Owner{}).Error; err != nil {
		return Environment{}, fmt.Errorf("clearing owners: %w", err)
	}
	if err := conn.Where("environment_id = ?", env.ID).Delete(&OwnerGroup{}).Error; err != nil {
		return Environment{}, fmt.Errorf("clearing owner groups: %w", err)
	}
	env.Owners, env.OwnerGroups = normaliseIDs(users), normaliseIDs(groups)
	for _, uid := range env.Owners {
		if err := conn.Create(&Owner{OrganizationID: env.OrganizationID, EnvironmentID: env.ID, UserID: uid}).Error; err != nil {
			return Environment{}, fmt.Errorf("naming owner %s: %w", uid, db.Translate(err))
		}
	}
	for _, g := range env.OwnerGroups {
		if err := conn.Create(&OwnerGroup{OrganizationID: env.OrganizationID, EnvironmentID: env.ID, GroupName: g}).Error; err != nil {
			return Environment{}, fmt.Errorf("naming owner group %s: %w", g, db.Translate(err))
		}
	}
	return env, nil
}

func (s *Service) replaceGrants(ctx context.Context, env Environment, userIDs []string) ([]string, error) {
	conn := db.Conn(ctx, s.db)
	if err := conn.Where("organization_id = ? AND environment_id = ?", env.OrganizationID, env.ID).Delete(&Grant{}).Error; err != nil {
		return nil, fmt.Errorf("clearing grants: %w", err)
	}
	ids := normaliseIDs(userIDs)
	for _, uid := range ids {
		if err := conn.Create(&Grant{OrganizationID: env.OrganizationID, EnvironmentID: env.ID, UserID: uid}).Error; err != nil {
			return nil, fmt.Errorf("granting %s: %w", uid, db.Translate(err))
		}
	}
	return ids, nil
}

// normaliseIDs sorts and de-duplicates ids and drops empty ones.
func normaliseIDs(ids []string) []string {
	out := make([]string, 0, len(ids))
	for _, id := range ids {
		if id = strings.TrimSpace(id); id != "" {
			out = append(out, id)
		}
	}
	slices.Sort(out)
	return slices.Compact(out)
}
