package handlers

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"sort"
	"strconv"
	"time"

	"github.com/labstack/echo/v4"

	"gantry/handlers/render"
	"gantry/models/audit"
	"gantry/models/pages"
	"gantry/models/review"
	"gantry/models/run"
	"gantry/models/timeline"
	"gantry/models/workspace"
	"gantry/views"
	"gantry/views/paths"
)

// RunGetter reads one run the reader may see (run.Reads): the API's run, its event
// stream.
type RunGetter interface {
	Get(ctx context.Context, id string) (run.Run, error)
}

// RunService is what the run page's stream reads of runs beside its read model
// (run.Reads): the live log's chunks.
type RunService interface {
	// LogChunks reads the live log of a phase of run id after chunk after.
	LogChunks(ctx context.Context, id string, phase run.JobKind, after, limit int) ([]run.LogChunk, error)
}

// RunPages reads the run page (pages.Runs): all of it, or the part that moves while
// the run does, read no further when the page shows that version already.
type RunPages interface {
	Page(ctx context.Context, id string) (pages.RunPage, error)
	Live(ctx context.Context, id string, shown *pages.RunVersion) (live pages.RunLive, changed bool, err error)
	// Status is the API's run: the run and its place in the apply queue.
	Status(ctx context.Context, id string) (pages.RunStatus, error)
	// Timeline, PlanJSON and Log are the parts the run's API and downloads read alone.
	Timeline(ctx context.Context, id string) ([]timeline.Stage, error)
	PlanJSON(ctx context.Context, id string) ([]byte, error)
	Log(ctx context.Context, id string, phase run.JobKind) ([]byte, error)
}

// InboxPages reads the personal inbox page (pages.Inbox).
type InboxPages interface {
	Page(ctx context.Context, q pages.InboxQuery) (pages.InboxPage, error)
}

// RunInbox counts what waits for the person (run.Inbox): the navigation's count.
type RunInbox interface {
	CountWaitingForYou(ctx context.Context) (int64, error)
}

// RunDecisions are the decisions the API takes on a run one by one (run.Decisions); the
// pages decide through their read model (pages.Reviews.Decide).
type RunDecisions interface {
	Approve(ctx context.Context, id string, in run.Approval) (run.Run, error)
	Reject(ctx context.Context, id string, ev run.Evidence, reason string) (run.Run, error)
	Override(ctx context.Context, id string, ev run.Evidence, ruleID, ruleVersion, reason string) (run.Run, error)
	Cancel(ctx context.Context, id string, c run.Cancellation) (run.Run, error)
}

// RunChanges delivers a signal whenever a run moves (runID "": any run of the
// organization; SubscribeWorkspace: any run of a workspace), or when a chunk of its live
// log was stored.
type RunChanges interface {
	Subscribe(orgID, runID string) (<-chan struct{}, func())
	SubscribeWorkspace(orgID, workspaceID string) (<-chan struct{}, func())
	SubscribeLog(orgID, runID string) (<-chan struct{}, func())
}

// Runs serves the run page, its decisions, its live stream and the personal inbox
// (inbox.go).
type Runs struct {
	// Pages reads the run page's read model (models/pages).
	Pages RunPages
	Runs  RunService
	Inbox RunInbox
	// InboxPages reads the personal inbox (pages.Inbox).
	InboxPages InboxPages
	Reviews    ReviewPages
	Changes    RunChanges
	// Heartbeat keeps idle live streams open through proxies.
	Heartbeat time.Duration
}

// Register adds the run routes to g.
func (h Runs) Register(g *echo.Group) {
	g.GET(paths.RouteRun, h.show)
	g.GET(paths.RouteRunEvents, h.events)
	g.GET(paths.RouteInboxEvents, h.inboxEvents)
	g.GET(paths.RouteRun+"/plan.json", h.planJSON)
	g.GET(paths.RouteRun+"/plan.txt", h.planText)
	g.GET(paths.RouteRunReview, h.review)
	g.GET(paths.RouteRunReviewPart, h.reviewSection)
	g.GET(paths.RouteRun+"/cancel", h.confirmCancel)
	g.POST(paths.RouteRunAction, h.decide)
	g.GET(paths.Approvals(), h.approvals)
}

func (h Runs) show(c echo.Context) error {
	ctx := c.Request().Context()
	page, err := h.Pages.Page(ctx, c.Param("id"))
	if err != nil {
		return err
	}
	r, ws := page.Run, page.Workspace
	p := views.RunProps{ID: r.ID, Label: r.Label(), WorkspaceID: ws.ID, WorkspaceName: ws.Name, Environment: ws.EnvironmentName,
		Template: r.TemplateName, Version: r.TemplateVersion, Kind: kindOf(r.Kind), Simulated: r.Simulated, Runner: r.Runner,
		RequestedBy: r.RequestedByName, CreatedAt: r.CreatedAt, Note: noteProps(r), Inputs: inputsKV(r.Inputs), Live: liveProps(page.RunLive),
		Origin: originProps(page.Origin, ws)}
	if phase, ok := r.State.RunningPhase(); ok {
		p.LiveLog.Phase = string(phase)
	}
	// The page's one stream is the run's: it carries the navigation's count too.
	c.SetRequest(c.Request().WithContext(views.WithStream(ctx, paths.RunEventsSince(r.ID, p.Live.Version))))
	return render.Page(c, http.StatusOK, views.RunPage(p))
}

// liveProps is the part of the run page that changes while the run moves.
func liveProps(l pages.RunLive) views.RunLiveProps {
	r, perms := l.Run, l.Permissions
	p := views.RunLiveProps{ID: r.ID, Version: r.UpdatedAt.UnixNano(), State: runState(r), StateReason: stateReason(r),
		Ending: string(r.Ending), EndingWords: r.Ending.Words(), Simulated: r.Simulated, PlanDigest: r.PlanDigest, ConfigDigest: r.ConfigDigest, ModuleDigest: r.ModuleDigest,
		HasPlanJSON: r.PlanJSONArtifactID != nil, Kind: string(r.Kind), Decision: decisionProps(r, perms, nil, nil),
		Risk: riskView(r, perms), PolicyOutcome: outcomeOf(r.PolicyOutcome), CanCancel: perms.Cancel.Allowed(), StopsApply: r.State == run.Running, CanRecover: perms.Recover.Allowed(),
		Timeline: stageRows(r.ID, l.Stages), Summary: planSummary(r), Outputs: runOutputs(r.Outputs), Waiting: executorWait(l.Wait),
		StateNote: l.StateNote, Queue: queueView(l.Queue), PlanLog: l.Logs.Plan, ApplyLog: l.Logs.Apply, VerifyLog: l.Logs.Verify}
	p.Block = blockView(r, l.Block, perms, false)
	if r.BreakglassWindowID != nil {
		p.WindowID = *r.BreakglassWindowID
	}
	if r.Kind == run.KindDrift && r.Drift != nil {
		v := driftView(r)
		p.Drift = &v
	}
	if r.Cost != nil {
		p.CostDelta = review.SignedMoney(r.Cost.Delta)
	}
	for _, ev := range l.History {
		p.History = append(p.History, views.HistoryRow{At: ev.OccurredAt, Actor: ev.ActorName, Action: audit.ActionLabel(ev.Action), Code: ev.Action,
			Detail: reasonOf(ev)})
	}
	return p
}

// queueView is q in words (nil: the run does not wait to apply).
func queueView(q *run.Queue) *views.QueueView {
	if q == nil {
		return nil
	}
	v := &views.QueueView{Position: q.Position, Waiting: q.Waiting}
	if h := q.Holder; q.Held() {
		v.HolderID, v.HolderLabel, v.HolderPhase, v.Outlook = h.RunID, h.Label(), h.Phase.Words(), h.Phase.Outlook()
	}
	return v
}

// stageRows are the run's gate timeline as its page draws it; the review stage links to
// the review page.
func stageRows(runID string, stages []timeline.Stage) []views.StageRow {
	rows := make([]views.StageRow, 0, len(stages))
	for _, s := range stages {
		row := views.StageRow{Name: s.Name, Status: string(s.Status), Label: s.Status.Label(), At: s.At, Actor: s.Actor, Detail: s.Detail, Mark: s.Mark}
		if s.Review {
			row.Link = paths.RunReview(runID)
		}
		rows = append(rows, row)
	}
	return rows
}

// planSummary counts what run r's plan does; a drift check's refresh-only plan changes
// nothing: what it found is the drift its page shows.
func planSummary(r run.Run) []views.KV {
	switch {
	case r.PlanDigest == "":
		return nil
	case r.Kind == run.KindDrift:
		drifted := 0
		if r.Drift != nil {
			drifted = len(r.Drift.Resources)
		}
		return []views.KV{{Key: "drifted resources", Value: fmt.Sprint(drifted)}, {Key: "to change", Value: "0 (refresh-only)"}}
	}
	s := r.PlanSummary
	return []views.KV{{Key: "to add", Value: fmt.Sprint(s.Create)}, {Key: "to change in place", Value: fmt.Sprint(s.Update)},
		{Key: "to replace", Value: fmt.Sprint(s.Replace)}, {Key: "to destroy", Value: fmt.Sprint(s.Delete)}, {Key: "unchanged", Value: fmt.Sprint(s.NoOp)}}
}

// stateReason is the reason beside the run's state, unless it is the risk sentence the
// page's summary already says (a run waiting for a decision): one sentence of risk.
func stateReason(r run.Run) string {
	if r.StateReason == r.RiskReason {
		return ""
	}
	return r.StateReason
}

func reasonOf(ev audit.Event) string {
	var d struct {
		Reason string `json:"reason"`
	}
	_ = json.Unmarshal(ev.Data, &d)
	return d.Reason
}

func inputsKV(raw json.RawMessage) []views.KV {
	var m map[string]any
	_ = json.Unmarshal(raw, &m)
	out := make([]views.KV, 0, len(m))
	for k, v := range m {
		out = append(out, views.KV{Key: k, Value: fmt.Sprint(v)})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Key < out[j].Key })
	return out
}

func (h Runs) planJSON(c echo.Context) error {
	body, err := h.Pages.PlanJSON(c.Request().Context(), c.Param("id"))
	if err != nil {
		return err
	}
	return c.Blob(http.StatusOK, echo.MIMEApplicationJSON, body)
}

// runRow is run r of workspace ws as a list shows it.
func runRow(r run.Run, ws workspace.View) views.RunRow {
	row := views.RunRow{ID: r.ID, Label: r.Label(), Workspace: ws.Name, Environment: ws.EnvironmentName,
		Template: r.TemplateName, Kind: kindOf(r.Kind), State: runState(r), RequestedBy: r.RequestedByName,
		CreatedAt: r.CreatedAt, Simulated: r.Simulated, Approver: string(run.RequiredApproverOf(r)), Note: noteProps(r)}
	if r.RiskClass != nil {
		row.Risk = strconv.Itoa(*r.RiskClass)
	}
	return row
}
