package handlers

import (
	"context"
	"net/http"
	"net/url"
	"strconv"
	"time"

	"github.com/labstack/echo/v4"

	"gantry/handlers/render"
	"gantry/models/audit"
	"gantry/models/authz"
	"gantry/models/breakglass"
	"gantry/models/environment"
	"gantry/models/pages"
	"gantry/models/run"
	"gantry/views"
	"gantry/views/paths"
)

// EnvironmentLister counts environments for the dashboard card.
type EnvironmentLister interface {
	List(ctx context.Context) ([]environment.Environment, error)
}

// DashboardRuns is what the landing page reads of runs: what the person asked for
// (run.Reads). What waits for them comes from their inbox (Dashboard.Inbox).
type DashboardRuns interface {
	ListMine(ctx context.Context, limit int) ([]run.Run, error)
	Clock(ctx context.Context) (time.Time, error)
}

// Dashboard serves the landing page, which differs by role: what waits for an
// approver's decision, a requester's own runs and what each waits on, and for admins
// and auditors the organization's activity in sentences.
type Dashboard struct {
	Environments EnvironmentLister
	Activity     AuditHistory
	Names        AuditNames
	Runs         DashboardRuns
	Inbox        DashboardInbox
	Workspaces   WorkspaceReader
	// Windows are the break-glass windows waiting for the admin's decision.
	Windows DashboardWindows
}

// DashboardInbox is what waits for the person (run.Inbox).
type DashboardInbox interface {
	WaitingForYou(ctx context.Context, after *run.InboxCursor, limit int) ([]run.InboxEntry, error)
	CountWaitingForYou(ctx context.Context) (int64, error)
}

// DashboardWindows lists the break-glass windows the person may decide.
type DashboardWindows interface {
	ToDecide(ctx context.Context, limit int) ([]breakglass.Window, error)
}

// Register adds the dashboard route to g.
func (h Dashboard) Register(g *echo.Group) { g.GET(paths.Home(), h.show) }

// Sizes of the landing page's lists: each links to the whole list.
const (
	dashboardWaiting  = 5
	dashboardMine     = 8
	dashboardActivity = 15
	// dashboardScan bounds the events read to fill the feed once the credential
	// events are folded.
	dashboardScan = 200
)

func (h Dashboard) show(c echo.Context) error {
	ctx := c.Request().Context()
	subject, _ := authz.SubjectFrom(ctx)
	props := views.DashboardProps{EnvironmentCount: -1}
	// Ask "may I" first, so a viewer's dashboard is not an error page.
	if subject.Can(authz.PermEnvironmentsManage) {
		envs, err := h.Environments.List(ctx)
		if err != nil {
			return err
		}
		props.EnvironmentCount = len(envs)
	}
	now, err := h.Runs.Clock(ctx)
	if err != nil {
		return err
	}
	windows, err := h.Windows.ToDecide(ctx, dashboardWaiting)
	if err != nil {
		return err
	}
	entries, err := pages.WindowEntries(ctx, h.Workspaces, windows)
	if err != nil {
		return err
	}
	props.Windows = windowRows(entries, now)
	// Approvers: who holds provisioning.apply (as the navigation's count asks); viewers
	// and auditors never decide.
	if subject.Can(authz.PermProvisioningApply) {
		props.ShowWaiting = true
		if props.WaitingCount, err = h.Inbox.CountWaitingForYou(ctx); err != nil {
			return err
		}
		entries, err := h.Inbox.WaitingForYou(ctx, nil, dashboardWaiting)
		if err != nil {
			return err
		}
		if props.Waiting, err = inboxRows(ctx, h.Workspaces, entries, now); err != nil {
			return err
		}
	}
	if subject.Can(authz.PermProvisioningPlan) {
		props.ShowMine = true
		mine, err := h.Runs.ListMine(ctx, dashboardMine)
		if err != nil {
			return err
		}
		if props.Mine, err = myRuns(ctx, h.Workspaces, mine, now); err != nil {
			return err
		}
	}
	if subject.Can(authz.PermAuditRead) {
		props.ShowActivity = true
		if props.Activity, err = h.activity(ctx); err != nil {
			return err
		}
	}
	return render.Page(c, http.StatusOK, views.Dashboard(props))
}

// myRuns are a requester's runs with what each waits on, or what they may do next.
func myRuns(ctx context.Context, wss WorkspaceReader, runs []run.Run, now time.Time) ([]views.MyRun, error) {
	rows, err := runRows(ctx, wss, runs)
	if err != nil {
		return nil, err
	}
	out := make([]views.MyRun, len(runs))
	for i, r := range runs {
		m := views.MyRun{RunRow: rows[i]}
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
	return out, nil
}

// routineActions are the events every run leaves on its way (a credential per phase,
// each phase starting): the feed folds each stretch of them into one line that says
// what it holds and links to them in the log, so decisions and outcomes stand out.
var routineActions = map[string]string{
	"state.credentials_issued":  "credentials",
	"state.credentials_revoked": "credentials",
	"run.planning":              "steps",
	"run.planned":               "steps",
	"run.running":               "steps",
	"run.verifying":             "steps",
}

// activity is the organization's newest events as sentences, each stretch of routine
// events folded into one line.
func (h Dashboard) activity(ctx context.Context) ([]views.ActivityItem, error) {
	page, err := h.Activity.History(ctx, audit.Query{Limit: dashboardScan})
	if err != nil {
		return nil, err
	}
	var kept []audit.Event
	var items []views.ActivityItem
	folding := false
	for _, e := range page.Events {
		kind, routine := routineActions[e.Action]
		if !routine {
			if len(items) >= dashboardActivity {
				break
			}
			folding = false
			kept = append(kept, e)
			items = append(items, views.ActivityItem{At: e.OccurredAt})
			continue
		}
		if !folding {
			if len(items) >= dashboardActivity {
				break
			}
			// The log from the newest folded event down (its pages are newest first).
			items = append(items, views.ActivityItem{At: e.OccurredAt,
				FoldedURL: paths.AuditFiltered(url.Values{"before": {strconv.FormatInt(e.Seq+1, 10)}})})
			folding = true
		}
		last := &items[len(items)-1]
		if kind == "credentials" {
			last.Credentials++
		} else {
			last.Steps++
		}
	}
	lines, err := pages.Audit{Names: h.Names}.Describe(ctx, kept)
	if err != nil {
		return nil, err
	}
	rows := auditRows(lines)
	next := 0
	for i := range items {
		if items[i].Folded() {
			continue
		}
		items[i].Row = rows[next]
		next++
	}
	return items, nil
}
