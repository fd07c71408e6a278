package run

import (
	"fmt"
	"strconv"

	"gantry/models/errs"
)

// Evidence is everything a decision is taken on (DESIGN §3): the run, the plan revision
// and digest, the config bundle digest, the predecessor state, and the policy
// evaluation with its result and bundle digests. The review page carries it, every
// decision submits it back, and the database compares it with the run's current
// evidence under the row lock in the transaction that records the decision.
type Evidence struct {
	RunID              string
	PlanRevision       int
	PlanDigest         string
	ConfigDigest       string
	Predecessor        Predecessor
	PolicyEvaluationID string
	PolicyResultDigest string
	PolicyBundleDigest string
}

// Form field names of the evidence, shared by the review page and the decision handler.
const (
	FieldRunID              = "run_id"
	FieldPlanRevision       = "plan_revision"
	FieldPlanDigest         = "plan_digest"
	FieldConfigDigest       = "config_digest"
	FieldPriorVersionID     = "prior_state_version_id"
	FieldPriorSerial        = "prior_serial"
	FieldPriorLineage       = "prior_lineage"
	FieldPriorDigest        = "prior_state_digest"
	FieldPolicyEvaluationID = "policy_evaluation_id"
	FieldPolicyResultDigest = "policy_result_digest"
	FieldPolicyBundleDigest = "policy_bundle_digest"
)

// EvidenceOf is the evidence run r carries now (what a review page shows).
func EvidenceOf(r Run) Evidence {
	ev := Evidence{RunID: r.ID, PlanRevision: r.PlanRevision, PlanDigest: r.PlanDigest, ConfigDigest: r.ConfigDigest,
		Predecessor:        Predecessor{VersionID: NoPredecessor},
		PolicyResultDigest: r.PolicyResultDigest, PolicyBundleDigest: r.PolicyBundleDigest}
	if r.PriorStateVersionID != nil {
		ev.Predecessor = Predecessor{VersionID: *r.PriorStateVersionID, Serial: r.PriorSerial, Lineage: r.PriorLineage, Digest: r.PriorStateDigest}
	}
	if r.PolicyEvaluationID != nil {
		ev.PolicyEvaluationID = *r.PolicyEvaluationID
	}
	return ev
}

// Fields is ev as form fields (the review page's hidden inputs).
func (ev Evidence) Fields() map[string]string {
	return map[string]string{
		FieldRunID: ev.RunID, FieldPlanRevision: strconv.Itoa(ev.PlanRevision), FieldPlanDigest: ev.PlanDigest,
		FieldConfigDigest: ev.ConfigDigest, FieldPriorVersionID: ev.Predecessor.VersionID,
		FieldPriorSerial: strconv.Itoa(ev.Predecessor.Serial), FieldPriorLineage: ev.Predecessor.Lineage,
		FieldPriorDigest: ev.Predecessor.Digest, FieldPolicyEvaluationID: ev.PolicyEvaluationID,
		FieldPolicyResultDigest: ev.PolicyResultDigest, FieldPolicyBundleDigest: ev.PolicyBundleDigest,
	}
}

// EvidenceFields lists the evidence's form fields in the order the page writes them.
var EvidenceFields = []string{FieldRunID, FieldPlanRevision, FieldPlanDigest, FieldConfigDigest, FieldPriorVersionID,
	FieldPriorSerial, FieldPriorLineage, FieldPriorDigest, FieldPolicyEvaluationID, FieldPolicyResultDigest, FieldPolicyBundleDigest}

// ParseEvidence reads submitted evidence. get returns a field's value and whether the
// field was sent at all. A field missing (or, where it can never be empty, empty) is an
// *errs.Validation (422 INVALID_INPUT): a decision on half the evidence is no decision.
func ParseEvidence(get func(field string) (string, bool)) (Evidence, error) {
	v := &errs.Validation{}
	str := func(field string, mayBeEmpty bool) string {
		s, ok := get(field)
		if !ok || (!mayBeEmpty && s == "") {
			v.Add("evidence", "This decision is missing part of the evidence it binds to ("+field+"). Reload the review page and decide again.")
		}
		return s
	}
	num := func(field string) int {
		s := str(field, false)
		n, err := strconv.Atoi(s)
		if s != "" && (err != nil || n < 0) {
			v.Add("evidence", "The evidence field "+field+" is not a number: reload the review page and decide again.")
		}
		return n
	}
	ev := Evidence{RunID: str(FieldRunID, false), PlanRevision: num(FieldPlanRevision), PlanDigest: str(FieldPlanDigest, false),
		ConfigDigest: str(FieldConfigDigest, false)}
	ev.Predecessor.VersionID = str(FieldPriorVersionID, false)
	if !ev.Predecessor.None() {
		ev.Predecessor.Serial, ev.Predecessor.Lineage, ev.Predecessor.Digest = num(FieldPriorSerial), str(FieldPriorLineage, false), str(FieldPriorDigest, false)
	}
	// Runs planned before policies were evaluated carry no evaluation: these may be
	// empty, but they must be sent.
	ev.PolicyEvaluationID = str(FieldPolicyEvaluationID, true)
	ev.PolicyResultDigest = str(FieldPolicyResultDigest, true)
	ev.PolicyBundleDigest = str(FieldPolicyBundleDigest, true)
	return ev, v.Err()
}

// auditData is the evidence as the decision's audit event records it.
func (ev Evidence) auditData() map[string]any {
	return map[string]any{
		"evidence": map[string]any{
			"run_id": ev.RunID, "plan_revision": ev.PlanRevision, "plan_digest": ev.PlanDigest, "config_digest": ev.ConfigDigest,
			"predecessor": map[string]any{"state_version_id": ev.Predecessor.VersionID, "serial": ev.Predecessor.Serial,
				"lineage": ev.Predecessor.Lineage, "digest": ev.Predecessor.Digest},
			"policy_evaluation_id": ev.PolicyEvaluationID, "policy_result_digest": ev.PolicyResultDigest,
			"policy_bundle_digest": ev.PolicyBundleDigest,
		},
	}
}

// check refuses a decision taken on evidence ev when run r carries other evidence
// now, naming what moved.
func (ev Evidence) check(r Run) error {
	cur := EvidenceOf(r)
	if ev == cur {
		return nil
	}
	var moved string
	switch {
	case ev.RunID != cur.RunID:
		moved = fmt.Sprintf("the decision names run %q", ev.RunID)
	case ev.PlanRevision != cur.PlanRevision || ev.PlanDigest != cur.PlanDigest:
		moved = fmt.Sprintf("the decision names plan revision %d (%s), the run carries revision %d (%s)", ev.PlanRevision, ev.PlanDigest, cur.PlanRevision, cur.PlanDigest)
	case ev.ConfigDigest != cur.ConfigDigest:
		moved = fmt.Sprintf("the decision names config bundle %s, the run carries %s", ev.ConfigDigest, cur.ConfigDigest)
	case ev.Predecessor != cur.Predecessor:
		moved = fmt.Sprintf("the decision names predecessor state %s, the plan was computed from %s", ev.Predecessor, cur.Predecessor)
	default:
		moved = fmt.Sprintf("the decision names policy evaluation %q (result %q, bundle %q), the run carries %q (%q, %q)",
			ev.PolicyEvaluationID, ev.PolicyResultDigest, ev.PolicyBundleDigest, cur.PolicyEvaluationID, cur.PolicyResultDigest, cur.PolicyBundleDigest)
	}
	return fmt.Errorf("run %s: %s: %w", r.ID, moved, ErrStaleEvidence)
}
