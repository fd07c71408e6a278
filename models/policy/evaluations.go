package policy

import (
	"context"
	"fmt"
	"time"

	"gorm.io/gorm/clause"

	"gantry/models/audit"
	"gantry/models/db"
	"gantry/policies"
)

// The stored evaluations of runs' plans and the overrides admins give their
// soft-mandatory failures: what the plan gates and the evidence report read back.

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
