// Package evidence builds a run's evidence report (DESIGN §8): everything that bound the
// run, every decision with what it bound, the apply record, the state it wrote and the
// verification, and one verdict that matches the apply record to the approval record.
// The verdict is not two columns of one row compared: it recomputes the sha256 of the
// decrypted stored plan file and compares it with the digests the hash-chained audit
// events recorded when the run was approved and when its apply started.
//
// It stands outside the run lifecycle (models/run) and reads a run through it, as
// models/breakglass does: what it needs of the audit chain, the policy evaluations, the
// artifacts and the attestations it asks through the small interfaces below.
package evidence

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"gantry/models/artifact"
	"gantry/models/audit"
	"gantry/models/authz"
	"gantry/models/bundle"
	"gantry/models/errs"
	"gantry/models/policy"
	"gantry/models/run"
	"gantry/models/runport"
)

// AuditTrail reads a run's audit events, oldest first (audit.Log).
type AuditTrail interface {
	OfRun(ctx context.Context, orgID, runID string) ([]audit.Event, error)
}

// Evaluations reads a policy evaluation with its overrides (policy.Store).
type Evaluations interface {
	EvaluationWithOverrides(ctx context.Context, orgID, evaluationID string) (policy.Evaluation, map[string]policy.Override, error)
}

// Artifacts reads a stored artifact, decrypted (artifact.Store).
type Artifacts interface {
	Get(ctx context.Context, orgID, id string) ([]byte, artifact.Artifact, error)
}

// Attestations are a run's signed attestation bundles, newest first.
type Attestations interface {
	OfRun(ctx context.Context, orgID, runID string) ([]json.RawMessage, error)
}

// Reports builds evidence reports.
type Reports struct {
	audit        AuditTrail
	policies     Evaluations
	artifacts    Artifacts
	attestations Attestations
}

// New returns the reports over what they read.
func New(audit AuditTrail, policies Evaluations, artifacts Artifacts, attestations Attestations) *Reports {
	return &Reports{audit: audit, policies: policies, artifacts: artifacts, attestations: attestations}
}

// ReportEvent is one audit event of the run in the report: when, who, what, and the
// data it recorded (the evidence it bound).
type ReportEvent struct {
	Seq     int64          `json:"seq"`
	At      time.Time      `json:"at"`
	Actor   string         `json:"actor"`
	ActorID string         `json:"actor_id"`
	Action  string         `json:"action"`
	Data    map[string]any `json:"data"`
	Hash    string         `json:"hash"`
	// SelfApproval marks an approval the run's own requester gave (runport.SelfApproved).
	SelfApproval string `json:"self_approval,omitempty"`
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
	// SelfApproved: the approval in force at the apply was the requester's own.
	SelfApproved bool `json:"self_approved"`
}

// Report is a run's evidence report.
type Report struct {
	Run        run.Run            `json:"-"`
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

// Of builds run r's report (r read through run.Reads.Get: the subject may see it).
func (s *Reports) Of(ctx context.Context, r run.Run) (Report, error) {
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
			rep.Events = append(rep.Events, markSelfApproval(r, eventOf(e)))
		case e.Action == "state.version_created" && rep.State == nil:
			ev := eventOf(e)
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
	if rep.Attestations, err = s.attestations.OfRun(ctx, r.OrganizationID, r.ID); err != nil {
		return Report{}, err
	}
	return rep, nil
}

func eventOf(e audit.Event) ReportEvent {
	var data map[string]any
	_ = json.Unmarshal(e.Data, &data)
	return ReportEvent{Seq: e.Seq, At: e.OccurredAt.UTC(), Actor: e.ActorName, ActorID: e.ActorID, Action: e.Action, Data: data, Hash: fmt.Sprintf("%x", e.Hash)}
}

// markSelfApproval marks e when it is an approval of run r by its own requester: the
// event says so (self_approved), or its actor requested the run (approvals recorded
// before the field existed).
func markSelfApproval(r run.Run, e ReportEvent) ReportEvent {
	if e.Action == "run.approved" && e.ActorID != "system" && (e.Data[runport.SelfApprovedField] == true || r.RequestedByUser(e.ActorID)) {
		e.SelfApproval = runport.SelfApproved
	}
	return e
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
func Judge(r run.Run, events []ReportEvent, stored string, storedErr error) ReportVerdict {
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
			v.SelfApproved = events[i].SelfApproval != ""
		}
	}
	switch {
	case v.ApprovedDigest == "":
		v.Text = "The applied artifact is NOT the approved artifact: no approval record binds a plan digest before the apply (unevidenced)."
	case storedErr != nil:
		v.Text = "The applied artifact is NOT the approved artifact, as far as can be proven: the stored plan file cannot be read (" + storedErr.Error() + ")."
	case v.AppliedDigest != v.ApprovedDigest || stored != v.ApprovedDigest:
		v.Text = fmt.Sprintf("The applied artifact is NOT the approved artifact: approved %s, apply record %s, stored plan file %s.",
			bundle.Short(v.ApprovedDigest), bundle.Short(v.AppliedDigest), bundle.Short(stored))
	default:
		v.Match = true
		v.Text = fmt.Sprintf("The applied artifact is the approved artifact: the approval, the apply record and the stored plan file all have sha256 %s.", v.ApprovedDigest)
	}
	if v.SelfApproved {
		v.Text += " The approval in force is marked " + runport.SelfApproved + "."
	}
	return v
}

// neverApplied says in plain words why a run never applied.
func neverApplied(r run.Run, events []ReportEvent) string {
	reason := strings.TrimSpace(r.StateReason)
	with := func(s string) string {
		if reason != "" {
			return s + ": " + reason + "."
		}
		return s + "."
	}
	switch r.State {
	case run.Rejected:
		return with("Never applied: rejected by " + r.RejectedByName)
	case run.Expired:
		return with("Never applied: the decision window or the approval expired")
	case run.Stale:
		return with("Never applied: the plan went stale")
	case run.PolicyBlocked:
		return with("Never applied: blocked by policy")
	case run.Cancelled:
		return with("Never applied: cancelled")
	case run.NoChanges:
		return "Nothing to apply: the plan had no changes."
	case run.Failed:
		return with("Never applied: the run failed before its apply")
	case run.PendingApproval:
		return "Not applied yet: waiting for a decision."
	case run.Approved:
		return "Not applied yet: approved, the apply has not started."
	}
	return "Not applied yet: " + strings.ToLower(strings.ReplaceAll(string(r.State), "_", " ")) + "."
}
