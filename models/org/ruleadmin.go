package org

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"unicode"
	"unicode/utf8"

	"gantry/models/audit"
	"gantry/models/authz"
	"gantry/models/db"
	"gantry/models/errs"
)

// RuleInput is a group rule as a person writes it.
type RuleInput struct {
	Group     string
	Role      authz.Role
	CloudLive bool
}

// check trims in and returns the field errors of a rule, nil when it is one.
func (in *RuleInput) check() error {
	in.Group = strings.TrimSpace(in.Group)
	v := &errs.Validation{}
	switch {
	case in.Group == "":
		v.Add("group", "Name the group as the provider sends it: a name, a path such as /platform/approvers, or an Entra group's object id.")
	case utf8.RuneCountInString(in.Group) > MaxGroupName || !utf8.ValidString(in.Group) || strings.IndexFunc(in.Group, invisible) >= 0:
		v.Add("group", fmt.Sprintf("A group name is at most %d characters, with no control or invisible characters.", MaxGroupName))
	}
	switch {
	case in.Role == authz.RoleOwner:
		v.Add("role", "Owners stay invitation-only: invite an owner by e-mail address instead.")
	case !slices.Contains(RuleRoles, in.Role):
		v.Add("role", "Choose "+ruleRoleWords()+".")
	}
	return v.Err()
}

// mayManageRules is the subject in ctx when CanManageRules holds for them.
func mayManageRules(ctx context.Context) (authz.Subject, error) {
	subject, err := authz.Require(ctx, authz.PermOrgRead)
	if err != nil {
		return authz.Subject{}, err
	}
	if !CanManageRules(subject) {
		return authz.Subject{}, errs.Explain(errs.ErrForbidden, "Only an owner adds or removes group rules.")
	}
	return subject, nil
}

// invisible reports control and format characters (a zero-width space, say): a rule whose
// group holds one looks like another and matches nothing the provider sends.
func invisible(r rune) bool { return unicode.IsControl(r) || unicode.Is(unicode.Cf, r) }

// Rules lists the subject's organization's group rules by group (admins and owners read
// them; owners change them).
func (r *GroupRules) Rules(ctx context.Context) ([]GroupRule, error) {
	subject, err := authz.Require(ctx, authz.PermMembersManage)
	if err != nil {
		return nil, err
	}
	var out []GroupRule
	if err := db.Conn(ctx, r.db).Where("organization_id = ?", subject.OrganizationID).Order("group_name").Find(&out).Error; err != nil {
		return nil, fmt.Errorf("listing group rules: %w", err)
	}
	return out, nil
}

// AddRule maps a group to a role (owners: a rule gives roles and cloud.live to people no
// one invited). Bad input is *errs.Validation and nothing is written. The members the
// rules made get the new rule at once; others at their next sign-in.
func (r *GroupRules) AddRule(ctx context.Context, in RuleInput) (GroupRule, error) {
	subject, err := mayManageRules(ctx)
	if err != nil {
		return GroupRule{}, err
	}
	if err := in.check(); err != nil {
		return GroupRule{}, err
	}
	rule := GroupRule{ID: db.NewID("grp"), OrganizationID: subject.OrganizationID, GroupName: in.Group, Role: in.Role,
		CloudLive: in.CloudLive, CreatedBy: subject.UserID}
	err = db.Tx(ctx, r.db, func(ctx context.Context) error {
		var taken int64
		if err := db.Conn(ctx, r.db).Model(&GroupRule{}).Where("organization_id = ? AND group_name = ?", rule.OrganizationID, rule.GroupName).
			Count(&taken).Error; err != nil {
			return fmt.Errorf("checking group rules: %w", err)
		}
		if taken > 0 {
			v := &errs.Validation{}
			v.Add("group", "This group already has a rule: remove it first to map the group differently.")
			return v
		}
		if err := db.Conn(ctx, r.db).Create(&rule).Error; err != nil {
			return fmt.Errorf("saving group rule: %w", db.Translate(err))
		}
		return r.audit.Record(ctx, audit.Entry{Action: "group_rule.added", TargetType: "group_rule", TargetID: rule.ID,
			Data: map[string]any{"group": rule.GroupName, "role": rule.Role, "cloud_live": rule.CloudLive}})
	})
	if err != nil {
		return GroupRule{}, err
	}
	return rule, r.reapply(ctx, subject.OrganizationID, "the group rules changed")
}

// RemoveRule deletes rule id (owners). The members it made lose what it gave at once:
// their next role is what the remaining rules give, or none.
func (r *GroupRules) RemoveRule(ctx context.Context, id string) error {
	subject, err := mayManageRules(ctx)
	if err != nil {
		return err
	}
	err = db.Tx(ctx, r.db, func(ctx context.Context) error {
		var rule GroupRule
		err := db.Conn(ctx, r.db).Where("organization_id = ? AND id = ?", subject.OrganizationID, id).Take(&rule).Error
		if err != nil {
			return fmt.Errorf("group rule %s: %w", id, db.Translate(err))
		}
		if err := db.Conn(ctx, r.db).Where("id = ?", rule.ID).Delete(&GroupRule{}).Error; err != nil {
			return fmt.Errorf("removing group rule: %w", err)
		}
		return r.audit.Record(ctx, audit.Entry{Action: "group_rule.removed", TargetType: "group_rule", TargetID: rule.ID,
			Data: map[string]any{"group": rule.GroupName, "role": rule.Role, "cloud_live": rule.CloudLive}})
	})
	if err != nil {
		return err
	}
	return r.reapply(ctx, subject.OrganizationID, "the group rules changed")
}

// PreviewRow is one person a rule would reach: a member whose last sign-in (or the
// organization's directory) shows the group, or a directory user who is no member yet.
type PreviewRow struct {
	// UserID is empty for a directory user who has not signed in as a member.
	UserID string
	Name   string
	Email  string
	// Role and Source are the membership today (empty: none).
	Role   authz.Role
	Source string
	// Effect says what the rules would do, in words.
	Effect string
}

// Preview lists whom a rule for in.Group would reach, with the rules as they are plus
// this one: members from their last group snapshots, and the organization's directory
// users in that group who are no members. It writes nothing (admins and owners).
func (r *GroupRules) Preview(ctx context.Context, in RuleInput) ([]PreviewRow, error) {
	subject, err := authz.Require(ctx, authz.PermMembersManage)
	if err != nil {
		return nil, err
	}
	if err := in.check(); err != nil {
		return nil, err
	}
	orgID := subject.OrganizationID
	var rules []GroupRule
	if err := db.Conn(ctx, r.db).Where("organization_id = ? AND group_name <> ?", orgID, in.Group).Find(&rules).Error; err != nil {
		return nil, fmt.Errorf("reading group rules: %w", err)
	}
	rules = append(rules, GroupRule{GroupName: in.Group, Role: in.Role, CloudLive: in.CloudLive})
	members, err := membersOf(ctx, r.db, orgID)
	if err != nil {
		return nil, err
	}
	// The members' users in one read, not one per member.
	var users []User
	if err := db.Conn(ctx, r.db).Where("id IN (SELECT user_id FROM memberships WHERE organization_id = ?) AND NOT service_account", orgID).
		Find(&users).Error; err != nil {
		return nil, fmt.Errorf("reading members: %w", err)
	}
	byID := map[string]User{}
	for _, u := range users {
		byID[u.ID] = u
	}
	// The directory users in the group: the newcomers, and the links by which a member
	// may be in it through the directory.
	inGroup, err := r.directory.GroupMembers(ctx, orgID, in.Group)
	if err != nil {
		return nil, err
	}
	groupLinks := map[string]bool{}
	for _, n := range inGroup {
		groupLinks[n.Link] = true
	}
	out := []PreviewRow{}
	linked := map[string]bool{}
	for _, m := range members {
		u, ok := byID[m.UserID]
		if !ok {
			continue // a service account
		}
		viaDirectory := false
		for _, l := range links(u) {
			linked[l] = true
			viaDirectory = viaDirectory || groupLinks[l]
		}
		// Only a member the group can reach costs a read of their directory standing.
		if !slices.Contains(u.Groups, in.Group) && !viaDirectory {
			continue
		}
		st, err := r.standing(ctx, orgID, u)
		if err != nil {
			return nil, err
		}
		if !slices.Contains(st.Claimed, in.Group) && !slices.Contains(st.Directory, in.Group) {
			continue
		}
		row := PreviewRow{UserID: m.UserID, Name: m.UserName, Email: m.UserEmail, Role: m.Role, Source: m.Source}
		current := Membership{Role: m.Role, CloudLive: m.CloudLive, Source: m.Source}
		d := Decide(rules, st, &current)
		switch {
		case m.Source != SourceRule:
			row.Effect = "Unchanged: invited or set by a person, so rules never change this membership."
		case d.Outcome == RuleChange:
			row.Effect = fmt.Sprintf("Becomes %s%s.", d.Role, liveWords(d.CloudLive))
		case d.Outcome == RuleKeep && !st.ClaimsKnown:
			row.Effect = "Unchanged for now: their provider sent too many groups to fit in the token."
		default:
			row.Effect = "Unchanged: the rules already give this."
		}
		out = append(out, row)
	}
	// A newcomer is in the group and in no other the preview knows of.
	joins := Decide(rules, Standing{Directory: []string{in.Group}, ClaimsKnown: true}, nil)
	for _, n := range inGroup {
		if n.Link != "" && linked[n.Link] {
			continue
		}
		out = append(out, PreviewRow{Name: n.UserName, Effect: fmt.Sprintf("Joins as %s%s at their next sign-in (directory user), when the provider verifies this address for them.",
			joins.Role, liveWords(joins.CloudLive))})
	}
	return out, nil
}

// ruleRoleWords lists RuleRoles for people: "viewer, auditor, operator or admin".
func ruleRoleWords() string {
	words := make([]string, len(RuleRoles))
	for i, r := range RuleRoles {
		words[i] = string(r)
	}
	return strings.Join(words[:len(words)-1], ", ") + " or " + words[len(words)-1]
}

func liveWords(live bool) string {
	if live {
		return " with the live-cloud entitlement"
	}
	return ""
}
