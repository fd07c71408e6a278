package breakglass

import (
	"context"
	"fmt"
	"slices"
	"time"

	"gantry/models/authz"
	"gantry/models/environment"
	"gantry/models/notify"
	"gantry/models/runport"
)

// Who is told what of a window, in the transaction that made it happen (so a change
// that rolls back tells nobody): a request to everyone who may decide it, its approval
// and opening and its end to its requester and approver. Webhooks hear every one.

// Notifier takes a window's notices in the transaction carried by ctx (notify.Outbox).
type Notifier interface {
	Notify(ctx context.Context, n notify.Notice) error
}

// Members lists an organization's members as the rules see them (org.Service): who is
// told a request waits for their decision.
type Members interface {
	List(ctx context.Context, orgID string) ([]runport.OrgMember, error)
}

// eventOf is the one place that says which move of a window tells people what ("":
// nothing). An approval and an opening are "opened"; a window whose manual change path
// closed, or that never opened, "ended".
func eventOf(to State) notify.Event {
	switch to {
	case Approved, Open:
		return notify.BreakglassOpened
	case Rejected, Cancelled, Expired, AwaitingCodification:
		return notify.BreakglassEnded
	}
	return ""
}

// factsOf is what a notice says of window w, in env, on workspace.
func factsOf(w Window, env environment.Environment, workspace string) *notify.WindowFacts {
	f := &notify.WindowFacts{ID: w.ID, Workspace: workspace, Environment: env.Name, Tier: string(env.Tier), State: string(w.State),
		Requester: w.RequestedByName, Reason: w.Reason, DurationMinutes: w.DurationMinutes, OpenBy: w.ApprovalExpiresAt, EndsAt: w.EndsAt}
	if w.State == Requested {
		f.DecideBy = &w.DecisionDeadline
	}
	return f
}

// tellRequested tells everyone who may decide new request w of it (not its requester).
func (s *Service) tellRequested(ctx context.Context, w Window, env environment.Environment, workspace string, who authz.Subject, now time.Time) error {
	to, err := s.deciders(ctx, w, env, now)
	if err != nil {
		return err
	}
	return s.tell(ctx, notify.Notice{Event: notify.BreakglassRequested, OrganizationID: w.OrganizationID, Window: factsOf(w, env, workspace),
		At: now, Recipients: without(to, who)}, who)
}

// deciders are the members who may decide window w at now, by its rules.
func (s *Service) deciders(ctx context.Context, w Window, env environment.Environment, now time.Time) ([]string, error) {
	members, err := s.members.List(ctx, w.OrganizationID)
	if err != nil {
		return nil, err
	}
	var out []string
	for _, m := range members {
		subject := authz.Subject{UserID: m.UserID, Name: m.Name, OrganizationID: w.OrganizationID, Role: m.Role}
		if !MayDecideSome(subject) {
			continue // most members: no need to ask for their grants
		}
		a, err := s.actors.Actor(ctx, subject, env)
		if err != nil {
			return nil, err
		}
		if PermissionsOf(w, a, env, now).MayDecide() {
			out = append(out, m.UserID)
		}
	}
	return out, nil
}

// tellMoves queues the notices window w's moves call for (before they are saved), to
// its requester and approver; who acted is not told of their own act.
func (s *Service) tellMoves(ctx context.Context, w Window, who authz.Subject, now time.Time) error {
	var facts *notify.WindowFacts
	for _, m := range w.moves {
		e := eventOf(m.To)
		if e == "" {
			continue
		}
		if facts == nil {
			env, err := s.environments.Lookup(ctx, w.OrganizationID, w.EnvironmentID)
			if err != nil {
				return err
			}
			ws, err := s.workspaces.Get(ctx, w.OrganizationID, w.WorkspaceID)
			if err != nil {
				return err
			}
			facts = factsOf(w, env, ws.Name)
		}
		f := *facts
		f.State = string(m.To)
		to := []string{w.RequestedBy}
		if w.ApprovedBy != nil {
			to = append(to, *w.ApprovedBy)
		}
		if err := s.tell(ctx, notify.Notice{Event: e, OrganizationID: w.OrganizationID, Window: &f, Reason: m.Reason, At: now,
			Recipients: without(to, who)}, who); err != nil {
			return err
		}
	}
	return nil
}

// tell queues n, naming who acted when a person did.
func (s *Service) tell(ctx context.Context, n notify.Notice, who authz.Subject) error {
	if !who.System {
		n.ActorName = who.Name
	}
	if err := s.notifier.Notify(ctx, n); err != nil {
		return fmt.Errorf("notifying %s of window %s: %w", n.Event, n.Window.ID, err)
	}
	return nil
}

// without is ids, each once, leaving out who acted (a person is not told of their own act).
func without(ids []string, who authz.Subject) []string {
	out := make([]string, 0, len(ids))
	for _, id := range ids {
		if id == "" || slices.Contains(out, id) || (!who.System && who.UserID == id) {
			continue
		}
		out = append(out, id)
	}
	return out
}
