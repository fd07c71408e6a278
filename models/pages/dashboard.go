package pages

import (
	"context"
	"time"

	"gantry/models/audit"
	"gantry/models/authz"
	"gantry/models/breakglass"
	"gantry/models/environment"
	"gantry/models/run"
)

// EnvironmentCounter lists the organization's environments (environment.Directory).
type EnvironmentCounter interface {
	List(ctx context.Context) ([]environment.Environment, error)
}

// MyRuns are the runs the reader asked for, newest first (run.Reads).
type MyRuns interface {
	ListMine(ctx context.Context, limit int) ([]run.Run, error)
}

// WindowsToDecide lists the break-glass windows the reader may decide
// (breakglass.Service).
type WindowsToDecide interface {
	ToDecide(ctx context.Context, limit int) ([]breakglass.Window, error)
}

// Dashboard builds the landing page, which differs by role: what waits for an
// approver's decision, a requester's own runs and what each waits on, and for admins
// and auditors the organization's activity in sentences.
type Dashboard struct {
	Environments EnvironmentCounter
	Clock        Clock
	Inbox        RunInbox
	Mine         MyRuns
	Windows      WindowsToDecide
	Workspaces   WorkspaceViews
	// Audit describes the activity feed's events.
	Audit Audit
}

// Sizes of the landing page's lists: each links to the whole list.
const (
	DashboardWaiting  = 5
	DashboardMine     = 8
	DashboardActivity = 15
	// dashboardScan bounds the events read to fill the feed once the routine events are
	// folded.
	dashboardScan = 200
)

// DashboardPage is the landing page, its clocks judged at Now (the database clock).
// What the reader's role does not see is left empty, and Show* says which parts it
// sees.
type DashboardPage struct {
	Now time.Time
	// EnvironmentCount is -1 for a role that does not manage environments.
	EnvironmentCount int
	// Windows are the break-glass windows waiting for the reader's decision.
	Windows []WindowEntry
	// Waiting is what waits for the reader's decision (approvers), WaitingCount how many.
	ShowWaiting  bool
	WaitingCount int64
	Waiting      []InboxLine
	// Mine are the reader's own runs (requesters).
	ShowMine bool
	Mine     []RunLine
	// Activity is the organization's newest events, routine stretches folded (admins and
	// auditors).
	ShowActivity bool
	Activity     []ActivityItem
}

// ActivityItem is one line of the activity feed: an event as a sentence, or a folded
// stretch of routine events (a credential per phase, each phase starting) that says how
// many it holds and where they begin in the log.
type ActivityItem struct {
	Line *AuditLine
	// A folded stretch: its newest event's time and seq, and how many of each kind.
	At                 time.Time
	FoldedFrom         int64
	Credentials, Steps int
}

// Folded reports whether the item is a folded stretch of routine events (it holds at
// least one).
func (i ActivityItem) Folded() bool { return i.Credentials+i.Steps > 0 }

// routineActions are the events every run leaves on its way: the feed folds each
// stretch of them into one line, so decisions and outcomes stand out.
var routineActions = map[string]string{
	"state.credentials_issued":  "credentials",
	"state.credentials_revoked": "credentials",
	"run.planning":              "steps",
	"run.planned":               "steps",
	"run.running":               "steps",
	"run.verifying":             "steps",
}

// Page reads the landing page for the reader's role. Each part is asked "may I" first,
// so a viewer's dashboard is not an error page.
func (s Dashboard) Page(ctx context.Context) (DashboardPage, error) {
	subject, err := authz.Require(ctx, authz.PermOrgRead)
	if err != nil {
		return DashboardPage{}, err
	}
	p := DashboardPage{EnvironmentCount: -1}
	if subject.Can(authz.PermEnvironmentsManage) {
		envs, err := s.Environments.List(ctx)
		if err != nil {
			return DashboardPage{}, err
		}
		p.EnvironmentCount = len(envs)
	}
	if p.Now, err = s.Clock.Clock(ctx); err != nil {
		return DashboardPage{}, err
	}
	windows, err := s.Windows.ToDecide(ctx, DashboardWaiting)
	if err != nil {
		return DashboardPage{}, err
	}
	if p.Windows, err = WindowEntries(ctx, s.Workspaces, windows); err != nil {
		return DashboardPage{}, err
	}
	if err := s.roleParts(ctx, subject, &p); err != nil {
		return DashboardPage{}, err
	}
	return p, nil
}

// roleParts reads what subject's role sees: approvers (who hold provisioning.apply, as
// the navigation's count asks) what waits for them, requesters their own runs, auditors
// the activity.
func (s Dashboard) roleParts(ctx context.Context, subject authz.Subject, p *DashboardPage) error {
	var err error
	if p.ShowWaiting = subject.Can(authz.PermProvisioningApply); p.ShowWaiting {
		if p.WaitingCount, err = s.Inbox.CountWaitingForYou(ctx); err != nil {
			return err
		}
		entries, err := s.Inbox.WaitingForYou(ctx, nil, DashboardWaiting)
		if err != nil {
			return err
		}
		if p.Waiting, err = inboxLines(ctx, s.Workspaces, entries); err != nil {
			return err
		}
	}
	if p.ShowMine = subject.Can(authz.PermProvisioningPlan); p.ShowMine {
		mine, err := s.Mine.ListMine(ctx, DashboardMine)
		if err != nil {
			return err
		}
		if p.Mine, err = RunLines(ctx, s.Workspaces, mine); err != nil {
			return err
		}
	}
	if p.ShowActivity = subject.Can(authz.PermAuditRead); p.ShowActivity {
		if p.Activity, err = s.activity(ctx); err != nil {
			return err
		}
	}
	return nil
}

// activity is the organization's newest events as sentences, each stretch of routine
// events folded into one item.
func (s Dashboard) activity(ctx context.Context) ([]ActivityItem, error) {
	page, err := s.Audit.Log.History(ctx, audit.Query{Limit: dashboardScan})
	if err != nil {
		return nil, err
	}
	items, kept := foldActivity(page.Events, DashboardActivity)
	lines, err := s.Audit.Describe(ctx, kept)
	if err != nil {
		return nil, err
	}
	next := 0
	for i := range items {
		if !items[i].Folded() {
			items[i].Line = &lines[next]
			next++
		}
	}
	return items, nil
}

// foldActivity folds events (newest first) into at most limit items: each event that is
// not routine is an item of its own (kept, in order, to be described), each stretch of
// routine ones one folded item counting them from its newest.
func foldActivity(events []audit.Event, limit int) (items []ActivityItem, kept []audit.Event) {
	folding := false
	for _, e := range events {
		kind, routine := routineActions[e.Action]
		if (!routine || !folding) && len(items) >= limit {
			break
		}
		switch {
		case !routine:
			folding = false
			kept = append(kept, e)
			items = append(items, ActivityItem{At: e.OccurredAt})
			continue
		case !folding:
			items = append(items, ActivityItem{At: e.OccurredAt, FoldedFrom: e.Seq})
			folding = true
		}
		if last := &items[len(items)-1]; kind == "credentials" {
			last.Credentials++
		} else {
			last.Steps++
		}
	}
	return items, kept
}
