package handlers

import (
	"encoding/json"
	"errors"
	"io"
	"strings"
	"time"

	"github.com/labstack/echo/v4"

	"gantry/handlers/openapi"
	"gantry/models/errs"
	"gantry/models/run"
	"gantry/views/paths"
)

// API is the JSON API v1 (docs/api.md): every browser action of requests, runs,
// decisions, workspaces, the catalog, policies, the approval matrix, group rules and
// the audit log, through the same services as the pages and so the same checks. Every route is
// registered through an openapi.Spec, which is what /api/v1/openapi.json describes.
// Errors are the central error handler's RFC 9457 problem documents.
type API struct {
	// Requests is the request pages' handler: its read model and services are the
	// API's too. Catalog reads templates; Environments are those the caller may
	// request runs in.
	Requests     Requests
	Catalog      CatalogReader
	Environments EnvironmentChooser
	// Pages reads what the run page reads (models/pages): its timeline, plan and logs.
	Pages     RunPages
	Runs      RunGetter
	Decisions RunDecisions
	Reviews   ReviewPages
	Search    RunSearcher
	Reports   EvidenceReports
	// Workspaces lists and reads workspaces.
	Workspaces WorkspaceLister
	// WorkspacePages reads a workspace's state as its page does.
	WorkspacePages WorkspacePages
	Policies       PolicyChanges
	// PolicyPages reads the policies as the policies page does.
	PolicyPages PolicyPages
	Matrix      MatrixStore
	// WorkspaceChanges asks for drift checks, corrections and rollbacks.
	WorkspaceChanges WorkspaceChanges
	// Archiver archives workspaces that hold nothing.
	Archiver WorkspaceArchiver
	// GroupRules lists, adds, removes and previews the organization's group rules.
	GroupRules GroupRuleAdmin
	// Changes signals run moves for the run event stream.
	Changes RunChanges
	// Heartbeat is the interval of SSE comments on the run event stream.
	Heartbeat time.Duration
}

// Register adds the API's routes to g, documented in spec.
func (h API) Register(g *echo.Group, spec *openapi.Spec) {
	h.registerCatalog(g, spec)
	h.registerRuns(g, spec)
	h.registerWorkspaces(g, spec)
	h.registerGovernance(g, spec)
	h.registerGroupRules(g, spec)
	h.registerChanges(g, spec)
}

// bindJSON reads a JSON request body into dst: anything but one JSON object of dst's
// shape (unknown fields included) is a 400 naming what is wrong.
func bindJSON(c echo.Context, dst any) error {
	ct := c.Request().Header.Get(echo.HeaderContentType)
	if ct != "" && !strings.HasPrefix(ct, echo.MIMEApplicationJSON) {
		return errs.Explain(errs.ErrBadRequest, "Send the body as JSON (Content-Type: application/json).")
	}
	dec := json.NewDecoder(io.LimitReader(c.Request().Body, 1<<20))
	dec.DisallowUnknownFields()
	if err := dec.Decode(dst); err != nil {
		if errors.Is(err, io.EOF) {
			return errs.Explain(errs.ErrBadRequest, "The body is empty: send a JSON object.")
		}
		return errs.Explain(errs.ErrBadRequest, "The body is not the JSON this call takes: "+err.Error()+".")
	}
	if dec.More() {
		return errs.Explain(errs.ErrBadRequest, "The body holds more than one JSON value.")
	}
	return nil
}

// apiRun is a run as the API shows it.
// apiEnding is a run's ending code: one of run.Endings(), or "".
type apiEnding string

// OpenAPIEnum lists the codes, from the rule that defines them.
func (apiEnding) OpenAPIEnum() []string {
	out := []string{""}
	for _, e := range run.Endings() {
		out = append(out, string(e))
	}
	return out
}

type apiRun struct {
	ID            string `json:"id"`
	Label         string `json:"label" doc:"the run's number in its workspace, as in billing-prod #3"`
	Number        int    `json:"number"`
	WorkspaceID   string `json:"workspace_id"`
	EnvironmentID string `json:"environment_id"`
	Kind          string `json:"kind" doc:"apply, plan_only, destroy, drift_check or codify"`
	State         string `json:"state"`
	StateReason   string `json:"state_reason"`
	// Finished: nothing more will happen to the run (a terminal state or a hard policy
	// block).
	Finished        bool        `json:"finished"`
	Ending          apiEnding   `json:"ending" doc:"why the run ended, one code per way it can end (docs/api.md, \"Endings\"); empty while it has not ended, and for runs that ended before endings were coded in a way their state alone does not tell"`
	Template        string      `json:"template"`
	TemplateVersion string      `json:"template_version"`
	RequestedBy     string      `json:"requested_by"`
	RequestReason   string      `json:"request_reason" doc:"why the requester asked for the run, as they wrote it (free text, never decided on; empty when none)"`
	RequestTicket   string      `json:"request_ticket" doc:"the ticket the request answers, as the requester wrote it (empty when none)"`
	Runner          string      `json:"runner"`
	Simulated       bool        `json:"simulated" doc:"planned and applied by the MockTofuRunner: nothing real changed"`
	PlanRevision    int         `json:"plan_revision"`
	PlanDigest      string      `json:"plan_digest"`
	ConfigDigest    string      `json:"config_digest"`
	Changes         run.Summary `json:"changes"`
	RiskClass       *int        `json:"risk_class"`
	RiskLevel       string      `json:"risk_level"`
	RequiredDecider string      `json:"required_approver" doc:"none, system, a role, or environment_owners"`
	FourEyes        bool        `json:"four_eyes"`
	Elevated        bool        `json:"elevated"`
	PolicyOutcome   string      `json:"policy_outcome"`
	MonthlyCost     *apiCost    `json:"monthly_cost"`
	// DecisionDeadline is when a waiting run expires.
	DecisionDeadline   *time.Time  `json:"decision_deadline"`
	ApprovedBy         string      `json:"approved_by"`
	ApprovedPlanDigest string      `json:"approved_plan_digest"`
	CreatedAt          time.Time   `json:"created_at"`
	UpdatedAt          time.Time   `json:"updated_at"`
	Links              apiRunLinks `json:"links"`
	// Queue is only in GET /api/v1/runs/{id}, and only while the run is approved and
	// waiting to apply.
	Queue *apiQueue `json:"queue,omitempty" doc:"an approved run's place among the runs of its workspace waiting to apply, and what holds the workspace (docs/api.md, \"The apply queue\"); only in GET /api/v1/runs/{id}, only while the run is approved"`
}

// apiQueue is where an approved run stands in its workspace's apply queue.
type apiQueue struct {
	Position int             `json:"position" doc:"1: next to apply (once the holder lets the workspace go)"`
	Waiting  int             `json:"waiting" doc:"the runs waiting to apply, this one included, the holder not counted"`
	Holder   *apiQueueHolder `json:"holder" doc:"what the run waits behind; null: nothing holds the workspace, the apply begins when its job next asks"`
}

// apiQueueHolder is the run holding a workspace's apply queue, and its phase.
type apiQueueHolder struct {
	RunID  string         `json:"run_id"`
	Number int            `json:"number"`
	Label  string         `json:"label" doc:"as the run's own label, #3"`
	Phase  apiHolderPhase `json:"phase" doc:"what the holder is doing"`
}

// apiHolderPhase is a queue holder's phase: one of run.HolderPhases().
type apiHolderPhase string

// OpenAPIEnum lists the phases, from the rule that defines them.
func (apiHolderPhase) OpenAPIEnum() []string {
	var out []string
	for _, p := range run.HolderPhases() {
		out = append(out, string(p))
	}
	return out
}

// toAPIQueue is q as the API shows it (nil: not waiting to apply).
func toAPIQueue(q *run.Queue) *apiQueue {
	if q == nil {
		return nil
	}
	out := &apiQueue{Position: q.Position, Waiting: q.Waiting}
	if h := q.Holder; q.Held() {
		out.Holder = &apiQueueHolder{RunID: h.RunID, Number: h.Number, Label: h.Label(), Phase: apiHolderPhase(h.Phase)}
	}
	return out
}

type apiCost struct {
	Before float64 `json:"before"`
	After  float64 `json:"after"`
	Delta  float64 `json:"delta"`
}

// apiRunLinks are where to look next: the API's run (to poll), its event stream (SSE),
// its review and evidence, and the pages a person opens.
type apiRunLinks struct {
	Self     string `json:"self"`
	Events   string `json:"events"`
	Review   string `json:"review"`
	Evidence string `json:"evidence"`
	Page     string `json:"page"`
	Decide   string `json:"decide_page"`
}

func toAPIRun(r run.Run) apiRun {
	out := apiRun{ID: r.ID, Label: r.Label(), Number: r.Number, WorkspaceID: r.WorkspaceID, EnvironmentID: r.EnvironmentID,
		Kind: string(r.Kind), State: string(r.State), StateReason: r.StateReason, Finished: r.Finished(), Ending: apiEnding(r.Ending),
		Template: r.TemplateName, TemplateVersion: r.TemplateVersion, RequestedBy: r.RequestedByName, Runner: r.Runner,
		RequestReason: r.RequestReason, RequestTicket: r.RequestTicket, Simulated: r.Simulated, PlanRevision: r.PlanRevision, PlanDigest: r.PlanDigest, ConfigDigest: r.ConfigDigest,
		Changes: r.PlanSummary, RiskClass: r.RiskClass, RiskLevel: r.RiskLevel, RequiredDecider: r.RequiredApprover,
		FourEyes: r.FourEyes, Elevated: r.Elevated, PolicyOutcome: r.PolicyOutcome, DecisionDeadline: utcPtr(r.DecisionDeadline),
		ApprovedBy: r.ApprovedByName, ApprovedPlanDigest: r.ApprovedPlanDigest, CreatedAt: utc(r.CreatedAt), UpdatedAt: utc(r.UpdatedAt),
		Links: apiRunLinks{Self: paths.APIRun(r.ID), Events: paths.APIRunEvents(r.ID), Review: paths.APIRunReview(r.ID),
			Evidence: paths.APIRunEvidence(r.ID), Page: paths.Run(r.ID), Decide: paths.RunReview(r.ID)}}
	if r.Cost != nil {
		out.MonthlyCost = &apiCost{Before: r.Cost.Before, After: r.Cost.After, Delta: r.Cost.Delta}
	}
	return out
}

// invalid is a 422 with msg at field.
func invalid(field, msg string) error {
	v := &errs.Validation{}
	v.Add(field, msg)
	return v
}

// utc is t in UTC (the API answers in UTC); utcPtr keeps nil.
func utc(t time.Time) time.Time { return t.UTC() }

func utcPtr(t *time.Time) *time.Time {
	if t == nil {
		return nil
	}
	u := t.UTC()
	return &u
}
