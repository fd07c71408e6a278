package handlers

import (
	"context"
	"net/http"
	"net/url"
	"strconv"
	"time"

	"github.com/labstack/echo/v4"

	"gantry/handlers/render"
	"gantry/models/pages"
	"gantry/models/run"
	"gantry/views"
	"gantry/views/paths"
)

// DashboardPages reads the landing page (pages.Dashboard).
type DashboardPages interface {
	Page(ctx context.Context) (pages.DashboardPage, error)
}

// Dashboard serves the landing page, which differs by role: what waits for an
// approver's decision, a requester's own runs and what each waits on, and for admins
// and auditors the organization's activity in sentences.
type Dashboard struct {
	Pages DashboardPages
}

// Register adds the dashboard route to g.
func (h Dashboard) Register(g *echo.Group) { g.GET(paths.Home(), h.show) }

func (h Dashboard) show(c echo.Context) error {
	page, err := h.Pages.Page(c.Request().Context())
	if err != nil {
		return err
	}
	p := views.DashboardProps{EnvironmentCount: page.EnvironmentCount,
		Windows: windowRows(page.Windows, page.Now), ShowWaiting: page.ShowWaiting, WaitingCount: page.WaitingCount,
		Waiting: inboxRows(page.Waiting, page.Now), ShowMine: page.ShowMine, Mine: myRuns(page.Mine, page.Now),
		ShowActivity: page.ShowActivity, Activity: activityItems(page.Activity), CanRequest: page.CanRequest, ShowRecent: page.ShowRecent,
		Compliance: complianceProps(page.Compliance, page.Now)}
	for _, l := range page.Recent {
		p.Recent = append(p.Recent, runRow(l.Run, l.Workspace))
	}
	return render.Page(c, http.StatusOK, views.Dashboard(p))
}

// complianceProps is an auditor's compliance summary as drawn (nil: none).
func complianceProps(c *pages.Compliance, now time.Time) *views.ComplianceProps {
	if c == nil {
		return nil
	}
	return &views.ComplianceProps{ChainIntact: c.Chain.Intact(), ChainHead: c.Chain.Head, ChainVerified: c.Chain.VerifiedSeq,
		ChainCheckedAt: c.Chain.CheckedAt, ChainBrokenAt: c.Chain.BrokenSeq, ChainBrokenReason: c.Chain.BrokenReason,
		Unevidenced: c.Unevidenced, SelfApproved: c.SelfApproved, Standing: c.Standing, OpenWindows: windowRows(c.OpenWindows, now),
		Overrides: c.Overrides, OverridesMore: c.OverridesMore, OverrideDays: pages.OverrideDays,
		OverridesURL: paths.AuditFiltered(url.Values{"action": {pages.OverriddenAction}})}
}

// myRuns are a requester's runs with what each waits on, or what they may do next.
func myRuns(lines []pages.RunLine, now time.Time) []views.MyRun {
	out := make([]views.MyRun, len(lines))
	for i, l := range lines {
		r := l.Run
		m := views.MyRun{RunRow: runRow(r, l.Workspace)}
		switch {
		case r.State == run.PendingApproval:
			m.Next = "waiting for " + run.DecidersAt(r, now).Summary()
			if r.DecisionDeadline != nil {
				m.Next += "; " + roughDuration(r.DecisionDeadline.Sub(now)) + " left"
			}
		case r.State == run.PolicyBlocked && !r.HardBlocked():
			m.Next = "waiting for an admin's override of a soft-mandatory policy"
		case r.State == run.Rejected || r.State == run.PolicyBlocked:
			m.Next, m.NextURL, m.NextLabel = "not applied", paths.ResubmitRun(r.TemplateName, r.ID), "Edit and resubmit"
		case r.State == run.Failed || r.State == run.Expired || r.State == run.Stale:
			m.Next, m.NextURL, m.NextLabel = "not applied", paths.Run(r.ID), "See why"
		case !r.Finished():
			m.Next = "in progress"
		default:
			m.Next = "nothing"
		}
		out[i] = m
	}
	return out
}

// activityItems are the activity feed's items as the page draws them: a sentence, or a
// folded stretch linking to the log from its newest event down (the log's pages are
// newest first).
func activityItems(items []pages.ActivityItem) []views.ActivityItem {
	out := make([]views.ActivityItem, 0, len(items))
	for _, it := range items {
		v := views.ActivityItem{At: it.At, Credentials: it.Credentials, Steps: it.Steps}
		if it.Folded() {
			v.FoldedURL = paths.AuditFiltered(url.Values{"before": {strconv.FormatInt(it.FoldedFrom+1, 10)}})
		} else {
			v.Row = auditRows([]pages.AuditLine{*it.Line})[0]
		}
		out = append(out, v)
	}
	return out
}
