package pages

import (
	"context"
	"errors"
	"fmt"
	"time"

	"gantry/models/authz"
	"gantry/models/breakglass"
	"gantry/models/errs"
	"gantry/models/listing"
	"gantry/models/run"
	"gantry/models/workspace"
)

// RunInbox is the personal inbox (run.Inbox).
type RunInbox interface {
	// Inbox is one page of the personal inbox's lists: what the person may decide now
	// (decides), or what waits for others.
	Inbox(ctx context.Context, decides bool, q run.InboxQuery) (run.InboxPage, error)
	CountWaitingForYou(ctx context.Context) (int64, error)
	// Decided is a run the person decided (approved or rejected), for the inbox that
	// follows a decision; any other is not found.
	Decided(ctx context.Context, id string) (run.Run, error)
}

// Clock is the database clock (escalations and deadlines are judged by it, as the
// decisions judge them) (run.Reads).
type Clock interface {
	Clock(ctx context.Context) (time.Time, error)
}

// ListNames name what lists filter by: the organization's environments (by id) and the
// catalog's templates.
type ListNames interface {
	EnvironmentNames(ctx context.Context) (map[string]string, error)
	TemplateNames() []string
}

// Inbox builds the personal inbox page: the runs the person may decide now ("Waiting
// for you", from the run service's deciders), and the others they see, with who
// decides.
type Inbox struct {
	Inbox      RunInbox
	Clock      Clock
	Workspaces WorkspaceViews
	Names      ListNames
	// Emergencies are the break-glass requests the person may decide
	// (breakglass.Service): listed first, whatever the lists' filters.
	Emergencies WindowsToDecide
}

// MaxInboxEmergencies bounds the emergencies the inbox lists (one request at a time
// per workspace keeps them few).
const MaxInboxEmergencies = 50

// EmergencyLine is a break-glass request waiting for the person's decision, with its
// workspace (and the workspace's environment).
type EmergencyLine struct {
	breakglass.Window
	Workspace workspace.View
}

// InboxQuery searches and filters both lists alike; each list pages by a cursor of its
// own.
type InboxQuery struct {
	Text          string
	EnvironmentID string
	Risk          int // 0: any
	// ForYou and ForOthers page each list; a Sort without a key is the person's default
	// (run.DefaultInboxSort: an owner's riskiest first).
	ForYou    listing.Page
	ForOthers listing.Page
	// Lists is false for a list form that was refused: the page without its lists.
	Lists bool
	// Decided is the run the person just decided ("": none): the page says what became
	// of it and offers the next waiting run as a link, never opens it in its place.
	Decided string
}

// InboxLine is a run waiting for a decision, with its workspace.
type InboxLine struct {
	run.InboxEntry
	Workspace workspace.View
}

// InboxList is one page of an inbox list and how many runs match.
type InboxList struct {
	Page  run.InboxPage
	Lines []InboxLine
}

// InboxPage is the personal inbox: both lists judged at Now (the database clock), and
// the environments its filter chooses from (by id).
type InboxPage struct {
	Now time.Time
	// Emergencies come before the runs: break-glass requests waiting for the person.
	Emergencies       []EmergencyLine
	ForYou, ForOthers InboxList
	EnvironmentNames  map[string]string
	// Sort is the lists' order, the person's default when they chose none.
	Sort listing.Sort
	// Decided is the run the person just decided, as it is now (nil: none asked, or not
	// one they decided); Next the first run still waiting for them, in their order.
	Decided *RunLine
	Next    *InboxLine
}

// Page reads the inbox for q.
func (s Inbox) Page(ctx context.Context, q InboxQuery) (InboxPage, error) {
	var p InboxPage
	var err error
	if p.EnvironmentNames, err = s.Names.EnvironmentNames(ctx); err != nil {
		return InboxPage{}, err
	}
	p.Sort = q.ForYou.Sort
	if p.Sort.Key == "" {
		subject, _ := authz.SubjectFrom(ctx)
		p.Sort = run.DefaultInboxSort(subject.Role)
	}
	q.ForYou.Sort, q.ForOthers.Sort = p.Sort, p.Sort
	if !q.Lists {
		return p, nil
	}
	// An environment gone since the link was made filters nothing rather than everything.
	if _, known := p.EnvironmentNames[q.EnvironmentID]; !known {
		q.EnvironmentID = ""
	}
	if p.Now, err = s.Clock.Clock(ctx); err != nil {
		return InboxPage{}, err
	}
	if p.Emergencies, err = s.emergencies(ctx); err != nil {
		return InboxPage{}, err
	}
	for _, l := range []struct {
		decides bool
		page    listing.Page
		dst     *InboxList
	}{{true, q.ForYou, &p.ForYou}, {false, q.ForOthers, &p.ForOthers}} {
		rq := run.InboxQuery{Text: q.Text, EnvironmentID: q.EnvironmentID, Risk: q.Risk, Count: true, Page: l.page}
		if l.dst.Page, err = s.Inbox.Inbox(ctx, l.decides, rq); err != nil {
			return InboxPage{}, err
		}
		if l.dst.Lines, err = inboxLines(ctx, s.Workspaces, l.dst.Page.Rows); err != nil {
			return InboxPage{}, err
		}
	}
	if q.Decided != "" {
		if err := s.decided(ctx, q.Decided, &p); err != nil {
			return InboxPage{}, err
		}
	}
	return p, nil
}

// decided fills in run id, which the person just decided, and the next run waiting for
// them: the first of their list. A run they did not decide names nothing (the address
// is a link anyone may edit), and neither does a run still on their list.
func (s Inbox) decided(ctx context.Context, id string, p *InboxPage) error {
	r, err := s.Inbox.Decided(ctx, id)
	if errors.Is(err, errs.ErrNotFound) {
		return nil
	} else if err != nil {
		return err
	}
	lines, err := RunLines(ctx, s.Workspaces, []run.Run{r})
	if err != nil {
		return err
	}
	p.Decided = &lines[0]
	for i, l := range p.ForYou.Lines {
		if l.ID != id {
			p.Next = &p.ForYou.Lines[i]
			break
		}
	}
	return nil
}

// emergencies are the break-glass requests waiting for the person, oldest first, with
// their workspaces.
func (s Inbox) emergencies(ctx context.Context) ([]EmergencyLine, error) {
	windows, err := s.Emergencies.ToDecide(ctx, MaxInboxEmergencies)
	if err != nil || len(windows) == 0 {
		return nil, err
	}
	ids := make([]string, len(windows))
	for i, w := range windows {
		ids[i] = w.WorkspaceID
	}
	byID, err := s.Workspaces.Views(ctx, ids)
	if err != nil {
		return nil, err
	}
	out := make([]EmergencyLine, len(windows))
	for i, w := range windows {
		ws, ok := byID[w.WorkspaceID]
		if !ok {
			return nil, fmt.Errorf("break-glass window %s: workspace %s: %w", w.ID, w.WorkspaceID, errs.ErrNotFound)
		}
		out[i] = EmergencyLine{Window: w, Workspace: ws}
	}
	return out, nil
}

// inboxLines are entries with their workspaces.
func inboxLines(ctx context.Context, wss WorkspaceViews, entries []run.InboxEntry) ([]InboxLine, error) {
	runs := make([]run.Run, len(entries))
	for i, e := range entries {
		runs[i] = e.Run
	}
	byID, err := workspacesOf(ctx, wss, runs)
	if err != nil {
		return nil, err
	}
	lines := make([]InboxLine, len(entries))
	for i, e := range entries {
		lines[i] = InboxLine{InboxEntry: e, Workspace: byID[e.WorkspaceID]}
	}
	return lines, nil
}

// RunLine is a run with its workspace.
type RunLine struct {
	run.Run
	Workspace workspace.View
}

// RunLines are runs with their workspaces.
func RunLines(ctx context.Context, wss WorkspaceViews, runs []run.Run) ([]RunLine, error) {
	byID, err := workspacesOf(ctx, wss, runs)
	if err != nil {
		return nil, err
	}
	lines := make([]RunLine, len(runs))
	for i, r := range runs {
		lines[i] = RunLine{Run: r, Workspace: byID[r.WorkspaceID]}
	}
	return lines, nil
}

// workspacesOf reads the workspaces of runs in one call. The run service showed the
// runs, so their workspaces are visible too: a workspace missing is a fault, not a
// hidden one.
func workspacesOf(ctx context.Context, wss WorkspaceViews, runs []run.Run) (map[string]workspace.View, error) {
	ids := make([]string, 0, len(runs))
	for _, r := range runs {
		ids = append(ids, r.WorkspaceID)
	}
	byID, err := wss.Views(ctx, ids)
	if err != nil {
		return nil, err
	}
	for _, r := range runs {
		if _, ok := byID[r.WorkspaceID]; !ok {
			return nil, fmt.Errorf("run %s: workspace %s: %w", r.ID, r.WorkspaceID, errs.ErrNotFound)
		}
	}
	return byID, nil
}

// firstForYou is the first runs waiting for the person's decision, in their inbox's
// order (run.DefaultInboxSort: an owner's riskiest first), so the landing page and the
// page that follows a decision offer what the inbox would.
func firstForYou(ctx context.Context, inbox RunInbox, limit int) ([]run.InboxEntry, error) {
	subject, _ := authz.SubjectFrom(ctx)
	page, err := inbox.Inbox(ctx, true, run.InboxQuery{Page: listing.Page{Sort: run.DefaultInboxSort(subject.Role), Limit: limit}})
	return page.Rows, err
}
