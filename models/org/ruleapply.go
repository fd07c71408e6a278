package org

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"gorm.io/gorm"
	"gorm.io/gorm/clause"

	"gantry/models/audit"
	"gantry/models/authz"
	"gantry/models/db"
	"gantry/models/runport"
)

// Directory is what an organization's SCIM directory says of a person (scim.Service).
// links are the identifiers its externalId may name the person by: the subject they
// sign in with and the object id their last sign-in asserted (scim.LinkedBy).
type Directory interface {
	// Standing returns the display names of orgID's directory groups that a directory
	// user linked by links, naming the verified address email, is in ("": none counts),
	// and whether a linked directory user is inactive.
	Standing(ctx context.Context, orgID string, links []string, email string) (groups []string, deactivated bool, err error)
	// GroupMembers returns orgID's active directory users in the group displayed as
	// group: the preview's newcomers.
	GroupMembers(ctx context.Context, orgID, group string) ([]DirectoryPerson, error)
	// Organizations returns the organizations whose directory holds a user linked by
	// links: where a sign-in may find directory groups or a deactivation.
	Organizations(ctx context.Context, links []string) ([]string, error)
}

// DirectoryPerson is a directory user as the preview names them: Link is their
// externalId (what links them to a person who signs in), UserName what the directory
// calls them.
type DirectoryPerson struct{ Link, UserName string }

// GroupRules keeps the memberships that group rules made true to the rules: at every
// sign-in, at every change of the organization's directory and of its rules. Owners
// manage the rules (ruleadmin.go); a membership an invitation or a person made is never
// the rules' to change.
type GroupRules struct {
	db        *gorm.DB
	audit     *audit.Log
	approvals runport.MemberWatcher
	directory Directory
}

// NewGroupRules returns the group rules; approvals is the run lifecycle, which sends a
// lowered or ended member's approvals back to waiting and re-routes their decisions;
// directory makes the organizations' SCIM directories a source of groups and of
// deactivations.
func NewGroupRules(gdb *gorm.DB, log *audit.Log, approvals runport.MemberWatcher, directory Directory) *GroupRules {
	return &GroupRules{db: gdb, audit: log, approvals: approvals, directory: directory}
}

// ruleEvent is an audit event the rules owe, recorded once every row is written (the
// runs' lock order: rows before the audit chain).
type ruleEvent struct {
	orgID string
	entry audit.Entry
}

func (r *GroupRules) record(ctx context.Context, events []ruleEvent) error {
	for _, e := range events {
		if err := r.audit.RecordAs(ctx, authz.System(e.orgID), e.entry); err != nil {
			return err
		}
	}
	return nil
}

// concernedOrganizations are the organizations whose rules can concern a person who signs
// in: a rule names a group they claimed (1), or the organization's directory links them
// (2); or they hold a membership the rules made (3, 4).
const concernedOrganizations = `SELECT organization_id FROM group_rules WHERE group_name IN ? OR organization_id IN ?
        UNION SELECT organization_id FROM memberships WHERE user_id = ? AND source = ? ORDER BY 1`

// AtSignIn applies the group rules to u, who has just signed in (their groups snapshot
// is this sign-in's), in every organization where they can change something: where a
// rule names a group this sign-in claimed, where the organization's directory links u,
// or where u holds a membership the rules made. One transaction per organization; the
// organizations whose rules cannot concern u are neither read nor locked.
func (r *GroupRules) AtSignIn(ctx context.Context, u User) error {
	if u.ServiceAccount {
		return nil
	}
	directories, err := r.directory.Organizations(ctx, links(u))
	if err != nil {
		return err
	}
	var orgIDs []string
	err = db.Conn(ctx, r.db).Raw(concernedOrganizations, u.Groups, directories, u.ID, SourceRule).Scan(&orgIDs).Error
	if err != nil {
		return fmt.Errorf("finding organizations whose group rules concern a person: %w", err)
	}
	for _, orgID := range orgIDs {
		if err := r.applyAlone(ctx, orgID, u, "signed in"); err != nil {
			return err
		}
	}
	return nil
}

// applyAlone applies orgID's rules to u in a transaction of its own, and records what
// they did.
func (r *GroupRules) applyAlone(ctx context.Context, orgID string, u User, why string) error {
	return db.Tx(ctx, r.db, func(ctx context.Context) error {
		events, _, err := r.apply(ctx, orgID, u, why, false)
		if err != nil {
			return err
		}
		return r.record(ctx, events)
	})
}

// ForDirectoryUser applies orgID's rules to the people its directory user with
// externalId link names, in the caller's transaction, after a change of that user or of
// its groups (why); gone: the directory deleted that user, who counts as deactivated. It
// returns the ids of the people whose rule membership ended.
func (r *GroupRules) ForDirectoryUser(ctx context.Context, orgID, link, why string, gone bool) ([]string, error) {
	if link == "" {
		return nil, nil
	}
	var people []User
	err := linkedTo(db.Conn(ctx, r.db), link).Order("id").Find(&people).Error
	if err != nil {
		return nil, fmt.Errorf("finding people linked to a directory user: %w", err)
	}
	var events []ruleEvent
	ended := []string{}
	for _, u := range people {
		evs, end, err := r.apply(ctx, orgID, u, why, gone)
		if err != nil {
			return nil, err
		}
		events = append(events, evs...)
		if end {
			ended = append(ended, u.ID)
		}
	}
	return ended, r.record(ctx, events)
}

// reapply applies orgID's rules again to every member the rules made, from their last
// snapshot, after the rules changed (why). Each member gets a transaction of their own.
func (r *GroupRules) reapply(ctx context.Context, orgID, why string) error {
	var people []User
	err := db.Conn(ctx, r.db).Where("id IN (SELECT user_id FROM memberships WHERE organization_id = ? AND source = ?)", orgID, SourceRule).
		Order("id").Find(&people).Error
	if err != nil {
		return fmt.Errorf("listing rule members: %w", err)
	}
	for _, u := range people {
		if err := r.applyAlone(ctx, orgID, u, why); err != nil {
			return err
		}
	}
	return nil
}

// standing is what is known of u's groups for orgID: the groups of their last sign-in
// and of the organization's directory.
func (r *GroupRules) standing(ctx context.Context, orgID string, u User) (Standing, error) {
	st := Standing{Claimed: u.Groups, ClaimsKnown: u.LastSignIn == nil || !u.LastSignIn.GroupsOverage}
	// An externalId is the organization's directory's to write: its groups count for a
	// person only where it also names the address the provider verified.
	email := ""
	if u.LastSignIn != nil && u.LastSignIn.Verified {
		email = u.Email
	}
	var err error
	st.Directory, st.Deactivated, err = r.directory.Standing(ctx, orgID, links(u), email)
	return st, err
}

// apply decides and writes what orgID's rules make of u, in the caller's transaction
// after taking the organization's member lock (one member change at a time, as on the
// members page). It voids approvals and re-routes waiting decisions itself and returns
// the audit events it owes, and whether u's rule membership ended. gone counts u as
// deactivated in the directory.
func (r *GroupRules) apply(ctx context.Context, orgID string, u User, why string, gone bool) ([]ruleEvent, bool, error) {
	if err := lockMembers(ctx, r.db, orgID); err != nil {
		return nil, false, err
	}
	conn := db.Conn(ctx, r.db)
	var rules []GroupRule
	if err := conn.Where("organization_id = ?", orgID).Order("group_name").Find(&rules).Error; err != nil {
		return nil, false, fmt.Errorf("reading group rules: %w", err)
	}
	var current *Membership
	var m Membership
	err := conn.Clauses(clause.Locking{Strength: "UPDATE"}).Where("organization_id = ? AND user_id = ?", orgID, u.ID).Take(&m).Error
	switch {
	case err == nil:
		current = &m
	case !errors.Is(err, gorm.ErrRecordNotFound):
		return nil, false, fmt.Errorf("reading membership: %w", err)
	}
	st, err := r.standing(ctx, orgID, u)
	if err != nil {
		return nil, false, err
	}
	st.Deactivated = st.Deactivated || gone
	d := Decide(rules, st, current)
	// The name as it was: the audit page names a person who is no member any more by it.
	data := map[string]any{"why": why, "groups": nonNilStrings(d.Matched), "name": u.DisplayName()}
	where := conn.Model(&Membership{}).Where("organization_id = ? AND user_id = ?", orgID, u.ID)
	var action string
	switch d.Outcome {
	case RuleKeep:
		return nil, false, nil
	case RuleAdmit:
		action = "membership.rule_admitted"
		data["role"], data["cloud_live"] = d.Role, d.CloudLive
		if err := conn.Create(&Membership{OrganizationID: orgID, UserID: u.ID, Role: d.Role, CloudLive: d.CloudLive, Source: SourceRule}).Error; err != nil {
			return nil, false, fmt.Errorf("admitting by a group rule: %w", db.Translate(err))
		}
	case RuleChange:
		action = "membership.rule_changed"
		data["before"] = map[string]any{"role": current.Role, "cloud_live": current.CloudLive}
		data["role"], data["cloud_live"] = d.Role, d.CloudLive
		if lowers(current.Role, d.Role) || current.CloudLive && !d.CloudLive {
			reason := fmt.Sprintf("the group rules now make them %s", d.Role)
			if !d.CloudLive && current.CloudLive {
				reason += " without the live-cloud entitlement"
			}
			if err := r.approvals.VoidApprovalsOf(ctx, orgID, u.ID, reason); err != nil {
				return nil, false, err
			}
		}
		if err := where.Updates(map[string]any{"role": d.Role, "cloud_live": d.CloudLive}).Error; err != nil {
			return nil, false, fmt.Errorf("changing a rule membership: %w", err)
		}
	case RuleEnd:
		action = "membership.rule_ended"
		data["before"] = map[string]any{"role": current.Role, "cloud_live": current.CloudLive}
		reason := "no group rule maps their groups any more"
		if st.Deactivated {
			reason = "the directory deactivated them"
		}
		data["reason"] = reason
		if err := r.approvals.VoidApprovalsOf(ctx, orgID, u.ID, reason); err != nil {
			return nil, false, err
		}
		if err := conn.Where("organization_id = ? AND user_id = ?", orgID, u.ID).Delete(&Membership{}).Error; err != nil {
			return nil, false, fmt.Errorf("ending a rule membership: %w", db.Translate(err))
		}
	}
	// Which waiting runs the person may decide now: an ended member's decisions go to
	// the others, as for any removed member.
	if err := r.approvals.RefreshDecidersOf(ctx, orgID, u.ID); err != nil {
		return nil, false, err
	}
	return []ruleEvent{{orgID: orgID, entry: audit.Entry{Action: action, TargetType: "user", TargetID: u.ID, Data: data}}},
		d.Outcome == RuleEnd, nil
}

func nonNilStrings(s []string) []string {
	if s == nil {
		return []string{}
	}
	return slices.Clone(s)
}
