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
	"gorm.io/gorm/clause"

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

// Evaluation is one stored policy evaluation of a run's plan.
type Evaluation struct {
	ID             string
	OrganizationID string
	RunID          string
	PlanRevision   int
	PlanDigest     string
	BundleDigest   string
	ResultDigest   string
	Outcome        string
	Results        []policies.Result `gorm:"serializer:json;type:jsonb"`
	CreatedAt      time.Time
}

// TableName names the table.
func (Evaluation) TableName() string { return "policy_evaluations" }

// Override is an admin's override of one soft-mandatory failure, bound to the rule's
// version and the evaluation's result digest.
type Override struct {
	ID               string
	OrganizationID   string
	RunID            string
	EvaluationID     string
	RuleID           string
	RuleVersion      string
	ResultDigest     string
	Reason           string
	OverriddenBy     string
	OverriddenByName string
	// ExpiresAt is the decision deadline of the run the override was given to: it
	// holds until then and no longer (DESIGN §3).
	ExpiresAt time.Time
	CreatedAt time.Time
	// The run's environment and workspace, for the audit event's scope (not stored).
	EnvironmentID string `gorm:"-"`
	WorkspaceID   string `gorm:"-"`
}

// ValidAt reports whether the override still holds at now.
func (o Override) ValidAt(now time.Time) bool { return now.Before(o.ExpiresAt) }

// TableName names the table.
func (Override) TableName() string { return "policy_overrides" }

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

// Record stores an evaluation of a run's plan (in the transaction carried by ctx) and
// returns its id.
func (s *Store) Record(ctx context.Context, orgID, runID string, revision int, planDigest string, ev policies.Evaluation) (Evaluation, error) {
	row := Evaluation{ID: db.NewID("pev"), OrganizationID: orgID, RunID: runID, PlanRevision: revision, PlanDigest: planDigest,
		BundleDigest: ev.BundleDigest, ResultDigest: ev.Digest, Outcome: string(ev.Outcome), Results: ev.Results}
	if err := db.Conn(ctx, s.db).Omit("created_at").Create(&row).Error; err != nil {
		return Evaluation{}, fmt.Errorf("saving policy evaluation: %w", err)
	}
	return row, nil
}

// Evaluation returns stored evaluation id of organization orgID.
func (s *Store) Evaluation(ctx context.Context, orgID, id string) (Evaluation, error) {
	var row Evaluation
	if err := db.Conn(ctx, s.db).Where("organization_id = ? AND id = ?", orgID, id).Take(&row).Error; err != nil {
		return Evaluation{}, fmt.Errorf("reading policy evaluation: %w", db.Translate(err))
	}
	return row, nil
}

// EvaluationWithOverrides returns stored evaluation id and the overrides given to it,
// by rule: what an override and the pre-apply re-check judge against.
func (s *Store) EvaluationWithOverrides(ctx context.Context, orgID, id string) (Evaluation, map[string]Override, error) {
	ev, err := s.Evaluation(ctx, orgID, id)
	if err != nil {
		return Evaluation{}, nil, err
	}
	overrides, err := s.Overrides(ctx, orgID, id)
	return ev, overrides, err
}

// Overrides returns the overrides given to evaluation id, by rule.
func (s *Store) Overrides(ctx context.Context, orgID, evaluationID string) (map[string]Override, error) {
	var rows []Override
	if err := db.Conn(ctx, s.db).Where("organization_id = ? AND evaluation_id = ?", orgID, evaluationID).Find(&rows).Error; err != nil {
		return nil, fmt.Errorf("reading overrides: %w", err)
	}
	out := make(map[string]Override, len(rows))
	for _, o := range rows {
		out[o.RuleID] = o
	}
	return out, nil
}

// AddOverride stores an override (in the transaction carried by ctx, which has
// checked it) and audits it with its binding.
func (s *Store) AddOverride(ctx context.Context, o Override, bundleDigest string, bound map[string]any) error {
	o.ID = db.NewID("pov")
	if err := db.Conn(ctx, s.db).Clauses(clause.OnConflict{DoNothing: true}).Omit("created_at").Create(&o).Error; err != nil {
		return fmt.Errorf("saving override: %w", err)
	}
	data := map[string]any{"rule_id": o.RuleID, "rule_version": o.RuleVersion, "evaluation_id": o.EvaluationID,
		"result_digest": o.ResultDigest, "bundle_digest": bundleDigest, "reason": o.Reason, "expires_at": o.ExpiresAt}
	for k, v := range bound {
		data[k] = v
	}
	return s.audit.Record(ctx, audit.Entry{Action: "policy.overridden", TargetType: "run", TargetID: o.RunID, Data: data,
		EnvironmentID: o.EnvironmentID, WorkspaceID: o.WorkspaceID})
}
