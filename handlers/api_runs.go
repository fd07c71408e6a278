package handlers

import (
	"cmp"
	"encoding/json"
	"net/http"
	"time"

	"github.com/labstack/echo/v4"

	"gantry/handlers/openapi"
	"gantry/models/authz"
	"gantry/models/errs"
	"gantry/models/listing"
	"gantry/models/pages"
	"gantry/models/run"
	"gantry/views/paths"
)

func (h API) registerRuns(g *echo.Group, spec *openapi.Spec) {
	list := runListParams()
	spec.Route(g, openapi.Op{Method: http.MethodGet, Path: paths.APIRuns(), ID: "listRuns", Tag: "runs", Scope: "read",
		Summary: "The runs the caller may see, newest first, filtered and paged by keyset cursors", Query: list, Response: apiRunList{}}, h.runs)
	spec.Route(g, openapi.Op{Method: http.MethodGet, Path: paths.RouteAPIRun, ID: "getRun", Tag: "runs", Scope: "read",
		Summary: "One run: poll it until finished; an approved run says where it stands in its workspace's apply queue", Response: apiRun{}}, h.run)
	spec.Route(g, openapi.Op{Method: http.MethodGet, Path: paths.RouteAPIRun + "/events", ID: "streamRun", Tag: "runs", Scope: "read",
		Summary: "The run as server-sent events: a run event now and at every move, until it is finished", ContentType: "text/event-stream"}, h.events)
	spec.Route(g, openapi.Op{Method: http.MethodGet, Path: paths.RouteAPIRun + "/plan", ID: "getRunPlan", Tag: "runs", Scope: "read",
		Summary: "The plan as OpenTofu's JSON (sensitive values as OpenTofu masks them)", ContentType: "application/json"}, h.plan)
	spec.Route(g, openapi.Op{Method: http.MethodGet, Path: paths.RouteAPIRun + "/logs", ID: "getRunLogs", Tag: "runs", Scope: "read",
		Summary: "A phase's log as text (the live part while it runs)", ContentType: "text/plain",
		Query: []openapi.Param{{Name: "phase", Enum: []string{string(run.JobPlan), string(run.JobApply), string(run.JobVerify)}, Description: "plan by default"}}}, h.logs)
	spec.Route(g, openapi.Op{Method: http.MethodGet, Path: paths.RouteAPIRun + "/timeline", ID: "getRunTimeline", Tag: "runs", Scope: "read",
		Summary: "The gates the run went through, as on its page", Response: apiTimeline{}}, h.timeline)
	spec.Route(g, openapi.Op{Method: http.MethodGet, Path: paths.RouteAPIRun + "/review", ID: "getRunReview", Tag: "decisions", Scope: "read",
		Summary:  "What a decision binds to: the evidence to send back, the changes, policy results, cost, who decides and what the caller may do",
		Response: apiReview{}}, h.review)
	spec.Route(g, openapi.Op{Method: http.MethodGet, Path: paths.RouteAPIRun + "/evidence", ID: "getRunEvidence", Tag: "runs", Scope: "read",
		Summary: "The run's evidence report: bound evidence, decisions, apply, state version, verification, attestations", Response: evidenceJSON{}}, h.evidence)
	spec.Route(g, openapi.Op{Method: http.MethodPost, Path: paths.RouteAPIRun + "/approve", ID: "approveRun", Tag: "decisions", Scope: "decide",
		Summary: "Approve the plan the evidence names (never whatever the run carries now); a token never approves a risk-3 run",
		Body:    apiApproval{}, Response: apiRun{}, RateLimited: true}, h.approve)
	spec.Route(g, openapi.Op{Method: http.MethodPost, Path: paths.RouteAPIRun + "/reject", ID: "rejectRun", Tag: "decisions", Scope: "decide",
		Summary: "Reject the plan the evidence names", Body: apiRejection{}, Response: apiRun{}, RateLimited: true}, h.reject)
	spec.Route(g, openapi.Op{Method: http.MethodPost, Path: paths.RouteAPIRun + "/override", ID: "overrideRule", Tag: "decisions", Scope: "admin",
		Summary: "Override a soft-mandatory policy failure of the plan the evidence names", Body: apiOverride{}, Response: apiRun{},
		RateLimited: true}, h.override)
	spec.Route(g, openapi.Op{Method: http.MethodPost, Path: paths.RouteAPIRun + "/cancel", ID: "cancelRun", Tag: "runs", Scope: "plan",
		Summary: "Cancel a run; one that is applying is stopped and ends APPLY_INTERRUPTED (confirm and a reason needed)", Body: apiCancel{}, Response: apiRun{}}, h.cancel)
	spec.Route(g, openapi.Op{Method: http.MethodPost, Path: paths.RouteAPIRun + "/plan-again", ID: "planRunAgain", Tag: "runs", Scope: "plan or apply",
		Summary: "Plan a stale, expired or failed run again as a new run", Status: http.StatusCreated, Response: apiRun{}}, h.planAgain)
}

// runListParams are the query parameters of the run list.
func runListParams() []openapi.Param {
	states := make([]string, 0, len(run.States))
	for _, s := range run.States {
		states = append(states, string(s))
	}
	return []openapi.Param{
		{Name: "q", Description: "a workspace's name, a run such as billing-prod #3, a template, a requester or a run id"},
		{Name: "state", Enum: states}, {Name: "environment_id"}, {Name: "template"},
		{Name: "kind", Enum: []string{string(run.KindApply), string(run.KindPlanOnly), string(run.KindDestroy), string(run.KindDrift), string(run.KindCodify)}},
		{Name: "mine", Type: "boolean", Description: "only the runs the caller requested"},
		{Name: "sort", Description: "requested, template or requester; a leading - reverses"},
		{Name: "after", Description: "the next page's cursor (from next)"}, {Name: "before", Description: "the previous page's cursor (from prev)"},
		{Name: "limit", Type: "integer", Description: "1 to 200; 50 by default"}}
}

type apiRunList struct {
	Runs []apiRun `json:"runs"`
	// Total counts every run that matches.
	Total int64 `json:"total"`
	// Next and Prev are the URLs of the pages on either side (absent at the ends).
	Next string `json:"next,omitempty"`
	Prev string `json:"prev,omitempty"`
}

func (h API) runs(c echo.Context) error {
	limit, err := apiLimit(c, 50)
	if err != nil {
		return err
	}
	l, err := readList(c, paths.APIRuns(), run.SortKeys(), listing.Sort{Key: run.SortRequested, Desc: true}, limit)
	if err != nil {
		return err
	}
	if l.refused() {
		return &errs.Validation{Fields: l.errors}
	}
	q := run.ListQuery{Text: l.text, State: run.State(c.QueryParam("state")), EnvironmentID: c.QueryParam("environment_id"),
		Template: c.QueryParam("template"), Kind: run.Kind(c.QueryParam("kind")), Page: l.page}
	if q.State != "" && !q.State.Valid() {
		return invalid("state", "is not a run state")
	}
	if q.Mine, err = boolParam(c, "mine"); err != nil {
		return err
	}
	res, err := h.Search.Search(c.Request().Context(), q)
	if err != nil {
		return err
	}
	out := apiRunList{Runs: make([]apiRun, 0, len(res.Rows)), Total: res.Total}
	for _, r := range res.Rows {
		out.Runs = append(out.Runs, toAPIRun(r))
	}
	out.Next, out.Prev = pageLink(c, paths.APIRuns(), "after", res.Next), pageLink(c, paths.APIRuns(), "before", res.Prev)
	return c.JSON(http.StatusOK, out)
}

func (h API) run(c echo.Context) error {
	st, err := h.Pages.Status(c.Request().Context(), c.Param("id"))
	if err != nil {
		return err
	}
	out := toAPIRun(st.Run)
	out.Queue = toAPIQueue(st.Queue)
	return c.JSON(http.StatusOK, out)
}

// events streams the run as JSON: one "run" event now and one at every move, until
// the run is finished (then the stream ends) or the client goes away.
func (h API) events(c echo.Context) error {
	ctx := c.Request().Context()
	r, err := h.Runs.Get(ctx, c.Param("id"))
	if err != nil {
		return err
	}
	subject, _ := authz.SubjectFrom(ctx)
	changes, stop := h.Changes.Subscribe(subject.OrganizationID, r.ID)
	defer stop()
	w := c.Response()
	startStream(w)
	beat := h.Heartbeat
	if beat <= 0 {
		beat = 20 * time.Second
	}
	ticker := time.NewTicker(beat)
	defer ticker.Stop()
	version := ""
	for {
		if r.UpdatedAt.String() != version {
			version = r.UpdatedAt.String()
			body, err := json.Marshal(toAPIRun(r))
			if err != nil {
				return err
			}
			if write(w, "event: run\ndata: "+string(body)+"\n\n") != nil {
				return nil
			}
		}
		if r.Finished() || !waitForChange(ctx, w, changes, ticker.C) {
			return nil
		}
		if r, err = h.Runs.Get(ctx, r.ID); err != nil {
			return nil // the run became invisible (a grant revoked): the stream ends
		}
	}
}

func (h API) plan(c echo.Context) error {
	body, err := h.Pages.PlanJSON(c.Request().Context(), c.Param("id"))
	if err != nil {
		return err
	}
	return c.Blob(http.StatusOK, echo.MIMEApplicationJSON, body)
}

// logs answers a phase's whole stored log, or while it runs what its live log holds.
func (h API) logs(c echo.Context) error {
	body, err := h.Pages.Log(c.Request().Context(), c.Param("id"), run.JobKind(cmp.Or(c.QueryParam("phase"), string(run.JobPlan))))
	if err != nil {
		return err
	}
	return c.Blob(http.StatusOK, echo.MIMETextPlainCharsetUTF8, body)
}

type apiTimeline struct {
	Stages []apiStage `json:"stages"`
}

type apiStage struct {
	Name   string     `json:"name"`
	Status string     `json:"status" doc:"done, current, waiting, skipped, failed, …"`
	At     *time.Time `json:"at"`
	Actor  string     `json:"actor"`
	Detail string     `json:"detail"`
}

func (h API) timeline(c echo.Context) error {
	stages, err := h.Pages.Timeline(c.Request().Context(), c.Param("id"))
	if err != nil {
		return err
	}
	out := apiTimeline{Stages: []apiStage{}}
	for _, s := range stages {
		out.Stages = append(out.Stages, apiStage{Name: s.Name, Status: string(s.Status), At: utcPtr(s.At), Actor: s.Actor, Detail: s.Detail})
	}
	return c.JSON(http.StatusOK, out)
}

func (h API) evidence(c echo.Context) error {
	rep, err := h.Reports.Report(c.Request().Context(), c.Param("id"))
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, evidenceOf(rep))
}

// apiCancel is a cancel's body: cancelling a run that is applying needs confirm true and
// a reason of at least 10 characters.
type apiCancel struct {
	Reason  string `json:"reason,omitempty"`
	Confirm bool   `json:"confirm,omitempty"`
}

func (h API) cancel(c echo.Context) error {
	var body apiCancel
	if err := bindJSON(c, &body); err != nil {
		return err
	}
	r, err := h.Decisions.Cancel(c.Request().Context(), c.Param("id"), run.Cancellation{Reason: body.Reason, Confirmed: body.Confirm})
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, toAPIRun(r))
}

func (h API) planAgain(c echo.Context) error {
	out, err := h.Reviews.Decide(c.Request().Context(), c.Param("id"), pages.Decision{Action: run.ActionPlanAgain})
	if err != nil {
		return err
	}
	return h.created(c, out.Run)
}
