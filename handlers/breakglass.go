package handlers

import (
	"context"
	"fmt"
	"net/http"
	"strconv"
	"time"

	"github.com/labstack/echo/v4"

	"gantry/handlers/render"
	"gantry/models/breakglass"
	"gantry/models/errs"
	"gantry/models/run"
	"gantry/views"
	"gantry/views/paths"
)

// BreakglassService is what the manual change path's pages need (breakglass.Service).
type BreakglassService interface {
	Get(ctx context.Context, id string) (breakglass.View, error)
	Check(ctx context.Context, req breakglass.Request) error
	Request(ctx context.Context, req breakglass.Request) (breakglass.Window, error)
	Approve(ctx context.Context, id, terms string) (breakglass.Window, error)
	Reject(ctx context.Context, id, terms, reason string) (breakglass.Window, error)
	Cancel(ctx context.Context, id string) (breakglass.Window, error)
	Open(ctx context.Context, id string) (breakglass.Window, breakglass.Credentials, error)
	IssueCredentials(ctx context.Context, id string) (breakglass.Window, breakglass.Credentials, error)
	End(ctx context.Context, id string) (breakglass.Window, error)
	Codify(ctx context.Context, id string) (breakglass.Window, run.Run, error)
	Close(ctx context.Context, id, reason string) (breakglass.Window, error)
	Recent(ctx context.Context, limit int) ([]breakglass.Window, error)
}

// RunLabels names runs by their label ("#3") for the window page's links.
type RunLabels interface {
	Get(ctx context.Context, id string) (run.Run, error)
}

// Breakglass serves the manual change path: the request form on a workspace, the list
// of windows and each window's page with its decisions, credentials and codification.
type Breakglass struct {
	Windows    BreakglassService
	Workspaces WorkspaceReader
	Runs       RunLabels
}

// Register adds the break-glass routes to g.
func (h Breakglass) Register(g *echo.Group) {
	g.GET(paths.RouteWorkspaceBreakglass, h.form)
	g.POST(paths.RouteWorkspaceBreakglass, h.request)
	g.GET(paths.BreakglassWindows(), h.list)
	g.GET(paths.RouteBreakglass, h.show)
	g.POST(paths.RouteBreakglassAction, h.act)
}

// MaxWindowList bounds the list of windows.
const MaxWindowList = 200

// durations are the window lengths the form offers.
func durations() []views.DurationChoice {
	var out []views.DurationChoice
	for _, d := range breakglass.Durations {
		out = append(out, views.DurationChoice{Minutes: int(d / time.Minute), Label: durationLabel(d)})
	}
	return out
}

// durationLabel says a window's length in words.
func durationLabel(d time.Duration) string {
	switch {
	case d == time.Hour:
		return "1 hour"
	case d >= time.Hour && d%time.Hour == 0:
		return strconv.Itoa(int(d/time.Hour)) + " hours"
	}
	return strconv.Itoa(int(d/time.Minute)) + " minutes"
}

// form draws the request form; what would refuse the request whatever is typed (the
// person, the workspace) is said before anything is typed.
func (h Breakglass) form(c echo.Context) error {
	ctx := c.Request().Context()
	ws, err := workspaceToChange(ctx, h.Workspaces, c.Param("id"))
	if err != nil {
		return err
	}
	p := views.BreakglassRequestProps{WorkspaceID: ws.ID, Workspace: ws.Name, Environment: ws.EnvironmentName,
		Minutes: int(breakglass.DefaultDuration / time.Minute), Durations: durations(), ApprovalMinutes: int(run.ApprovalValidity.Minutes()),
		MinReason: breakglass.MinReasonLength, MaxReason: breakglass.MaxReasonLength}
	err = h.Windows.Check(ctx, breakglass.Request{WorkspaceID: ws.ID, Reason: "a reason long enough", Duration: breakglass.DefaultDuration})
	if v, ok := errs.AsValidation(err); ok {
		p.Errors, p.Refused = v.Fields, true
	} else if err != nil {
		return err
	}
	return render.Page(c, http.StatusOK, views.BreakglassRequest(p))
}

// request asks for the window; a refusal comes back on the form with what was typed.
func (h Breakglass) request(c echo.Context) error {
	ctx := c.Request().Context()
	ws, err := workspaceToChange(ctx, h.Workspaces, c.Param("id"))
	if err != nil {
		return err
	}
	// Absent is the default length; anything but a whole number is refused.
	minutes := formWhole(c.FormValue("duration"))
	req := breakglass.Request{WorkspaceID: ws.ID, Reason: c.FormValue("reason"), Duration: time.Duration(minutes) * time.Minute}
	w, err := h.Windows.Request(ctx, req)
	if v, ok := errs.AsValidation(err); ok {
		p := views.BreakglassRequestProps{WorkspaceID: ws.ID, Workspace: ws.Name, Environment: ws.EnvironmentName, Reason: req.Reason,
			Minutes: minutes, Durations: durations(), ApprovalMinutes: int(run.ApprovalValidity.Minutes()), Errors: v.Fields,
			MinReason: breakglass.MinReasonLength, MaxReason: breakglass.MaxReasonLength}
		_, p.Refused = v.Fields["workspace"]
		return render.Page(c, http.StatusUnprocessableEntity, views.BreakglassRequest(p))
	}
	if err != nil {
		return err
	}
	_ = render.Flash(c, "success", "Break-glass window "+w.ID+" requested: an admin other than you approves it; you then open it within "+
		strconv.Itoa(int(run.ApprovalValidity.Minutes()))+" minutes.")
	return render.Redirect(c, paths.BreakglassWindow(w.ID))
}

func (h Breakglass) list(c echo.Context) error {
	ctx := c.Request().Context()
	windows, err := h.Windows.Recent(ctx, MaxWindowList)
	if err != nil {
		return err
	}
	rows, err := windowRows(ctx, h.Workspaces, windows, time.Now())
	if err != nil {
		return err
	}
	return render.Page(c, http.StatusOK, views.WindowList(views.WindowListProps{Windows: rows, Max: MaxWindowList}))
}

// windowRows are windows in a list with their workspaces' names, clocks judged at now.
func windowRows(ctx context.Context, workspaces WorkspaceReader, windows []breakglass.Window, now time.Time) ([]views.WindowRow, error) {
	ids := make([]string, len(windows))
	for i, w := range windows {
		ids[i] = w.WorkspaceID
	}
	names, err := workspaces.Views(ctx, ids)
	if err != nil {
		return nil, err
	}
	rows := make([]views.WindowRow, 0, len(windows))
	for _, w := range windows {
		row := windowRow(w, now)
		if v, ok := names[w.WorkspaceID]; ok {
			row.Workspace, row.Environment = v.Name, v.EnvironmentName
		}
		rows = append(rows, row)
	}
	return rows, nil
}

// windowRow is a window in a list, its clock judged at now.
func windowRow(w breakglass.Window, now time.Time) views.WindowRow {
	return views.WindowRow{ID: w.ID, WorkspaceID: w.WorkspaceID, StateLabel: w.State.Label(), Tone: windowTone(w.State), Open: w.State == breakglass.Open,
		RequestedBy: w.RequestedByName, Reason: w.Reason, CreatedAt: w.CreatedAt, Clock: windowClock(w, now)}
}

// windowClock says when a window's current step runs out, "" when nothing does.
func windowClock(w breakglass.Window, now time.Time) string {
	var label string
	var at time.Time
	switch {
	case w.State == breakglass.Requested:
		label, at = "decide by", w.DecisionDeadline
	case w.State == breakglass.Approved && w.ApprovalExpiresAt != nil:
		label, at = "open it by", *w.ApprovalExpiresAt
	case w.State == breakglass.Open && w.EndsAt != nil:
		label, at = "open until", *w.EndsAt
	default:
		return ""
	}
	left := at.Sub(now).Round(time.Minute)
	switch {
	case left <= 0:
		return fmt.Sprintf("%s %s (time is up; it is closing)", label, at.UTC().Format("15:04 UTC"))
	case left >= 2*time.Hour:
		return fmt.Sprintf("%s %s (%d h %d min left)", label, at.UTC().Format("2006-01-02 15:04 UTC"), int(left.Hours()), int(left.Minutes())%60)
	}
	return fmt.Sprintf("%s %s (%d min left)", label, at.UTC().Format("15:04 UTC"), int(left.Minutes()))
}

func (h Breakglass) show(c echo.Context) error {
	return h.page(c, http.StatusOK, c.Param("id"), nil, nil)
}

// page draws window id for the reader, with credentials just minted (shown once) or the
// problems of a refused action.
func (h Breakglass) page(c echo.Context, status int, id string, creds *breakglass.Credentials, problems map[string]string) error {
	ctx := c.Request().Context()
	v, err := h.Windows.Get(ctx, id)
	if err != nil {
		return err
	}
	w, perms := v.Window, v.Permissions
	p := views.WindowProps{ID: w.ID, WorkspaceID: w.WorkspaceID, Workspace: v.Workspace, Environment: v.Environment.Name,
		StateLabel: w.State.Label(), Tone: windowTone(w.State), StateReason: w.StateReason, Reason: w.Reason,
		Duration: durationLabel(w.Duration()), RequestedBy: w.RequestedByName, ApprovedBy: w.ApprovedByName, TermsDigest: w.TermsDigest,
		CreatedAt: w.CreatedAt, Clock: windowClock(w, v.Now), OpenedAt: w.OpenedAt, EndsAt: w.EndsAt, EndedAt: w.EndedAt,
		CredentialsIssued: w.CredentialsIssued, Errors: problems, MinReason: breakglass.MinReasonLength, MaxReason: breakglass.MaxReasonLength,
		CanApprove: perms.Approve.Allowed(), CanReject: perms.Reject.Allowed(), CanCancel: perms.Cancel.Allowed(),
		CanOpen: perms.Open.Allowed(), CanIssue: perms.Credentials.Allowed(), CanEnd: perms.End.Allowed(),
		CanCodify: perms.Codify.Allowed(), CanClose: perms.Close.Allowed()}
	for _, link := range []struct {
		id          *string
		dstID, dstL *string
	}{{w.DriftCheckRunID, &p.DriftCheckRunID, &p.DriftCheckLabel}, {w.CodifyRunID, &p.CodifyRunID, &p.CodifyLabel}} {
		if link.id == nil {
			continue
		}
		if r, err := h.Runs.Get(ctx, *link.id); err == nil {
			*link.dstID, *link.dstL = r.ID, v.Workspace+" "+r.Label()+" ("+string(r.State)+")"
		}
	}
	// Why an expected control is missing, in the rules' words.
	for _, n := range []struct {
		state breakglass.State
		v     run.Verdict
	}{{breakglass.Requested, perms.Approve}, {breakglass.Approved, perms.Open}, {breakglass.AwaitingCodification, perms.Codify}} {
		if w.State == n.state && !n.v.Allowed() {
			p.Notes = append(p.Notes, n.v.Reason())
		}
	}
	if w.State == breakglass.Codified {
		// Codifying accepted the world into state, not into the workspace's inputs.
		p.Notes = append(p.Notes, "The change is in the workspace's state, not in its inputs: a change planned from the inputs as they are would undo it. "+
			"To keep it, request a change of "+v.Workspace+" with the new values.")
	}
	if creds != nil {
		p.Credentials = &views.WindowCredentials{Token: creds.Token, ExpiresAt: creds.ExpiresAt, Endpoint: creds.Endpoint}
		// A page holding a secret is never cached, nor restored from history.
		c.Response().Header().Set(echo.HeaderCacheControl, "no-store")
	}
	return render.Page(c, status, views.WindowPage(p))
}

// act takes one action on a window; field problems come back on its page, other
// refusals through the central error handler (404, 403, 409 with the reason).
func (h Breakglass) act(c echo.Context) error {
	ctx := c.Request().Context()
	id, terms := c.Param("id"), c.FormValue("terms")
	var err error
	var creds breakglass.Credentials
	var codify run.Run
	var done string
	switch c.Param("action") {
	case "approve":
		_, err = h.Windows.Approve(ctx, id, terms)
		done = "Window approved: its requester may open it now."
	case "reject":
		_, err = h.Windows.Reject(ctx, id, terms, c.FormValue("reason"))
		done = "Window rejected."
	case "cancel":
		_, err = h.Windows.Cancel(ctx, id)
		done = "Window cancelled."
	case "open":
		_, creds, err = h.Windows.Open(ctx, id)
	case "credentials":
		_, creds, err = h.Windows.IssueCredentials(ctx, id)
	case "end":
		_, err = h.Windows.End(ctx, id)
		done = "Window ended: a drift check runs now, and the window awaits codification."
	case "codify":
		_, codify, err = h.Windows.Codify(ctx, id)
		done = "Codification requested as run " + codify.Label() + ": it is planned refresh-only and passes every gate before anything is written to state."
	case "close":
		_, err = h.Windows.Close(ctx, id, c.FormValue("reason"))
		done = "Window closed without codification; the reason is on the record."
	default:
		return echo.ErrNotFound
	}
	if v, ok := errs.AsValidation(err); ok {
		return h.page(c, http.StatusUnprocessableEntity, id, nil, v.Fields)
	}
	if err != nil {
		return err
	}
	if creds.Token != "" {
		// The credentials are shown in this answer only: a repeat of the form (same
		// idempotency key) is sent to the window's page, never shown them again.
		render.ReplayTo(c, paths.BreakglassWindow(id))
		return h.page(c, http.StatusOK, id, &creds, nil)
	}
	_ = render.Flash(c, "success", done)
	if codify.ID != "" {
		return render.Redirect(c, paths.Run(codify.ID))
	}
	return render.Redirect(c, paths.BreakglassWindow(id))
}
