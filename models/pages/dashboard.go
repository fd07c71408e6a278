package pages

import (
	"context"
	"time"

	"gantry/models/audit"
	"gantry/models/authz"
	"gantry/models/breakglass"
	"gantry/models/environment"
	"gantry/models/governance"
	"gantry/models/listing"
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

// WindowsToDecide lists the break-glass windows the reader may decide, and the newest
// windows the reader may see (breakglass.Service).
type WindowsToDecide interface {
	ToDecide(ctx context.Context, limit int) ([]breakglass.Window, error)
	Recent(ctx context.Context, limit int) ([]breakglass.Window, error)
}

// GovernanceReader builds the governance report (governance.Service).
type GovernanceReader interface {
	Report(ctx context.Context) (governance.Report, error)
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
	// Audit describes the activity feed's events and reads the chain's state.
	Audit Audit
	// Runs finds the newest runs the reader may see; Governance is the report the
	// compliance summary counts from.
	Runs       RunSearcher
	Governance GovernanceReader
}

// Sizes of the landing page's lists: each links to the whole list.
const (
	DashboardWaiting  = 5
	DashboardMine     = 8
	DashboardActivity = 15
	DashboardRecent   = 8
	// dashboardWindows bounds the windows read to count the open ones.
	dashboardWindows = 100
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
	// CanRequest: the reader may ask for runs (their next step: "New request", the
	// catalog).
	CanRequest bool
	// Recent are the newest runs of the organization the reader may see (for who asks
	// for none: a viewer's and an auditor's look at what happens).
	ShowRecent bool
	Recent     []RunLine
	// Compliance is the compliance summary of who reads the audit log and decides
	// nothing (auditors); nil for the others.
	Compliance *Compliance
}

// Compliance is an auditor's summary of what needs looking at: the audit chain, applies
// the chain cannot match to an approval or that their requester approved, environments
// with standing static credentials, break-glass windows open now and policy overrides.
type Compliance struct {
	Chain                     audit.ChainState
	Unevidenced, SelfApproved int
	// Standing names the environments whose jobs hold standing static credentials.
	Standing []string
	// OpenWindows are the break-glass windows open now.
	OpenWindows []WindowEntry
	// Overrides counts the policy overrides of the last OverrideDays days (at most
	// audit.MaxPage: OverridesMore says there are more).
	Overrides     int
	OverridesMore bool
}

// OverrideDays is how far back the compliance summary counts policy overrides: the
// governance report's manual change record's span.
var OverrideDays = int(governance.ManualChangeWindow.Hours() / 24)

// OverriddenAction is the audit action of a policy override (the log filtered by it
// lists them).
const OverriddenAction = "policy.overridden"

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
		entries, err := firstForYou(ctx, s.Inbox, DashboardWaiting)
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
	p.CanRequest = MayRequest(subject)
	if p.ShowRecent = !p.ShowMine; p.ShowRecent {
		res, err := s.Runs.Search(ctx, run.ListQuery{Page: listing.Page{Sort: listing.Sort{Key: run.SortRequested, Desc: true}, Limit: DashboardRecent}})
		if err != nil {
			return err
		}
		if p.Recent, err = RunLines(ctx, s.Workspaces, res.Rows); err != nil {
			return err
		}
	}
	if subject.Can(authz.PermAuditRead) && !subject.Can(authz.PermProvisioningApply) {
		if p.Compliance, err = s.compliance(ctx); err != nil {
			return err
		}
	}
	return nil
}

// compliance reads the compliance summary from the governance report (its apply
// counts and credential gates), the chain's checkpoint, the windows and the log.
func (s Dashboard) compliance(ctx context.Context) (*Compliance, error) {
	rep, err := s.Governance.Report(ctx)
	if err != nil {
		return nil, err
	}
	c := &Compliance{}
	for _, env := range rep.Environments {
		c.Unevidenced += env.Applies.Unevidenced
		c.SelfApproved += env.Applies.SelfApproved
		for _, g := range env.Gates {
			if g.ID == governance.GateCredentials && !g.Holds() {
				c.Standing = append(c.Standing, env.Name)
			}
		}
	}
	if c.Chain, err = s.Audit.Log.Chain(ctx); err != nil {
		return nil, err
	}
	windows, err := s.Windows.Recent(ctx, dashboardWindows)
	if err != nil {
		return nil, err
	}
	var open []breakglass.Window
	for _, w := range windows {
		if w.State == breakglass.Open {
			open = append(open, w)
		}
	}
	if c.OpenWindows, err = WindowEntries(ctx, s.Workspaces, open); err != nil {
		return nil, err
	}
	since := rep.GeneratedAt.AddDate(0, 0, -OverrideDays)
	page, err := s.Audit.Log.History(ctx, audit.Query{Action: OverriddenAction, From: since, Limit: audit.MaxPage})
	if err != nil {
		return nil, err
	}
	c.Overrides, c.OverridesMore = len(page.Events), page.Next != 0
	return c, nil
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
