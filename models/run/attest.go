package run

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"

	"gantry/models/audit"
)

// attest signs, in the transaction of the apply's end, what the apply of r wrote: one
// statement whose subjects are the state versions recorded for the run and whose
// predicate names the request, config bundle, plan, policy evaluation and approval (by
// their digests and the hashes of their audit events). An apply that wrote nothing
// has nothing to attest.
func (s *core) attest(ctx context.Context, r Run, outcome string) error {
	events, err := s.audit.OfRun(ctx, r.OrganizationID, r.ID)
	if err != nil {
		return err
	}
	var subjects []AttestedState
	var requested, approved *audit.Event
	for i, e := range events {
		switch e.Action {
		case "state.version_created":
			var d struct {
				ID     string `json:"state_version_id"`
				SHA256 string `json:"sha256"`
			}
			if json.Unmarshal(e.Data, &d) == nil && d.ID != "" {
				subjects = append(subjects, AttestedState{Name: "state-version/" + d.ID, SHA256: strings.TrimPrefix(d.SHA256, "sha256:")})
			}
		case "run.queued":
			requested = &events[i]
		case "run.approved":
			approved = &events[i]
		}
	}
	if len(subjects) == 0 {
		return nil
	}
	hashOf := func(e *audit.Event) string {
		if e == nil {
			return ""
		}
		return fmt.Sprintf("%x", e.Hash)
	}
	predicate := map[string]any{
		"run": r.ID, "organization": r.OrganizationID, "workspace": r.WorkspaceID, "environment": r.EnvironmentID, "outcome": outcome,
		"simulated": r.Simulated,
		"request": map[string]any{"requested_by": r.RequestedBy, "template": r.TemplateName, "template_version": r.TemplateVersion,
			"module_digest": r.ModuleDigest, "audit_event_hash": hashOf(requested)},
		"config_bundle": map[string]any{"digest": r.ConfigDigest},
		"plan":          map[string]any{"digest": r.PlanDigest, "revision": float64(r.PlanRevision)},
		"policy_evaluation": map[string]any{"id": deref(r.PolicyEvaluationID), "bundle_digest": r.PolicyBundleDigest,
			"result_digest": r.PolicyResultDigest, "outcome": r.PolicyOutcome},
		"approval": map[string]any{"kind": r.ApprovalKind, "approved_by": r.ApprovedByName, "approved_plan_digest": r.ApprovedPlanDigest,
			"audit_event_hash": hashOf(approved)},
	}
	return s.attestor.Attest(ctx, r.OrganizationID, r.ID, subjects, predicate)
}
