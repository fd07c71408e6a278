package handlers

import (
	"context"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/labstack/echo/v4"

	"gantry/handlers/render"
	"gantry/models/breakglass"
	"gantry/models/pages"
	"gantry/models/run"
	"gantry/views"
	"gantry/views/paths"
)

// BreakglassPages reads the manual change path's pages and takes their actions
// (pages.Breakglass).
type BreakglassPages interface {
	Form(ctx context.Context, workspaceID string) (pages.WindowForm, error)
	Submit(ctx context.Context, req breakglass.Request) (breakglass.Window, *pages.WindowForm, error)
	List(ctx context.Context, limit int) ([]pages.WindowEntry, error)
	Window(ctx context.Context, id string) (pages.WindowPage, error)
	Act(ctx context.Context, id string, a pages.WindowAction) (pages.Acted, error)
}

// Breakglass serves the manual change path: the request form on a workspace, the list
// of windows and each window's page with its decisions, credentials and codification.
type Breakglass struct {
	Pages BreakglassPages
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
	f, err := h.Pages.Form(c.Request().Context(), c.Param("id"))
	if err != nil {
		return err
	}
	return render.Page(c, http.StatusOK, views.BreakglassRequest(windowFormProps(f)))
}

// request asks for the window; a refusal comes back on the form with what was typed.
func (h Breakglass) request(c echo.Context) error {
	// Absent is the default length; anything but a whole number is refused.
	minutes := formWhole(c.FormValue("duration"))
	w, refused, err := h.Pages.Submit(c.Request().Context(), breakglass.Request{WorkspaceID: c.Param("id"), Reason: c.FormValue("reason"),
		Duration: time.Duration(minutes) * time.Minute})
	if err != nil {
		return err
	}
	if refused != nil {
		return render.Page(c, http.StatusUnprocessableEntity, views.BreakglassRequest(windowFormProps(*refused)))
	}
	_ = render.Flash(c, "success", "Break-glass window "+w.ID+" requested: an admin other than you approves it; you then open it within "+
		strconv.Itoa(int(run.ApprovalValidity.Minutes()))+" minutes.")
	return render.Redirect(c, paths.BreakglassWindow(w.ID))
}

// windowFormProps is the request form f as drawn.
func windowFormProps(f pages.WindowForm) views.BreakglassRequestProps {
	return views.BreakglassRequestProps{WorkspaceID: f.Workspace.ID, Workspace: f.Workspace.Name, Environment: f.Workspace.EnvironmentName,
		Reason: f.Request.Reason, Minutes: int(f.Request.Duration / time.Minute), Durations: durations(),
		ApprovalMinutes: int(run.ApprovalValidity.Minutes()), Errors: f.Errors, Refused: f.Refused,
		MinReason: breakglass.MinReasonLength, MaxReason: breakglass.MaxReasonLength}
}

func (h Breakglass) list(c echo.Context) error {
	entries, err := h.Pages.List(c.Request().Context(), MaxWindowList)
	if err != nil {
		return err
	}
	return render.Page(c, http.StatusOK, views.WindowList(views.WindowListProps{Windows: windowRows(entries, time.Now()), Max: MaxWindowList}))
}

// windowRows are windows in a list with their workspaces' names, clocks judged at now.
func windowRows(entries []pages.WindowEntry, now time.Time) []views.WindowRow {
	rows := make([]views.WindowRow, 0, len(entries))
	for _, e := range entries {
		row := windowRow(e.Window, now)
		row.Workspace, row.Environment = e.Workspace, e.Environment
		rows = append(rows, row)
	}
	return rows
}

// windowRow is a window in a list, its clock judged at now.
func windowRow(w breakglass.Window, now time.Time) views.WindowRow {
	return views.WindowRow{ID: w.ID, WorkspaceID: w.WorkspaceID, State: windowState(w.State), Open: w.State == breakglass.Open,
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
	p, err := h.Pages.Window(c.Request().Context(), c.Param("id"))
	if err != nil {
		return err
	}
	return render.Page(c, http.StatusOK, views.WindowPage(windowProps(p)))
}

// windowProps is window page p as drawn for its reader.
func windowProps(page pages.WindowPage) views.WindowProps {
	w, perms, name := page.Window, page.Permissions, page.View.Workspace
	p := views.WindowProps{ID: w.ID, WorkspaceID: w.WorkspaceID, Workspace: name, Environment: page.Environment.Name,
		State: windowState(w.State), StateReason: w.StateReason, Reason: w.Reason,
		Duration: durationLabel(w.Duration()), RequestedBy: w.RequestedByName, ApprovedBy: w.ApprovedByName, TermsDigest: w.TermsDigest,
		CreatedAt: w.CreatedAt, Clock: windowClock(w, page.Now), OpenedAt: w.OpenedAt, EndsAt: w.EndsAt, EndedAt: w.EndedAt,
		CredentialsIssued: w.CredentialsIssued, Errors: page.Errors, MinReason: breakglass.MinReasonLength, MaxReason: breakglass.MaxReasonLength,
		CanApprove: perms.Approve.Allowed(), CanReject: perms.Reject.Allowed(), CanCancel: perms.Cancel.Allowed(),
		CanOpen: perms.Open.Allowed(), CanIssue: perms.Credentials.Allowed(), CanEnd: perms.End.Allowed(),
		CanCodify: perms.Codify.Allowed(), CanClose: perms.Close.Allowed(), Notes: windowNotes(page)}
	if r := page.DriftCheck; r != nil {
		p.DriftCheckRunID, p.DriftCheckLabel = r.ID, name+" "+r.Label()+" ("+strings.ToLower(r.State.Words())+")"
	}
	if r := page.Codification; r != nil {
		p.CodifyRunID, p.CodifyLabel = r.ID, name+" "+r.Label()+" ("+strings.ToLower(r.State.Words())+")"
	}
	if creds := page.Credentials; creds != nil {
		p.Credentials = &views.WindowCredentials{Token: creds.Token, ExpiresAt: creds.ExpiresAt, Endpoint: creds.Endpoint}
	}
	return p
}

// windowNotes say why an expected control is missing, in the rules' words, and what a
// codified window's change means for the workspace's inputs.
func windowNotes(page pages.WindowPage) []string {
	var notes []string
	perms := page.Permissions
	for _, n := range []struct {
		state breakglass.State
		v     run.Verdict
	}{{breakglass.Requested, perms.Approve}, {breakglass.Approved, perms.Open}, {breakglass.AwaitingCodification, perms.Codify}} {
		if page.State == n.state && !n.v.Allowed() {
			notes = append(notes, n.v.Reason())
		}
	}
	if page.State == breakglass.Codified {
		// Codifying accepted the world into state, not into the workspace's inputs.
		notes = append(notes, "The change is in the workspace's state, not in its inputs: a change planned from the inputs as they are would undo it. "+
			"To keep it, request a change of "+page.View.Workspace+" with the new values.")
	}
	return notes
}

// windowDone is what the flash says after an action on a window that leaves for another
// page.
var windowDone = map[string]string{
	"approve": "Window approved: its requester may open it now.",
	"reject":  "Window rejected.",
	"cancel":  "Window cancelled.",
	"end":     "Window ended: a drift check runs now, and the window awaits codification.",
	"close":   "Window closed without codification; the reason is on the record.",
}

// act takes one action on a window; field problems come back on its page, other
// refusals through the central error handler (404, 403, 409 with the reason).
func (h Breakglass) act(c echo.Context) error {
	id := c.Param("id")
	out, err := h.Pages.Act(c.Request().Context(), id, pages.WindowAction{Name: c.Param("action"), Terms: c.FormValue("terms"),
		Reason: c.FormValue("reason")})
	switch {
	case err != nil:
		return err
	case out.Page != nil && out.Page.Credentials != nil:
		// The credentials are shown in this answer only: a repeat of the form (same
		// idempotency key) is sent to the window's page, never shown them again. A page
		// holding a secret is never cached, nor restored from history.
		render.ReplayTo(c, paths.BreakglassWindow(id))
		c.Response().Header().Set(echo.HeaderCacheControl, "no-store")
		return render.Page(c, http.StatusOK, views.WindowPage(windowProps(*out.Page)))
	case out.Page != nil:
		return render.Page(c, http.StatusUnprocessableEntity, views.WindowPage(windowProps(*out.Page)))
	case out.Codification.ID != "":
		_ = render.Flash(c, "success", "Codification requested as run "+out.Codification.Label()+
			": it is planned refresh-only and passes every gate before anything is written to state.")
		return render.Redirect(c, paths.Run(out.Codification.ID))
	}
	_ = render.Flash(c, "success", windowDone[c.Param("action")])
	return render.Redirect(c, paths.BreakglassWindow(id))
}
