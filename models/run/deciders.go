package run

import (
	"context"
	"fmt"
	"time"

	"gorm.io/gorm/clause"

	"gantry/models/authz"
	"gantry/models/db"
	"gantry/models/environment"
)

// Who may decide a waiting run now, kept as rows of run_deciders so that "Waiting for
// you" pages in SQL at thousands of runs. The rows are not a second copy of the rules:
// they are PermissionsOf for every member, written whenever one of its inputs changes:
// the run itself (every update, an escalation), a member (role, cloud.live, groups,
// removal: RefreshDecidersOf) and an environment (named owners, restriction, grants:
// RefreshDecidersIn). The deadline is judged when reading; a fresh sign-in belongs to
// the session, so a decision that needs one is marked, not left out.

// deciderRow is one row of run_deciders.
type deciderRow struct {
	RunID          string
	UserID         string
	OrganizationID string
	// Decides: the member may take the decision the run waits for now (Action);
	// otherwise they only see it waiting, for someone else.
	Decides          bool
	Action           *Action
	NeedsFreshSignIn bool
	DecisionDeadline time.Time
}

func (deciderRow) TableName() string { return "run_deciders" }

// decidersOf computes, for each member who sees run r, whether they may take the
// decision it waits for at now (grantees: who holds a grant on its environment,
// overriders: who overrode a policy failure of r).
func decidersOf(r Run, env environment.Environment, members []OrgMember, grantees, overriders map[string]bool, now time.Time) []deciderRow {
	if !r.Waiting() || r.DecisionDeadline == nil {
		return nil
	}
	var out []deciderRow
	for _, m := range members {
		a := Actor{Subject: authz.Subject{UserID: m.UserID, Name: m.Name, OrganizationID: r.OrganizationID, Role: m.Role,
			AuthenticatedAt: now}, Granted: grantees[m.UserID], CloudLive: m.CloudLive, Groups: m.Groups, Overrode: overriders[m.UserID]}
		p := PermissionsOf(r, a, env, now)
		if !p.Visible {
			continue
		}
		d := deciderRow{RunID: r.ID, UserID: m.UserID, OrganizationID: r.OrganizationID, NeedsFreshSignIn: RequirementOf(r).Elevated,
			DecisionDeadline: *r.DecisionDeadline}
		switch {
		case r.State == PendingApproval && p.Approve.Allowed():
			d.Decides, d.Action = true, ptr(ActionApprove)
		case r.SoftBlocked() && p.Override.Allowed():
			d.Decides, d.Action = true, ptr(ActionOverride)
		}
		out = append(out, d)
	}
	return out
}

func ptr[T any](v T) *T { return &v }

// refreshDeciders rewrites run r's deciders in the transaction carried by ctx.
func (s *core) refreshDeciders(ctx context.Context, r Run, now time.Time) error {
	conn := db.Conn(ctx, s.store.db)
	if err := conn.Where("run_id = ?", r.ID).Delete(&deciderRow{}).Error; err != nil {
		return fmt.Errorf("clearing deciders: %w", err)
	}
	if !r.Waiting() {
		return nil
	}
	env, err := s.environments.Lookup(ctx, r.OrganizationID, r.EnvironmentID)
	if err != nil {
		return err
	}
	members, err := s.members.List(ctx, r.OrganizationID)
	if err != nil {
		return err
	}
	grantees, err := s.grantees(ctx, env)
	if err != nil {
		return err
	}
	overriders, err := s.overriders(ctx, r)
	if err != nil {
		return err
	}
	return insertDeciders(ctx, s, decidersOf(r, env, members, grantees, overriders, now))
}

func (s *core) grantees(ctx context.Context, env environment.Environment) (map[string]bool, error) {
	if !env.Restricted {
		return nil, nil
	}
	ids, err := s.environments.Grantees(ctx, env.ID)
	if err != nil {
		return nil, err
	}
	out := map[string]bool{}
	for _, id := range ids {
		out[id] = true
	}
	return out, nil
}

// deciderIDs are the members who may decide run runID now, by the rows of run_deciders.
func (st store) deciderIDs(ctx context.Context, runID string) ([]string, error) {
	var ids []string
	if err := st.conn(ctx).Model(&deciderRow{}).Where("run_id = ? AND decides", runID).Order("user_id").Pluck("user_id", &ids).Error; err != nil {
		return nil, fmt.Errorf("reading deciders: %w", err)
	}
	return ids, nil
}

func insertDeciders(ctx context.Context, s *core, rows []deciderRow) error {
	if len(rows) == 0 {
		return nil
	}
	// An upsert: a member's refresh and a run's own may write the same row at once.
	err := db.Conn(ctx, s.store.db).Clauses(clause.OnConflict{Columns: []clause.Column{{Name: "run_id"}, {Name: "user_id"}},
		DoUpdates: clause.AssignmentColumns([]string{"decides", "action", "needs_fresh_sign_in", "decision_deadline"})}).CreateInBatches(rows, 1000).Error
	if err != nil {
		return fmt.Errorf("saving deciders: %w", err)
	}
	return nil
}

// RefreshDecidersOf rewrites the deciders rows of one member of organization orgID
// across its waiting runs: after a change of role, cloud.live, groups, grants or
// membership (a member who left has none). It checks no permission: the caller made
// the change.
func (s *Eligibility) RefreshDecidersOf(ctx context.Context, orgID, userID string) error {
	return s.refreshWhere(ctx, orgID, "", userID)
}

// A refresh reads the runs without locking them (a member change holds the audit
// chain, and runs are locked before it, never after): a run decided meanwhile may keep
// a row, which no reader shows (they join the run's state and deadline), and a run
// updated meanwhile may be written with the member as it was a moment before. Either
// way the run page and the decision itself ask Permissions afresh.

// RefreshDecidersIn rewrites the deciders rows of environment envID's waiting runs:
// after a change of its named owners, owner groups, restriction or grants.
func (s *Eligibility) RefreshDecidersIn(ctx context.Context, orgID, envID string) error {
	return s.refreshWhere(ctx, orgID, envID, "")
}

// refreshWhere rewrites the rows of the waiting runs of orgID (of envID, if set) for
// every member (or only userID, if set).
func (s *Eligibility) refreshWhere(ctx context.Context, orgID, envID, userID string) error {
	return db.Tx(ctx, s.k.store.db, func(ctx context.Context) error {
		conn := db.Conn(ctx, s.k.store.db)
		q := conn.Where("organization_id = ? AND (state = ? OR (state = ? AND policy_outcome <> 'hard_failed'))", orgID, PendingApproval, PolicyBlocked)
		if envID != "" {
			q = q.Where("environment_id = ?", envID)
		}
		var runs []Run
		if err := q.Find(&runs).Error; err != nil {
			return fmt.Errorf("reading waiting runs: %w", err)
		}
		clear := conn.Where("organization_id = ?", orgID)
		if envID != "" {
			clear = clear.Where("run_id IN (SELECT id FROM runs WHERE organization_id = ? AND environment_id = ?)", orgID, envID)
		}
		if userID != "" {
			clear = clear.Where("user_id = ?", userID)
		}
		if err := clear.Delete(&deciderRow{}).Error; err != nil {
			return fmt.Errorf("clearing deciders: %w", err)
		}
		members, err := s.k.members.List(ctx, orgID)
		if err != nil {
			return err
		}
		if userID != "" {
			members = onlyMember(members, userID)
		}
		now, err := s.k.now(ctx)
		if err != nil {
			return err
		}
		envs := map[string]environment.Environment{}
		grants := map[string]map[string]bool{}
		var rows []deciderRow
		for _, r := range runs {
			env, ok := envs[r.EnvironmentID]
			if !ok {
				if env, err = s.k.environments.Lookup(ctx, orgID, r.EnvironmentID); err != nil {
					return err
				}
				envs[r.EnvironmentID] = env
				if grants[env.ID], err = s.k.grantees(ctx, env); err != nil {
					return err
				}
			}
			overriders, err := s.k.overriders(ctx, r)
			if err != nil {
				return err
			}
			rows = append(rows, decidersOf(r, env, members, grants[env.ID], overriders, now)...)
		}
		return insertDeciders(ctx, s.k, rows)
	})
}

func onlyMember(members []OrgMember, userID string) []OrgMember {
	for _, m := range members {
		if m.UserID == userID {
			return []OrgMember{m}
		}
	}
	return nil
}
