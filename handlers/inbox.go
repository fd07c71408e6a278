package handlers

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/labstack/echo/v4"

	"gantry/handlers/render"
	"gantry/models/authz"
	"gantry/models/listing"
	"gantry/models/pages"
	"gantry/models/review"
	"gantry/models/run"
	"gantry/views"
	"gantry/views/paths"
)

// The personal inbox: its two lists, their rows and the navigation's live count.

// inboxColumns are the inbox's columns (the third names who decides: "Your decision"
// or "Who decides").
func inboxColumns(third string) []sortColumn {
	return []sortColumn{{label: "Run"}, {label: "Risk and changes", key: run.SortRisk, descFirst: true}, {label: third},
		{label: "Waiting"}, {label: "Time left", key: run.SortDeadline}}
}

// inboxRisks are the risk classes the inbox filters by (0 waits for nobody).
var inboxRisks = []views.ListChoice{{Value: "1", Label: "risk 1"}, {Value: "2", Label: "risk 2"}, {Value: "3", Label: "risk 3"}}

// approvals is the personal inbox: the runs the person may decide now ("Waiting for
// you", from the run service's deciders), and the others they see, with who decides;
// both searched and filtered alike, each list paged by a cursor of its own.
func (h Runs) approvals(c echo.Context) error {
	// No sort asked for is the person's default, which the read model chooses.
	l, err := readList(c, paths.Approvals(), run.InboxSortKeys(), listing.Sort{}, 50)
	if err != nil {
		return err
	}
	q := pages.InboxQuery{Text: l.text, EnvironmentID: l.query.Get("environment"), Lists: !l.refused(), Decided: l.query.Get("decided")}
	q.Risk, _ = strconv.Atoi(choice(l, "risk", inboxRisks))
	if q.ForYou, err = l.pageOf("you_"); err != nil {
		return err
	}
	if q.ForOthers, err = l.pageOf("others_"); err != nil {
		return err
	}
	page, err := h.InboxPages.Page(c.Request().Context(), q)
	if err != nil {
		return err
	}
	status := http.StatusOK
	if l.refused() {
		status = http.StatusUnprocessableEntity
	}
	return render.Page(c, status, views.Approvals(approvalsProps(l, page)))
}

// approvalsProps is the inbox as drawn for list form l.
func approvalsProps(l listRequest, page pages.InboxPage) views.ApprovalsProps {
	l.page.Sort = page.Sort
	envs := listChoices(page.EnvironmentNames)
	filters := []views.ListFilter{{Name: "environment", Label: "Environment", Any: "Any environment", Choices: envs, Selected: choice(l, "environment", envs)},
		{Name: "risk", Label: "Risk", Any: "Any risk", Choices: inboxRisks, Selected: choice(l, "risk", inboxRisks)}}
	p := views.ApprovalsProps{Controls: l.controls("approvals", "Search waiting runs", "A workspace's name, a template or who requested it.", filters, nil),
		ForYouHeaders: l.headers(inboxColumns("Your decision")), ForOthersHeaders: l.headers(inboxColumns("Who decides"))}
	p.Controls.Noun, p.Controls.Nouns = "run waits for you", "runs wait for you"
	p.Controls.MatchNoun, p.Controls.MatchNouns = "matching run waits for you", "matching runs wait for you"
	if l.refused() {
		return p
	}
	p.Emergencies = emergencyRows(page.Emergencies, page.Now)
	p.Decided = decidedView(page)
	mine, others := page.ForYou.Page, page.ForOthers.Page
	p.ForYou, p.ForOthers = inboxRows(page.ForYou.Lines, page.Now), inboxRows(page.ForOthers.Lines, page.Now)
	p.Controls.Total, p.ForYouTotal, p.ForOthersTotal = mine.Total, mine.Total, others.Total
	p.Controls.Note = "· " + strconv.FormatInt(others.Total, 10) + " for others"
	p.ForYouPager = pager(l, "you_", mine.Result, "Pages of the runs waiting for you")
	p.ForOthersPager = pager(l, "others_", others.Result, "Pages of the runs waiting for others")
	return p
}

// decidedView is what became of the run the person just decided, and the next run
// waiting for them as a link (nil: no decision to report).
func decidedView(page pages.InboxPage) *views.DecidedView {
	d := page.Decided
	if d == nil {
		return nil
	}
	v := &views.DecidedView{RunID: d.ID, Qualified: d.Workspace.Name + " " + d.Label(), Rejected: d.RejectedBy != nil,
		State: runState(d.Run), StateReason: stateReason(d.Run)}
	if n := page.Next; n != nil {
		v.Next = &views.NextWaiting{ID: n.ID, Qualified: n.Workspace.Name + " " + n.Label(), Environment: n.Workspace.EnvironmentName}
		if n.RiskClass != nil {
			v.Next.Risk = strconv.Itoa(*n.RiskClass)
		}
	}
	return v
}

// inboxRows are the inbox's rows of lines, at now (the database clock).
func inboxRows(lines []pages.InboxLine, now time.Time) []views.InboxRow {
	out := make([]views.InboxRow, len(lines))
	for i, e := range lines {
		d := run.DecidersAt(e.Run, now)
		rr := runRow(e.Run, e.Workspace)
		rr.Deciders, rr.Escalated = d.Summary(), d.Escalated
		row := views.InboxRow{RunRow: rr, Qualified: rr.Workspace + " " + e.Label(), Action: string(e.Action), Changes: changeCounts(e.PlanSummary)}
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
	return out
}

// emergencyRows are the inbox's break-glass requests, at now (the database clock).
func emergencyRows(lines []pages.EmergencyLine, now time.Time) []views.EmergencyRow {
	out := make([]views.EmergencyRow, len(lines))
	for i, l := range lines {
		out[i] = views.EmergencyRow{ID: l.ID, Workspace: l.Workspace.Name, Environment: l.Workspace.EnvironmentName, RequestedBy: l.RequestedByName,
			Reason: l.Reason, Length: roughDuration(l.Duration()), Age: roughDuration(now.Sub(l.CreatedAt)), TimeLeft: roughDuration(l.DecisionDeadline.Sub(now))}
	}
	return out
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
	n, err := h.Inbox.CountWaitingForYou(ctx)
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
