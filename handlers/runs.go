package handlers

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/labstack/echo/v4"

	"gantry/handlers/render"
	"gantry/models/audit"
	"gantry/models/errs"
	"gantry/models/review"
	"gantry/models/run"
	"gantry/models/timeline"
	"gantry/models/workspace"
	"gantry/views"
	"gantry/views/paths"
)

// RunService is what the run pages read of runs (run.Reads).
type RunService interface {
	Get(ctx context.Context, id string) (run.Run, error)
	History(ctx context.Context, r run.Run) ([]audit.Event, error)
	// Gates reads the plan gates the timeline shows (policy evaluation, overrides).
	Gates(ctx context.Context, r run.Run) (run.Gates, error)
	Artifact(ctx context.Context, r run.Run, id *string) ([]byte, error)
	// LogChunks reads the live log of a phase of run id after chunk after.
	LogChunks(ctx context.Context, id string, phase run.JobKind, after, limit int) ([]run.LogChunk, error)
	// Clock is the database clock (escalations are judged by it).
	Clock(ctx context.Context) (time.Time, error)
}

// RunInbox is the personal inbox (run.Inbox).
type RunInbox interface {
	// Inbox is one page of the personal inbox's lists: what the person may decide now
	// (decides), or what waits for others; WaitingForYou its first list's first runs.
	Inbox(ctx context.Context, decides bool, q run.InboxQuery) (run.InboxPage, error)
	WaitingForYou(ctx context.Context, after *run.InboxCursor, limit int) ([]run.InboxEntry, error)
	CountWaitingForYou(ctx context.Context) (int64, error)
}

// RunDecisions are what a person may decide on a run, and what they may decide now
// (run.Decisions).
type RunDecisions interface {
	Approve(ctx context.Context, id string, in run.Approval) (run.Run, error)
	Reject(ctx context.Context, id string, ev run.Evidence, reason string) (run.Run, error)
	Override(ctx context.Context, id string, ev run.Evidence, ruleID, ruleVersion, reason string) (run.Run, error)
	Cancel(ctx context.Context, id, reason string) (run.Run, error)
	Recover(ctx context.Context, id, reason string) (run.Run, error)
	PlanAgain(ctx context.Context, id string) (run.Run, error)
	// Permissions says what the person may do to the run now (the only source of the
	// controls a page shows).
	Permissions(ctx context.Context, r run.Run) (run.Permissions, error)
}

// WorkspaceReader reads workspaces.
type WorkspaceReader interface {
	Get(ctx context.Context, id string) (workspace.View, error)
	// Views reads several at once (those the reader may see).
	Views(ctx context.Context, ids []string) (map[string]workspace.View, error)
}

// RunChanges delivers a signal whenever a run moves (runID "": any run of the
// organization), or when a chunk of its live log was stored.
type RunChanges interface {
	Subscribe(orgID, runID string) (<-chan struct{}, func())
	SubscribeLog(orgID, runID string) (<-chan struct{}, func())
}

// Runs serves the run page, its decisions, its live stream and the personal inbox
// (inbox.go).
type Runs struct {
	Runs       RunService
	Decisions  RunDecisions
	Inbox      RunInbox
	Reviews    ReviewService
	Rollbacks  RollbackReviews
	Workspaces WorkspaceReader
	// Names names what the inbox filters by.
	Names   ListNames
	Changes RunChanges
	// Executors tells a run waiting for its executor's preparation how far it has come
	// (nil: every executor is ready at once).
	Executors ExecutorWaits
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
	r, err := h.Runs.Get(ctx, c.Param("id"))
	if err != nil {
		return err
	}
	ws, err := h.Workspaces.Get(ctx, r.WorkspaceID)
	if err != nil {
		return err
	}
	live, err := h.live(ctx, r)
	if err != nil {
		return err
	}
	p := views.RunProps{ID: r.ID, Label: r.Label(), WorkspaceID: ws.ID, WorkspaceName: ws.Name, Environment: ws.EnvironmentName,
		Template: r.TemplateName, Version: r.TemplateVersion, Kind: string(r.Kind), Simulated: r.Simulated, Runner: r.Runner,
		RequestedBy: r.RequestedByName, CreatedAt: r.CreatedAt, Inputs: inputsKV(r.Inputs), Live: live}
	if phase, ok := r.State.RunningPhase(); ok {
		p.LiveLog.Phase = string(phase)
	}
	// The page's one stream is the run's: it carries the navigation's count too.
	c.SetRequest(c.Request().WithContext(views.WithStream(ctx, paths.RunEventsSince(r.ID, live.Version))))
	return render.Page(c, http.StatusOK, views.RunPage(p))
}

// live builds the part of the run page that changes while the run moves.
func (h Runs) live(ctx context.Context, r run.Run) (views.RunLiveProps, error) {
	events, err := h.Runs.History(ctx, r)
	if err != nil {
		return views.RunLiveProps{}, err
	}
	perms, err := h.Decisions.Permissions(ctx, r)
	if err != nil {
		return views.RunLiveProps{}, err
	}
	p := views.RunLiveProps{ID: r.ID, Version: r.UpdatedAt.UnixNano(), State: runState(r), StateReason: stateReason(r),
		Simulated: r.Simulated, PlanDigest: r.PlanDigest, ConfigDigest: r.ConfigDigest, ModuleDigest: r.ModuleDigest,
		HasPlanJSON: r.PlanJSONArtifactID != nil}
	p.Decision = decisionProps(r, perms, nil)
	p.Kind = string(r.Kind)
	if r.BreakglassWindowID != nil {
		p.WindowID = *r.BreakglassWindowID
	}
	if r.Kind == run.KindDrift && r.Drift != nil {
		v := driftView(r)
		p.Drift = &v
	}
	p.Risk = riskView(r, perms)
	p.PolicyOutcome = r.PolicyOutcome
	if r.Cost != nil {
		p.CostDelta = review.SignedMoney(r.Cost.Delta)
	}
	p.CanCancel = perms.Cancel.Allowed()
	p.CanRecover = perms.Recover.Allowed()
	gates, err := h.Runs.Gates(ctx, r)
	if err != nil {
		return views.RunLiveProps{}, err
	}
	for _, s := range timeline.Of(r, events, gates) {
		row := views.StageRow{Name: s.Name, Status: string(s.Status), Label: s.Status.Label(), At: s.At, Actor: s.Actor, Detail: s.Detail}
		if s.Review {
			row.Link = paths.RunReview(r.ID)
		}
		p.Timeline = append(p.Timeline, row)
	}
	switch {
	case r.PlanDigest != "" && r.Kind == run.KindDrift:
		// A refresh-only plan changes nothing: what it found is the drift above.
		drifted := 0
		if r.Drift != nil {
			drifted = len(r.Drift.Resources)
		}
		p.Summary = []views.KV{{Key: "drifted resources", Value: fmt.Sprint(drifted)}, {Key: "to change", Value: "0 (refresh-only)"}}
	case r.PlanDigest != "":
		s := r.PlanSummary
		p.Summary = []views.KV{{Key: "to add", Value: fmt.Sprint(s.Create)}, {Key: "to change in place", Value: fmt.Sprint(s.Update)},
			{Key: "to replace", Value: fmt.Sprint(s.Replace)}, {Key: "to destroy", Value: fmt.Sprint(s.Delete)}, {Key: "unchanged", Value: fmt.Sprint(s.NoOp)}}
	}
	p.Outputs = outputsKV(r.Outputs)
	p.Waiting = h.waiting(r)
	if r.State == run.Approved && r.ApprovalExpiresAt != nil {
		p.StateNote = fmt.Sprintf("The apply starts by itself and must begin by %s (within %d minutes of the approval); otherwise the approval expires.",
			r.ApprovalExpiresAt.UTC().Format("15:04:05 UTC"), int(run.ApprovalValidity.Minutes()))
	}
	for _, l := range []struct {
		id  *string
		dst *string
	}{{r.PlanLogArtifactID, &p.PlanLog}, {r.ApplyLogArtifactID, &p.ApplyLog}, {r.VerifyLogArtifactID, &p.VerifyLog}} {
		if l.id == nil {
			continue
		}
		body, err := h.Runs.Artifact(ctx, r, l.id)
		if err != nil {
			return views.RunLiveProps{}, err
		}
		*l.dst = string(body)
	}
	for _, ev := range events {
		p.History = append(p.History, views.HistoryRow{At: ev.OccurredAt, Actor: ev.ActorName, Action: ev.Action, Detail: reasonOf(ev)})
	}
	return p, nil
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

// outputsKV shows outputs as `tofu output` would, with sensitive values masked.
func outputsKV(raw json.RawMessage) []views.KV {
	var m map[string]struct {
		Value     json.RawMessage `json:"value"`
		Sensitive bool            `json:"sensitive"`
	}
	_ = json.Unmarshal(raw, &m)
	out := make([]views.KV, 0, len(m))
	for k, v := range m {
		val := strings.Trim(string(v.Value), `"`)
		if v.Sensitive {
			val = "(sensitive)"
		}
		out = append(out, views.KV{Key: k, Value: val})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Key < out[j].Key })
	return out
}

func (h Runs) planJSON(c echo.Context) error {
	return h.artifact(c, func(r run.Run) *string { return r.PlanJSONArtifactID }, echo.MIMEApplicationJSON)
}

// artifact serves one artifact of the run named in the path, as contentType.
func (h Runs) artifact(c echo.Context, which func(run.Run) *string, contentType string) error {
	ctx := c.Request().Context()
	r, err := h.Runs.Get(ctx, c.Param("id"))
	if err != nil {
		return err
	}
	body, err := h.Runs.Artifact(ctx, r, which(r))
	if err != nil {
		return err
	}
	return c.Blob(http.StatusOK, contentType, body)
}

func (h Runs) rows(ctx context.Context, runs []run.Run) ([]views.RunRow, error) {
	return runRows(ctx, h.Workspaces, runs)
}

func runRows(ctx context.Context, wss WorkspaceReader, runs []run.Run) ([]views.RunRow, error) {
	ids := make([]string, 0, len(runs))
	for _, r := range runs {
		ids = append(ids, r.WorkspaceID)
	}
	byID, err := wss.Views(ctx, ids)
	if err != nil {
		return nil, err
	}
	rows := make([]views.RunRow, 0, len(runs))
	for _, r := range runs {
		ws, ok := byID[r.WorkspaceID]
		if !ok {
			// The run service showed the run, so its workspace is visible too: a
			// workspace missing here is a fault, not a hidden one.
			return nil, fmt.Errorf("run %s: workspace %s: %w", r.ID, r.WorkspaceID, errs.ErrNotFound)
		}
		rows = append(rows, runRow(r, ws))
	}
	return rows, nil
}

// runRow is run r of workspace ws as a list shows it.
func runRow(r run.Run, ws workspace.View) views.RunRow {
	row := views.RunRow{ID: r.ID, Label: r.Label(), Workspace: ws.Name, Environment: ws.EnvironmentName,
		Template: r.TemplateName, Kind: string(r.Kind), State: runState(r), RequestedBy: r.RequestedByName,
		CreatedAt: r.CreatedAt, Simulated: r.Simulated, Approver: string(run.RequiredApproverOf(r))}
	if r.RiskClass != nil {
		row.Risk = strconv.Itoa(*r.RiskClass)
	}
	return row
}

// waitingPhase names the phase a run in state s would start next: the phases whose jobs
// wait for an executor being prepared.
var waitingPhase = map[run.State]string{run.Queued: "plan", run.Approved: "apply", run.Verifying: "verification"}

// waiting is what the run's next phase waits for, or nil.
func (h Runs) waiting(r run.Run) *views.ExecutorWait {
	phase, ok := waitingPhase[r.State]
	if !ok || h.Executors == nil {
		return nil
	}
	if p, waiting := h.Executors.Waiting(r.Runner); waiting {
		return executorWait(p, phase)
	}
	return nil
}
