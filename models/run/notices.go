package run

import (
	"context"
	"fmt"
	"slices"

	"gantry/models/authz"
	"gantry/models/notify"
	"gantry/models/review"
)

// Notifier hears what happened to runs, inside the transaction that made it happen, so
// a change that rolls back tells nobody (notify.Outbox).
type Notifier interface {
	Notify(ctx context.Context, n notify.Notice) error
}

// noticesOf is the one place that says which transition tells people what. Each event
// is addressed by the service: a waiting decision to everyone who may take it, an
// outcome to the requester and the run's approvers.
func noticesOf(r Run, m move) []notify.Event {
	switch m.To {
	case PendingApproval:
		if m.From == PolicyBlocked {
			// An override released a soft block: said to the requester, and the run now
			// waits for an approval.
			return []notify.Event{notify.RunDecided, notify.DecisionWaiting}
		}
		return []notify.Event{notify.DecisionWaiting}
	case PolicyBlocked:
		if r.HardBlocked() {
			return []notify.Event{notify.RunFailed}
		}
		return []notify.Event{notify.DecisionWaiting}
	case Approved:
		if r.ApprovalKind == "person" {
			return []notify.Event{notify.RunDecided}
		}
	case Rejected:
		return []notify.Event{notify.RunDecided}
	case Expired:
		return []notify.Event{notify.RunExpired}
	case ApplyInterrupted:
		return []notify.Event{notify.RunFailed}
	case Failed:
		if m.From != ApplyInterrupted { // already told at the interruption
			return []notify.Event{notify.RunFailed}
		}
	case Stale:
		return []notify.Event{notify.RunStale}
	case Verifying:
		// The apply finished: its changes are live (the verification after it is told
		// only if it fails).
		return []notify.Event{notify.RunApplied}
	case Planned:
		if r.Kind == KindDrift && r.DriftStatus == DriftUnowned {
			return []notify.Event{notify.DriftUnowned}
		}
	}
	return nil
}

// sendNotices queues the notices run r's moves call for. before are who could decide
// the run before this change (its approvers, for an outcome); actor, when a person,
// is never told of their own act.
func (s *core) sendNotices(ctx context.Context, r Run, before []string, actor *authz.Subject) error {
	var deciders []string
	for _, m := range r.moves {
		for _, e := range noticesOf(r, m) {
			var to []string
			switch e {
			case notify.DriftUnowned:
				// Nobody requested the change: those who run the organization hear of it.
				members, err := s.members.List(ctx, r.OrganizationID)
				if err != nil {
					return err
				}
				for _, m := range members {
					if m.Role.AtLeast(authz.RoleAdmin) {
						to = append(to, m.UserID)
					}
				}
			case notify.DecisionWaiting:
				if deciders == nil {
					var err error
					if deciders, err = s.store.deciderIDs(ctx, r.ID); err != nil {
						return err
					}
				}
				to = deciders
			default:
				to = append([]string{r.RequestedBy}, before...)
				if r.ApprovedBy != nil && r.ApprovalKind == "person" {
					to = append(to, *r.ApprovedBy)
				}
			}
			n := notify.Notice{Event: e, OrganizationID: r.OrganizationID, RunID: r.ID, State: string(m.To), Reason: m.Reason,
				At: r.UpdatedAt, Recipients: without(to, actor)}
			// The run whose act ended this one (queue.go), as the move's audit event has it.
			n.CauseRunID, _ = m.Data[causeRunKey].(string)
			if actor != nil && !actor.System {
				n.ActorName = actor.Name
			}
			if err := s.notifier.Notify(ctx, n); err != nil {
				return fmt.Errorf("notifying %s of run %s: %w", e, r.ID, err)
			}
		}
	}
	return nil
}

// without is ids, each once, leaving out the actor (a person is not told of their own act).
func without(ids []string, actor *authz.Subject) []string {
	out := make([]string, 0, len(ids))
	for _, id := range ids {
		if id == "" || slices.Contains(out, id) || (actor != nil && !actor.System && actor.UserID == id) {
			continue
		}
		out = append(out, id)
	}
	return out
}

// NoticeFacts is what a notice says about run runID of organization orgID (no subject:
// the notification fan-out reads it for everyone it tells).
func (s *Reads) NoticeFacts(ctx context.Context, orgID, runID string) (notify.Facts, error) {
	r, err := s.k.store.get(ctx, orgID, runID)
	if err != nil {
		return notify.Facts{}, err
	}
	env, err := s.k.environments.Lookup(ctx, orgID, r.EnvironmentID)
	if err != nil {
		return notify.Facts{}, err
	}
	ws, err := s.k.workspaces.NameOf(ctx, orgID, r.WorkspaceID)
	if err != nil {
		return notify.Facts{}, err
	}
	f := notify.Facts{Label: ws + " " + r.Label(), Workspace: ws, Environment: env.Name, Tier: string(env.Tier), Template: r.TemplateName,
		Kind: string(r.Kind), Requester: r.RequestedByName, RiskLevel: r.RiskLevel, Create: r.PlanSummary.Create, Update: r.PlanSummary.Update,
		Replace: r.PlanSummary.Replace, Delete: r.PlanSummary.Delete, Deadline: r.DecisionDeadline, Simulated: r.Simulated}
	if r.Cost != nil {
		f.CostDelta = review.SignedMoney(r.Cost.Delta) + " a month"
	}
	return f, nil
}
