package run

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"gantry/models/audit"
	"gantry/models/authz"
	"gantry/models/bundle"
	"gantry/models/errs"
	"gantry/models/policy"
)

// The per-run evidence report (DESIGN §8): everything that bound the run, every
// decision with what it bound, the apply record, the state it wrote and the
// verification, and one verdict that matches the apply record to the approval record.
// The verdict is not two columns of one row compared: it recomputes the sha256 of the
// decrypted stored plan file and compares it with the digests the hash-chained audit
// events recorded when the run was approved and when its apply started.

// ReportEvent is one audit event of the run in the report: when, who, what, and the
// data it recorded (the evidence it bound).
type ReportEvent struct {
	Seq    int64          `json:"seq"`
	At     time.Time      `json:"at"`
	Actor  string         `json:"actor"`
	Action string         `json:"action"`
	Data   map[string]any `json:"data"`
	Hash   string         `json:"hash"`
}

// ReportVerdict is the report's one answer.
type ReportVerdict struct {
	// Applied: an apply started (its record is in the chain).
	Applied bool `json:"applied"`
	// Match: the applied artifact is the approved artifact (only when Applied).
	Match bool `json:"match"`
	// The digests side by side: what the approval bound, what the apply record names,
	// and the sha256 of the stored plan file now.
	ApprovedDigest string `json:"approved_plan_digest,omitempty"`
	AppliedDigest  string `json:"applied_plan_digest,omitempty"`
	StoredDigest   string `json:"stored_plan_digest,omitempty"`
	Text           string `json:"text"`
}

// Report is a run's evidence report.
type Report struct {
	Run        Run                `json:"-"`
	Inputs     json.RawMessage    `json:"inputs"` // as stored: sensitive values masked
	Evaluation *policy.Evaluation `json:"-"`
	Events     []ReportEvent      `json:"events"`
	Decisions  []ReportEvent      `json:"decisions"`
	Apply      *ReportEvent       `json:"apply,omitempty"`
	State      *ReportEvent       `json:"state_version,omitempty"`
	Verify     *ReportEvent       `json:"verification,omitempty"`
	Verdict    ReportVerdict      `json:"verdict"`
	// Attestations are the signed in-toto bundles of the run's applies, newest first.
	Attestations []json.RawMessage `json:"attestations"`
	GeneratedAt  time.Time         `json:"generated_at"`
}

// EvidenceReport builds run r's report (r read through Get: the subject may see it).
func (s *Service) EvidenceReport(ctx context.Context, r Run) (Report, error) {
	subject, err := authz.Require(ctx, authz.PermOrgRead)
	if err != nil {
		return Report{}, err
	}
	if r.OrganizationID != subject.OrganizationID {
		return Report{}, errs.ErrNotFound
	}
	// The run's own events and those scoped to it (the state version its apply wrote is
	// recorded on the workspace).
	all, err := s.audit.OfRun(ctx, r.OrganizationID, r.ID)
	if err != nil {
		return Report{}, err
	}
	rep := Report{Run: r, Inputs: r.Inputs, GeneratedAt: time.Now().UTC()}
	for _, e := range all {
		switch {
		case e.TargetType == "run" && e.TargetID == r.ID:
			rep.Events = append(rep.Events, reportEvent(e))
		case e.Action == "state.version_created" && rep.State == nil:
			ev := reportEvent(e)
			rep.State = &ev
		}
	}
	if r.PolicyEvaluationID != nil {
		ev, _, err := s.policies.EvaluationWithOverrides(ctx, r.OrganizationID, *r.PolicyEvaluationID)
		if err != nil {
			return Report{}, err
		}
		rep.Evaluation = &ev
	}
	stored, storedErr := "", error(nil)
	if r.PlanArtifactID != nil {
		var plan []byte
		if plan, _, storedErr = s.artifacts.Get(ctx, r.OrganizationID, *r.PlanArtifactID); storedErr == nil {
			stored = bundle.Digest(plan)
		}
	}
	rep.Decisions, rep.Apply, rep.Verify = decisionsOf(rep.Events), applyOf(rep.Events), verificationOf(rep.Events)
	rep.Verdict = Judge(r, rep.Events, stored, storedErr)
	if rep.Attestations, err = s.attestor.OfRun(ctx, r.OrganizationID, r.ID); err != nil {
		return Report{}, err
	}
	return rep, nil
}

func reportEvent(e audit.Event) ReportEvent {
	var data map[string]any
	_ = json.Unmarshal(e.Data, &data)
	return ReportEvent{Seq: e.Seq, At: e.OccurredAt.UTC(), Actor: e.ActorName, Action: e.Action, Data: data, Hash: fmt.Sprintf("%x", e.Hash)}
}

func decisionsOf(events []ReportEvent) []ReportEvent {
	var out []ReportEvent
	for _, e := range events {
		switch e.Action {
		case "run.approved", "run.rejected", "policy.overridden", "run.cancelled":
			out = append(out, e)
		}
	}
	return out
}

// applyOf is the last apply record (the run entering RUNNING).
func applyOf(events []ReportEvent) *ReportEvent {
	for i := len(events) - 1; i >= 0; i-- {
		if events[i].Action == "run.running" {
			return &events[i]
		}
	}
	return nil
}

func verificationOf(events []ReportEvent) *ReportEvent {
	for i := len(events) - 1; i >= 0; i-- {
		switch events[i].Action {
		case "run.succeeded", "run.failed", "run.apply_interrupted":
			return &events[i]
		}
	}
	return nil
}

func dataString(e *ReportEvent, key string) string {
	if e == nil {
		return ""
	}
	v, _ := e.Data[key].(string)
	return v
}

// Judge is the verdict over a run, its audit events (oldest first) and the sha256 of
// its stored plan file now (storedErr when it could not be read). The applied artifact
// is the approved artifact only when the approval in force at the apply bound a digest,
// the apply record names the same one, and the stored plan file still hashes to it.
func Judge(r Run, events []ReportEvent, stored string, storedErr error) ReportVerdict {
	apply := applyOf(events)
	if apply == nil {
		return ReportVerdict{Text: neverApplied(r, events)}
	}
	v := ReportVerdict{Applied: true, AppliedDigest: dataString(apply, "plan_digest"), StoredDigest: stored}
	// The approval in force: the last one recorded before the apply started.
	for i := range events {
		if events[i].Seq > apply.Seq {
			break
		}
		if events[i].Action == "run.approved" {
			v.ApprovedDigest = dataString(&events[i], "approved_plan_digest")
		}
	}
	switch {
	case v.ApprovedDigest == "":
		v.Text = "The applied artifact is NOT the approved artifact: no approval record binds a plan digest before the apply (unevidenced)."
	case storedErr != nil:
		v.Text = "The applied artifact is NOT the approved artifact, as far as can be proven: the stored plan file cannot be read (" + storedErr.Error() + ")."
	case v.AppliedDigest != v.ApprovedDigest || stored != v.ApprovedDigest:
		v.Text = fmt.Sprintf("The applied artifact is NOT the approved artifact: approved %s, apply record %s, stored plan file %s.",
			short(v.ApprovedDigest), short(v.AppliedDigest), short(stored))
	default:
		v.Match = true
		v.Text = fmt.Sprintf("The applied artifact is the approved artifact: the approval, the apply record and the stored plan file all have sha256 %s.", v.ApprovedDigest)
	}
	return v
}

// neverApplied says in plain words why a run never applied.
func neverApplied(r Run, events []ReportEvent) string {
	reason := strings.TrimSpace(r.StateReason)
	with := func(s string) string {
		if reason != "" {
			return s + ": " + reason + "."
		}
		return s + "."
	}
	switch r.State {
	case Rejected:
		return with("Never applied: rejected by " + r.RejectedByName)
	case Expired:
		return with("Never applied: the decision window or the approval expired")
	case Stale:
		return with("Never applied: the plan went stale")
	case PolicyBlocked:
		return with("Never applied: blocked by policy")
	case Cancelled:
		return with("Never applied: cancelled")
	case NoChanges:
		return "Nothing to apply: the plan had no changes."
	case Failed:
		return with("Never applied: the run failed before its apply")
	case PendingApproval:
		return "Not applied yet: waiting for a decision."
	case Approved:
		return "Not applied yet: approved, the apply has not started."
	}
	return "Not applied yet: " + strings.ToLower(strings.ReplaceAll(string(r.State), "_", " ")) + "."
}

// attest signs, in the transaction of the apply's end, what the apply of r wrote: one
// statement whose subjects are the state versions recorded for the run and whose
// predicate names the request, config bundle, plan, policy evaluation and approval (by
// their digests and the hashes of their audit events). An apply that wrote nothing
// has nothing to attest.
func (s *Service) attest(ctx context.Context, r Run, outcome string) error {
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
