// Package policy keeps what the policy engine (package policies) needs from the
// database and what it leaves behind: each environment's enforcement modes, the
// organization's own versioned Rego, every evaluation with its bundle and result
// digests, and the overrides admins gave to soft-mandatory failures.
package policy

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"sort"
	"strings"
	"time"

	"gorm.io/gorm"

	"gantry/models/audit"
	"gantry/models/authz"
	"gantry/models/db"
	"gantry/models/errs"
	"gantry/policies"
)

// Store reads and writes policy configuration and evaluations.
type Store struct {
	db           *gorm.DB
	audit        *audit.Log
	environments Environments
}

// Environments says whether a member may see an environment (environment.Directory): the
// policy modes of an environment they may not see (another organization's, or
// restricted without a grant) do not exist for them either.
type Environments interface {
	CheckVisible(ctx context.Context, subject authz.Subject, id string) error
}

// NewStore returns the policy store.
func NewStore(gdb *gorm.DB, log *audit.Log, envs Environments) *Store {
	return &Store{db: gdb, audit: log, environments: envs}
}

// OrgPolicy is one version of an organization-managed policy.
type OrgPolicy struct {
	OrganizationID string
	Name           string
	Version        int
	Title          string
	Enforcement    string
	Rego           string
	Tests          string
	Digest         string
	Active         bool
	UploadedBy     *string
	UploadedByName string
	CreatedAt      time.Time
}

// TableName: gorm would say "org_policies" too; said for the reader.
func (OrgPolicy) TableName() string { return "org_policies" }

// active returns the newest active version of each of the org's policies.
func (s *Store) active(ctx context.Context, orgID string) ([]OrgPolicy, error) {
	var rows []OrgPolicy
	err := db.Conn(ctx, s.db).Raw(`SELECT DISTINCT ON (name) * FROM org_policies WHERE organization_id = ?
		ORDER BY name, version DESC`, orgID).Scan(&rows).Error
	if err != nil {
		return nil, fmt.Errorf("reading org policies: %w", err)
	}
	out := rows[:0]
	for _, p := range rows {
		if p.Active {
			out = append(out, p)
		}
	}
	return out, nil
}

// Bundle is the organization's policy bundle: the built-in rules plus the newest
// active version of each of its own policies.
func (s *Store) Bundle(ctx context.Context, orgID string) (*policies.Bundle, error) {
	rows, err := s.active(ctx, orgID)
	if err != nil {
		return nil, err
	}
	if len(rows) == 0 {
		return policies.Builtin()
	}
	org := make([]policies.OrgPolicy, len(rows))
	for i, p := range rows {
		org[i] = policies.OrgPolicy{Name: p.Name, Version: p.Version, Rego: p.Rego, Tests: p.Tests}
	}
	return policies.NewBundle(org)
}

// Modes returns the enforcement an environment sets per rule (rules not listed keep
// their default).
func (s *Store) Modes(ctx context.Context, environmentID string) (map[string]policies.Enforcement, error) {
	var rows []struct {
		RuleID      string
		Enforcement string
	}
	err := db.Conn(ctx, s.db).Table("environment_policy_modes").Select("rule_id, enforcement").
		Where("environment_id = ?", environmentID).Scan(&rows).Error
	if err != nil {
		return nil, fmt.Errorf("reading policy modes: %w", err)
	}
	out := make(map[string]policies.Enforcement, len(rows))
	for _, r := range rows {
		out[r.RuleID] = policies.Enforcement(r.Enforcement)
	}
	return out, nil
}

// RuleMode is one rule as an environment enforces it.
type RuleMode struct {
	Rule        policies.Rule
	Enforcement policies.Enforcement // in force in the environment
	Overridden  bool                 // differs from the rule's default
}

// EnvironmentModes lists every rule of the subject's organization with the mode the
// environment gives it.
func (s *Store) EnvironmentModes(ctx context.Context, environmentID string) ([]RuleMode, error) {
	subject, err := authz.Require(ctx, authz.PermOrgRead)
	if err != nil {
		return nil, err
	}
	if err := s.environments.CheckVisible(ctx, subject, environmentID); err != nil {
		return nil, err
	}
	b, err := s.Bundle(ctx, subject.OrganizationID)
	if err != nil {
		return nil, err
	}
	modes, err := s.Modes(ctx, environmentID)
	if err != nil {
		return nil, err
	}
	var out []RuleMode
	for _, r := range b.Rules() {
		m, ok := modes[r.ID]
		if !ok {
			m = r.Enforcement
		}
		out = append(out, RuleMode{Rule: r, Enforcement: m, Overridden: m != r.Enforcement})
	}
	return out, nil
}

// SetModes sets the enforcement of rules in an environment (admins). A mode equal to
// the rule's default removes the row, so a later change of the default applies.
// Unknown rules and modes are field errors ("mode.<rule>"); nothing is stored then. An
// environment the subject may not see is not found, permission or not (a 403 would
// say it exists).
func (s *Store) SetModes(ctx context.Context, environmentID string, modes map[string]string) error {
	subject, err := authz.Require(ctx, authz.PermPoliciesManage)
	if reader, ok := authz.SubjectFrom(ctx); ok && errors.Is(err, errs.ErrForbidden) {
		if verr := s.environments.CheckVisible(ctx, reader, environmentID); verr != nil {
			return verr
		}
	}
	if err != nil {
		return err
	}
	return db.Tx(ctx, s.db, func(ctx context.Context) error {
		if err := s.environments.CheckVisible(ctx, subject, environmentID); err != nil {
			return err
		}
		b, err := s.Bundle(ctx, subject.OrganizationID)
		if err != nil {
			return err
		}
		defaults := map[string]policies.Enforcement{}
		for _, r := range b.Rules() {
			defaults[r.ID] = r.Enforcement
		}
		v := &errs.Validation{}
		for id, m := range modes {
			if _, ok := defaults[id]; !ok {
				v.Add("mode."+id, "No rule has this id.")
			} else if !policies.Enforcement(m).Valid() {
				v.Add("mode."+id, "Choose advisory, soft mandatory or hard mandatory.")
			}
		}
		if err := v.Err(); err != nil {
			return err
		}
		before, err := s.Modes(ctx, environmentID)
		if err != nil {
			return err
		}
		conn := db.Conn(ctx, s.db)
		changed := map[string]map[string]string{}
		ids := make([]string, 0, len(modes))
		for id := range modes {
			ids = append(ids, id)
		}
		sort.Strings(ids)
		for _, id := range ids {
			m := policies.Enforcement(modes[id])
			old, ok := before[id]
			if !ok {
				old = defaults[id]
			}
			if old == m {
				continue
			}
			changed[id] = map[string]string{"from": string(old), "to": string(m)}
			if m == defaults[id] {
				err = conn.Exec("DELETE FROM environment_policy_modes WHERE environment_id = ? AND rule_id = ?", environmentID, id).Error
			} else {
				err = conn.Exec(`INSERT INTO environment_policy_modes (organization_id, environment_id, rule_id, enforcement) VALUES (?, ?, ?, ?)
					ON CONFLICT (environment_id, rule_id) DO UPDATE SET enforcement = EXCLUDED.enforcement, updated_at = now()`,
					subject.OrganizationID, environmentID, id, string(m)).Error
			}
			if err != nil {
				return fmt.Errorf("saving policy mode: %w", err)
			}
		}
		if len(changed) == 0 {
			return nil
		}
		return s.audit.Record(ctx, audit.Entry{Action: "policy.modes_changed", TargetType: "environment", TargetID: environmentID,
			Data: map[string]any{"changes": changed}})
	})
}

// List returns the organization's policies, newest version of each name first in
// name order, with every older version after it.
func (s *Store) List(ctx context.Context) ([]OrgPolicy, error) {
	subject, err := authz.Require(ctx, authz.PermOrgRead)
	if err != nil {
		return nil, err
	}
	var rows []OrgPolicy
	err = db.Conn(ctx, s.db).Where("organization_id = ?", subject.OrganizationID).Order("name, version DESC").Find(&rows).Error
	if err != nil {
		return nil, fmt.Errorf("listing org policies: %w", err)
	}
	return rows, nil
}

// Upload adds a new version of an organization policy after compiling it with the
// bundle and running its tests (admins). Problems are field errors on "name", "rego"
// or "tests"; nothing is stored then.
func (s *Store) Upload(ctx context.Context, name, rego, tests string) (OrgPolicy, error) {
	subject, err := authz.Require(ctx, authz.PermPoliciesManage)
	if err != nil {
		return OrgPolicy{}, err
	}
	name = strings.TrimSpace(name)
	rule, err := policies.ValidateOrgPolicy(ctx, name, rego, tests)
	var ve *policies.ValidationError
	if errors.As(err, &ve) {
		v := &errs.Validation{}
		for _, f := range ve.Fields {
			v.Add(f.Field, f.Message)
		}
		return OrgPolicy{}, v
	}
	if err != nil {
		return OrgPolicy{}, err
	}
	sum := sha256.Sum256([]byte(rego))
	p := OrgPolicy{OrganizationID: subject.OrganizationID, Name: name, Title: rule.Title, Enforcement: string(rule.Enforcement),
		Rego: rego, Tests: tests, Digest: hex.EncodeToString(sum[:]), Active: true, UploadedBy: &subject.UserID, UploadedByName: subject.Name}
	err = db.Tx(ctx, s.db, func(ctx context.Context) error {
		conn := db.Conn(ctx, s.db)
		// Versions of one name are numbered in order: serialise uploads of the same name.
		if err := conn.Exec("SELECT pg_advisory_xact_lock(hashtext(?))", "org_policy:"+subject.OrganizationID+":"+name).Error; err != nil {
			return fmt.Errorf("locking org policy: %w", err)
		}
		var last int
		if err := conn.Raw("SELECT coalesce(max(version), 0) FROM org_policies WHERE organization_id = ? AND name = ?", subject.OrganizationID, name).Scan(&last).Error; err != nil {
			return fmt.Errorf("reading org policy versions: %w", err)
		}
		p.Version = last + 1
		if err := conn.Create(&p).Error; err != nil {
			return fmt.Errorf("saving org policy: %w", err)
		}
		return s.audit.Record(ctx, audit.Entry{Action: "policy.uploaded", TargetType: "org_policy", TargetID: name,
			Data: map[string]any{"version": p.Version, "digest": p.Digest, "title": p.Title, "enforcement": p.Enforcement}})
	})
	return p, err
}

// SetActive takes an organization policy out of the bundle (or back in) without
// deleting any version (admins).
func (s *Store) SetActive(ctx context.Context, name string, active bool) error {
	subject, err := authz.Require(ctx, authz.PermPoliciesManage)
	if err != nil {
		return err
	}
	return db.Tx(ctx, s.db, func(ctx context.Context) error {
		res := db.Conn(ctx, s.db).Exec(`UPDATE org_policies SET active = ? WHERE organization_id = ? AND name = ?
			AND version = (SELECT max(version) FROM org_policies WHERE organization_id = ? AND name = ?)`,
			active, subject.OrganizationID, name, subject.OrganizationID, name)
		if res.Error != nil {
			return fmt.Errorf("saving org policy: %w", res.Error)
		}
		if res.RowsAffected == 0 {
			return errs.ErrNotFound
		}
		action := "policy.deactivated"
		if active {
			action = "policy.activated"
		}
		return s.audit.Record(ctx, audit.Entry{Action: action, TargetType: "org_policy", TargetID: name})
	})
}
