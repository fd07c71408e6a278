package handlers

import (
	"net/http"
	"strconv"

	"github.com/labstack/echo/v4"

	"gantry/models/classify"
	"gantry/models/run"
)

// apiEvidence is what a decision binds to (DESIGN §3): the review answers it, and a
// decision sends it back unchanged. Every field must be sent (a null or missing one is
// a 422): a decision on half the evidence is no decision.
type apiEvidence struct {
	RunID               *string `json:"run_id"`
	PlanRevision        *int    `json:"plan_revision"`
	PlanDigest          *string `json:"plan_digest"`
	ConfigDigest        *string `json:"config_digest"`
	PriorStateVersionID *string `json:"prior_state_version_id" doc:"the state version the plan was computed from, or none"`
	PriorSerial         *int    `json:"prior_serial"`
	PriorLineage        *string `json:"prior_lineage"`
	PriorStateDigest    *string `json:"prior_state_digest"`
	PolicyEvaluationID  *string `json:"policy_evaluation_id"`
	PolicyResultDigest  *string `json:"policy_result_digest"`
	PolicyBundleDigest  *string `json:"policy_bundle_digest"`
}

func toAPIEvidence(ev run.Evidence) apiEvidence {
	f := ev.Fields()
	s := func(k string) *string { v := f[k]; return &v }
	n := func(v int) *int { return &v }
	return apiEvidence{RunID: s(run.FieldRunID), PlanRevision: n(ev.PlanRevision), PlanDigest: s(run.FieldPlanDigest),
		ConfigDigest: s(run.FieldConfigDigest), PriorStateVersionID: s(run.FieldPriorVersionID), PriorSerial: n(ev.Predecessor.Serial),
		PriorLineage: s(run.FieldPriorLineage), PriorStateDigest: s(run.FieldPriorDigest), PolicyEvaluationID: s(run.FieldPolicyEvaluationID),
		PolicyResultDigest: s(run.FieldPolicyResultDigest), PolicyBundleDigest: s(run.FieldPolicyBundleDigest)}
}

// parse reads the evidence through the same parser as the review page's form.
func (a *apiEvidence) parse() (run.Evidence, error) {
	if a == nil {
		return run.ParseEvidence(func(string) (string, bool) { return "", false })
	}
	fields := map[string]*string{run.FieldRunID: a.RunID, run.FieldPlanDigest: a.PlanDigest, run.FieldConfigDigest: a.ConfigDigest,
		run.FieldPriorVersionID: a.PriorStateVersionID, run.FieldPriorLineage: a.PriorLineage, run.FieldPriorDigest: a.PriorStateDigest,
		run.FieldPolicyEvaluationID: a.PolicyEvaluationID, run.FieldPolicyResultDigest: a.PolicyResultDigest,
		run.FieldPolicyBundleDigest: a.PolicyBundleDigest}
	nums := map[string]*int{run.FieldPlanRevision: a.PlanRevision, run.FieldPriorSerial: a.PriorSerial}
	return run.ParseEvidence(func(field string) (string, bool) {
		if p, ok := fields[field]; ok && p != nil {
			return *p, true
		}
		if p, ok := nums[field]; ok && p != nil {
			return strconv.Itoa(*p), true
		}
		return "", false
	})
}

// apiReview is what deciding a run binds to and what the caller may do about it.
type apiReview struct {
	Run      apiRun      `json:"run"`
	Evidence apiEvidence `json:"evidence"`
	Changes  []apiChange `json:"changes"`
	// Irreversible: some change replaces or destroys a resource that holds data.
	Irreversible bool            `json:"irreversible"`
	Policy       apiPolicyResult `json:"policy"`
	// Deciders says who may decide, in words.
	Deciders string    `json:"deciders"`
	Allowed  apiAllows `json:"allowed"`
}

type apiChange struct {
	Address      string   `json:"address"`
	Type         string   `json:"type"`
	Class        string   `json:"class" doc:"create, update, replace, destroy, read or no-op"`
	Actions      []string `json:"actions"`
	Irreversible bool     `json:"irreversible"`
	// RollbackBoundary: how a replaced or destroyed resource comes back (the review
	// page's words; the approval's audit event records the same).
	RollbackBoundary *apiBoundary `json:"rollback_boundary,omitempty"`
}

// apiBoundary is one change's rollback boundary.
type apiBoundary struct {
	Kind  string `json:"kind" doc:"forward_fix_only, restore_from_state_version or none_known"`
	Words string `json:"words"`
	Notes string `json:"notes,omitempty" doc:"the template's rollback notes"`
}

type apiPolicyResult struct {
	Outcome string          `json:"outcome"`
	Results []apiPolicyRule `json:"results"`
}

type apiPolicyRule struct {
	RuleID      string   `json:"rule_id"`
	RuleVersion string   `json:"rule_version"`
	Title       string   `json:"title"`
	Enforcement string   `json:"enforcement"`
	Passed      bool     `json:"passed"`
	Messages    []string `json:"messages"`
	Overridden  bool     `json:"overridden"`
}

// apiAllows says, for each decision, whether the caller may make it now, and if not
// the stable code and the reason (the same verdicts the page's controls come from).
type apiAllows struct {
	Approve   apiVerdict `json:"approve"`
	Reject    apiVerdict `json:"reject"`
	Override  apiVerdict `json:"override"`
	Cancel    apiVerdict `json:"cancel"`
	PlanAgain apiVerdict `json:"plan_again"`
}

type apiVerdict struct {
	Allowed bool   `json:"allowed"`
	Code    string `json:"code,omitempty"`
	Reason  string `json:"reason,omitempty"`
}

func toVerdict(v run.Verdict) apiVerdict {
	if v.Allowed() {
		return apiVerdict{Allowed: true}
	}
	return apiVerdict{Code: string(v.Code()), Reason: v.Reason()}
}

func (h API) review(c echo.Context) error {
	page, err := h.Reviews.Page(c.Request().Context(), c.Param("id"))
	if err != nil {
		return err
	}
	r, data, perms := page.Run, page.Plan, page.Permissions
	out := apiReview{Run: toAPIRun(r), Evidence: toAPIEvidence(run.EvidenceOf(r)), Changes: []apiChange{},
		Irreversible: data.Classification.HasIrreversible, Policy: apiPolicyResult{Outcome: r.PolicyOutcome, Results: []apiPolicyRule{}},
		Deciders: perms.Deciders.Summary(),
		Allowed: apiAllows{Approve: toVerdict(perms.Approve), Reject: toVerdict(perms.Reject), Override: toVerdict(perms.Override),
			Cancel: toVerdict(perms.Cancel), PlanAgain: toVerdict(perms.PlanAgain)}}
	for i, ch := range data.Classification.Changes {
		if ch.Class == classify.ClassNoOp {
			continue
		}
		c := apiChange{Address: ch.Address, Type: ch.Type, Class: string(ch.Class), Actions: nonNil(ch.Actions), Irreversible: ch.Irreversible}
		if b, ok := page.Boundary.At(i); ok {
			c.RollbackBoundary = &apiBoundary{Kind: string(b.Kind), Words: page.Boundary.Words(b), Notes: page.Boundary.Notes}
		}
		out.Changes = append(out.Changes, c)
	}
	if data.Evaluation != nil {
		for _, res := range data.Evaluation.Results {
			_, overridden := data.Overrides[res.RuleID]
			out.Policy.Results = append(out.Policy.Results, apiPolicyRule{RuleID: res.RuleID, RuleVersion: res.RuleVersion, Title: res.Title,
				Enforcement: string(res.Enforcement), Passed: res.Passed, Messages: nonNil(res.Messages), Overridden: overridden})
		}
	}
	return c.JSON(http.StatusOK, out)
}

// apiApproval approves the plan its evidence names.
type apiApproval struct {
	Evidence *apiEvidence `json:"evidence"`
	// Confirm and Reason: an elevated decision needs confirm run.ConfirmWord and a reason
	// of run.MinReasonLength characters or more.
	Confirm string `json:"confirm,omitempty" doc:"the word an elevated decision is confirmed with (the review's deciders name it)"`
	Reason  string `json:"reason,omitempty"`
}

type apiRejection struct {
	Evidence *apiEvidence `json:"evidence"`
	Reason   string       `json:"reason"`
}

type apiOverride struct {
	Evidence    *apiEvidence `json:"evidence"`
	RuleID      string       `json:"rule_id"`
	RuleVersion string       `json:"rule_version"`
	Reason      string       `json:"reason"`
}

func (h API) approve(c echo.Context) error {
	var body apiApproval
	if err := bindJSON(c, &body); err != nil {
		return err
	}
	ev, err := body.Evidence.parse()
	if err != nil {
		return err
	}
	r, err := h.Decisions.Approve(c.Request().Context(), c.Param("id"), run.Approval{Evidence: ev, Confirm: body.Confirm, Reason: body.Reason})
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, toAPIRun(r))
}

func (h API) reject(c echo.Context) error {
	var body apiRejection
	if err := bindJSON(c, &body); err != nil {
		return err
	}
	ev, err := body.Evidence.parse()
	if err != nil {
		return err
	}
	r, err := h.Decisions.Reject(c.Request().Context(), c.Param("id"), ev, body.Reason)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, toAPIRun(r))
}

func (h API) override(c echo.Context) error {
	var body apiOverride
	if err := bindJSON(c, &body); err != nil {
		return err
	}
	ev, err := body.Evidence.parse()
	if err != nil {
		return err
	}
	r, err := h.Decisions.Override(c.Request().Context(), c.Param("id"), ev, body.RuleID, body.RuleVersion, body.Reason)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, toAPIRun(r))
}
