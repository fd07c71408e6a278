package handlers

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/labstack/echo/v4"

	"gantry/models/authz"
	"gantry/models/errs"
	"gantry/models/review"
	"gantry/models/run"
	"gantry/views"
	"gantry/web/paths"
	"gantry/web/render"
)

// The personal inbox: its two lists, their rows and the navigation's live count.

// approvals is the personal inbox: the runs the person may decide now ("Waiting for
// you", from the run service's deciders), and the others they see, with who decides;
// each list deadline first, paged by a cursor of its own.
func (h Runs) approvals(c echo.Context) error {
	ctx := c.Request().Context()
	youAfter, err := inboxCursor(c.QueryParam("you_after"))
	if err != nil {
		return err
	}
	othersAfter, err := inboxCursor(c.QueryParam("others_after"))
	if err != nil {
		return err
	}
	const page = 50
	mine, err := h.Runs.WaitingForYou(ctx, youAfter, page)
	if err != nil {
		return err
	}
	others, err := h.Runs.WaitingForOthers(ctx, othersAfter, page)
	if err != nil {
		return err
	}
	now, err := h.Runs.Clock(ctx)
	if err != nil {
		return err
	}
	p := views.ApprovalsProps{}
	if p.ForYou, err = inboxRows(ctx, h.Workspaces, mine, now); err != nil {
		return err
	}
	if p.ForOthers, err = inboxRows(ctx, h.Workspaces, others, now); err != nil {
		return err
	}
	if len(mine) == page {
		p.ForYouNext = paths.Approvals() + "?you_after=" + url.QueryEscape(cursorOf(mine[len(mine)-1]))
	}
	if len(others) == page {
		p.ForOthersNext = paths.Approvals() + "?others_after=" + url.QueryEscape(cursorOf(others[len(others)-1]))
	}
	return render.Page(c, http.StatusOK, views.Approvals(p))
}

// inboxCursor reads an inbox page cursor ("<deadline RFC 3339>|<run id>"; "" is the first page).
func inboxCursor(s string) (*run.InboxCursor, error) {
	if s == "" {
		return nil, nil
	}
	at, id, ok := strings.Cut(s, "|")
	deadline, err := time.Parse(time.RFC3339Nano, at)
	if !ok || err != nil || id == "" {
		return nil, fmt.Errorf("an inbox page cursor is a deadline and a run id: %w", errs.ErrBadRequest)
	}
	return &run.InboxCursor{Deadline: deadline, ID: id}, nil
}

func cursorOf(e run.InboxEntry) string {
	return e.DecisionDeadline.UTC().Format(time.RFC3339Nano) + "|" + e.ID
}

// inboxRows are the inbox's rows of entries, at now (the database clock).
func inboxRows(ctx context.Context, wss WorkspaceReader, entries []run.InboxEntry, now time.Time) ([]views.InboxRow, error) {
	runs := make([]run.Run, len(entries))
	for i, e := range entries {
		runs[i] = e.Run
	}
	rows, err := runRows(ctx, wss, runs)
	if err != nil {
		return nil, err
	}
	out := make([]views.InboxRow, len(entries))
	for i, e := range entries {
		d := run.DecidersAt(e.Run, now)
		rows[i].Deciders, rows[i].Escalated = d.Summary(), d.Escalated
		s := e.PlanSummary
		row := views.InboxRow{RunRow: rows[i], Qualified: rows[i].Workspace + " " + e.Label(), Action: string(e.Action),
			Changes: changeCounts(s)}
		if e.NeedsFreshSignIn {
			row.FreshSignIn = fmt.Sprintf("needs a sign-in within %d minutes", int(run.ElevationWindow.Minutes()))
		}
		if e.Cost != nil {
			row.CostDelta = review.SignedMoney(e.Cost.Delta)
		}
		if e.WaitingSince != nil {
			row.Age = roughDuration(now.Sub(*e.WaitingSince))
		}
		if e.DecisionDeadline != nil {
			row.TimeLeft = roughDuration(e.DecisionDeadline.Sub(now))
		}
		out[i] = row
	}
	return out, nil
}

// changeCounts says a plan's changes in words, leaving out what it does not do: "1 to
// add, 2 to replace".
func changeCounts(s run.Summary) string {
	var parts []string
	for _, c := range []struct {
		n    int
		what string
	}{{s.Create, "to add"}, {s.Update, "to change"}, {s.Replace, "to replace"}, {s.Delete, "to destroy"}} {
		if c.n > 0 {
			parts = append(parts, fmt.Sprintf("%d %s", c.n, c.what))
		}
	}
	if len(parts) == 0 {
		return "no changes"
	}
	return strings.Join(parts, ", ")
}

// roughDuration says a duration as a person would: "3 d 4 h", "2 h 5 min", "4 min"
// (with non-breaking spaces: a table cell never splits a number from its unit).
func roughDuration(d time.Duration) string {
	if d < time.Minute {
		return "under a minute"
	}
	days, hours, mins := int(d/(24*time.Hour)), int(d%(24*time.Hour)/time.Hour), int(d%time.Hour/time.Minute)
	switch {
	case days > 0:
		return fmt.Sprintf("%d\u00a0d %d\u00a0h", days, hours)
	case hours > 0:
		return fmt.Sprintf("%d\u00a0h %d\u00a0min", hours, mins)
	}
	return fmt.Sprintf("%d\u00a0min", mins)
}

// inboxEvents keeps the navigation's count of runs waiting for you live: the count at
// connect (the page may be older), then again after any run of the organization moved
// whenever it differs from the last one sent.
func (h Runs) inboxEvents(c echo.Context) error {
	ctx := c.Request().Context()
	subject, err := authz.Require(ctx, authz.PermOrgRead)
	if err != nil {
		return err
	}
	changes, unsubscribe := h.Changes.Subscribe(subject.OrganizationID, "")
	defer unsubscribe()
	w := c.Response()
	startStream(w)
	heartbeat := time.NewTicker(max(h.Heartbeat, time.Second))
	defer heartbeat.Stop()
	sent := int64(-1)
	for {
		if sent, err = h.sendInboxCount(ctx, w, sent); errors.Is(err, errGone) {
			return nil
		} else if err != nil {
			return err
		}
		if !waitForChange(ctx, w, changes, heartbeat.C) {
			return nil
		}
	}
}

// sendInboxCount sends the navigation's count of runs waiting for you (the inbox
// stream's and the run page's) unless it is sent, the count the browser shows; it
// returns the count the browser shows now.
func (h Runs) sendInboxCount(ctx context.Context, w *echo.Response, sent int64) (int64, error) {
	n, err := h.Runs.CountWaitingForYou(ctx)
	if err != nil {
		return sent, err
	}
	if n == sent {
		return sent, nil
	}
	if err := sendFragment(ctx, w, "inbox-count", views.InboxCount(n)); err != nil {
		return sent, err
	}
	return n, nil
}
