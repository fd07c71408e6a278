package handlers

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"sort"
	"strings"
	"time"

	"github.com/labstack/echo/v4"

	"gantry/handlers/render"
	"gantry/models/audit"
	"gantry/models/evidence"
	"gantry/models/run"
	"gantry/views"
	"gantry/views/paths"
)

// EvidenceReports reads a run's evidence report (pages.Evidence).
type EvidenceReports interface {
	Report(ctx context.Context, runID string) (evidence.Report, error)
}

// Evidence serves a run's evidence report as a page, an HTML download and JSON.
type Evidence struct {
	Reports EvidenceReports
}

// Register adds the evidence routes to g.
func (h Evidence) Register(g *echo.Group) {
	g.GET(paths.RouteRunEvidence, h.page)
	g.GET(paths.RouteRunEvidence+".html", h.download)
	g.GET(paths.RouteRunEvidence+".json", h.json)
	g.GET(paths.RouteRun+"/attestations.json", h.attestations)
}

// attestations downloads the run's attestation bundles, newest first (an empty list
// when it wrote no state): `gantry audit verify --attestation FILE` checks them offline.
func (h Evidence) attestations(c echo.Context) error {
	rep, err := h.report(c)
	if err != nil {
		return err
	}
	bundles := rep.Attestations
	if bundles == nil {
		bundles = []json.RawMessage{}
	}
	c.Response().Header().Set(echo.HeaderContentDisposition, fmt.Sprintf("attachment; filename=%q", "gantry-attestations-"+rep.Run.ID+".json"))
	return c.JSON(http.StatusOK, bundles)
}

func (h Evidence) report(c echo.Context) (evidence.Report, error) {
	return h.Reports.Report(c.Request().Context(), c.Param("id"))
}

func (h Evidence) page(c echo.Context) error {
	rep, err := h.report(c)
	if err != nil {
		return err
	}
	return render.Page(c, http.StatusOK, views.EvidenceReport(evidenceProps(rep, false)))
}

// download is the same report as a file to keep: the page without navigation.
func (h Evidence) download(c echo.Context) error {
	rep, err := h.report(c)
	if err != nil {
		return err
	}
	c.Response().Header().Set(echo.HeaderContentDisposition, fmt.Sprintf("attachment; filename=%q", "gantry-evidence-"+rep.Run.ID+".html"))
	return render.Page(c, http.StatusOK, views.EvidenceReport(evidenceProps(rep, true)))
}

// evidenceJSON is the report for machines: the run's bound evidence and the report.
type evidenceJSON struct {
	Run struct {
		ID              string      `json:"id"`
		Number          int         `json:"number"`
		WorkspaceID     string      `json:"workspace_id"`
		EnvironmentID   string      `json:"environment_id"`
		Kind            string      `json:"kind"`
		State           string      `json:"state"`
		StateReason     string      `json:"state_reason"`
		Template        string      `json:"template"`
		TemplateVersion string      `json:"template_version"`
		RequestedBy     string      `json:"requested_by"`
		RequestReason   string      `json:"request_reason"`
		RequestTicket   string      `json:"request_ticket"`
		ConfigDigest    string      `json:"config_digest"`
		PlanDigest      string      `json:"plan_digest"`
		PlanRevision    int         `json:"plan_revision"`
		Predecessor     string      `json:"predecessor_state"`
		Changes         run.Summary `json:"changes"`
		RiskClass       *int        `json:"risk_class"`
		RiskRule        string      `json:"risk_rule"`
		Policy          struct {
			EvaluationID string `json:"evaluation_id,omitempty"`
			Outcome      string `json:"outcome"`
			BundleDigest string `json:"bundle_digest"`
			ResultDigest string `json:"result_digest"`
		} `json:"policy"`
		Simulated bool `json:"simulated"`
	} `json:"run"`
	evidence.Report
}

func (h Evidence) json(c echo.Context) error {
	rep, err := h.report(c)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, evidenceOf(rep))
}

// evidenceOf is report rep for machines (the page's JSON and the API's).
func evidenceOf(rep evidence.Report) evidenceJSON {
	r := rep.Run
	var out evidenceJSON
	out.Report = rep
	o := &out.Run
	o.ID, o.Number, o.WorkspaceID, o.EnvironmentID, o.Kind, o.State, o.StateReason = r.ID, r.Number, r.WorkspaceID, r.EnvironmentID, string(r.Kind), string(r.State), r.StateReason
	o.Template, o.TemplateVersion, o.RequestedBy, o.ConfigDigest, o.PlanDigest, o.PlanRevision = r.TemplateName, r.TemplateVersion, r.RequestedByName, r.ConfigDigest, r.PlanDigest, r.PlanRevision
	o.RequestReason, o.RequestTicket = r.RequestReason, r.RequestTicket
	o.Predecessor, o.Changes, o.RiskClass, o.RiskRule, o.Simulated = run.EvidenceOf(r).Predecessor.String(), r.PlanSummary, r.RiskClass, r.RiskRule, r.Simulated
	if r.PolicyEvaluationID != nil {
		o.Policy.EvaluationID = *r.PolicyEvaluationID
	}
	o.Policy.Outcome, o.Policy.BundleDigest, o.Policy.ResultDigest = r.PolicyOutcome, r.PolicyBundleDigest, r.PolicyResultDigest
	return out
}

func evidenceProps(rep evidence.Report, standalone bool) views.EvidenceProps {
	r := rep.Run
	p := views.EvidenceProps{RunID: r.ID, RunLabel: r.Label(), RunURL: paths.Run(r.ID), State: stateOf(r.State), StateReason: r.StateReason,
		Standalone: standalone, JSONURL: paths.RunEvidence(r.ID) + ".json", HTMLURL: paths.RunEvidence(r.ID) + ".html",
		GeneratedAt: rep.GeneratedAt, Simulated: r.Simulated, Attestations: len(rep.Attestations), AttestationURL: paths.Run(r.ID) + "/attestations.json",
		Verdict: views.EvidenceVerdict{Applied: rep.Verdict.Applied, Match: rep.Verdict.Match, Text: rep.Verdict.Text,
			ApprovedDigest: rep.Verdict.ApprovedDigest, AppliedDigest: rep.Verdict.AppliedDigest, StoredDigest: rep.Verdict.StoredDigest,
			SelfApproved: rep.Verdict.SelfApproved}}
	var inputs map[string]any
	_ = json.Unmarshal(rep.Inputs, &inputs)
	for k, v := range inputs {
		p.Inputs = append(p.Inputs, views.KV{Key: k, Value: fmt.Sprint(v)})
	}
	sort.Slice(p.Inputs, func(i, j int) bool { return p.Inputs[i].Key < p.Inputs[j].Key })
	p.Facts = evidenceFacts(r)
	if rep.Evaluation != nil {
		for _, res := range rep.Evaluation.Results {
			status := "passed"
			if !res.Passed {
				status = "failed (" + string(res.Enforcement) + ")"
			}
			p.Policies = append(p.Policies, views.KV{Key: res.RuleID, Value: status})
		}
	}
	for _, e := range rep.Decisions {
		p.Decisions = append(p.Decisions, evidenceEvent(e))
	}
	for _, e := range rep.Events {
		p.Events = append(p.Events, evidenceEvent(e))
	}
	for dst, src := range map[**views.EvidenceEvent]*evidence.ReportEvent{&p.Apply: rep.Apply, &p.StateVersion: rep.State, &p.Verification: rep.Verify} {
		if src != nil {
			e := evidenceEvent(*src)
			*dst = &e
		}
	}
	return p
}

// evidenceFacts are what run r bound, as the report's facts table says them.
func evidenceFacts(r run.Run) []views.KV {
	risk := "not assessed"
	if r.RiskClass != nil {
		risk = fmt.Sprintf("%d (%s, rule %s)", *r.RiskClass, r.RiskLevel, r.RiskRule)
	}
	s := r.PlanSummary
	return []views.KV{
		{Key: "Requested by", Value: r.RequestedByName + ", " + r.CreatedAt.UTC().Format("2006-01-02 15:04:05 UTC")},
		{Key: "Reason given", Value: cmp.Or(r.RequestReason, "none given")},
		{Key: "Ticket", Value: cmp.Or(r.RequestTicket, "none given")},
		{Key: "Template", Value: r.TemplateName + " " + r.TemplateVersion},
		{Key: "Module digest", Value: r.ModuleDigest},
		{Key: "Config bundle digest", Value: r.ConfigDigest},
		{Key: "Predecessor state", Value: run.EvidenceOf(r).Predecessor.String()},
		{Key: "Plan revision", Value: fmt.Sprint(r.PlanRevision)},
		{Key: "Plan digest", Value: r.PlanDigest},
		{Key: "Changes", Value: fmt.Sprintf("%d to create, %d to update, %d to replace, %d to delete", s.Create, s.Update, s.Replace, s.Delete)},
		{Key: "Risk", Value: risk},
		{Key: "Policy", Value: outcomeOf(r.PolicyOutcome).Words + " · bundle " + r.PolicyBundleDigest + " · result " + r.PolicyResultDigest},
		{Key: "Executor", Value: r.Runner},
	}
}

func evidenceEvent(e evidence.ReportEvent) views.EvidenceEvent {
	out := views.EvidenceEvent{Seq: e.Seq, At: e.At.UTC().Format(time.RFC3339), Actor: e.Actor, Action: e.Action, Label: audit.ActionLabel(e.Action), Hash: e.Hash,
		SelfApproval: e.SelfApproval}
	keys := make([]string, 0, len(e.Data))
	for k := range e.Data {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		out.Data = append(out.Data, views.KV{Key: k, Value: dataText(e.Data[k])})
	}
	return out
}

// dataText is an audit event's value as a person reads it: text as written (a text that
// holds a JSON document indented), numbers and yes/no as such, and objects and lists as
// indented JSON, not one escaped line. The JSON report keeps the values as recorded.
func dataText(v any) string {
	switch v := v.(type) {
	case nil:
		return "none"
	case string:
		if t := strings.TrimSpace(v); (strings.HasPrefix(t, "{") || strings.HasPrefix(t, "[")) && json.Valid([]byte(t)) {
			var doc any
			if json.Unmarshal([]byte(t), &doc) == nil {
				return indentedJSON(doc)
			}
		}
		return v
	case bool:
		if v {
			return "yes"
		}
		return "no"
	}
	return indentedJSON(v)
}

// indentedJSON is v as JSON indented by two spaces, with <, > and & as written (the
// page escapes them).
func indentedJSON(v any) string {
	var b strings.Builder
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	if err := enc.Encode(v); err != nil {
		return fmt.Sprint(v)
	}
	return strings.TrimSuffix(b.String(), "\n")
}
