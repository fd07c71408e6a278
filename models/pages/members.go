package pages

import (
	"context"

	"gantry/models/authz"
	"gantry/models/environment"
	"gantry/models/errs"
	"gantry/models/org"
	"gantry/models/scim"
)

// MemberAdmin administers the organization's members (org.Members).
type MemberAdmin interface {
	List(ctx context.Context) ([]org.MembershipView, error)
	Invitations(ctx context.Context) ([]org.Invitation, error)
	Invite(ctx context.Context, email string, role authz.Role) error
}

// MemberGrants are the restricted environments and who holds a grant on each
// (environment.Service).
type MemberGrants interface {
	RestrictedGrants(ctx context.Context) ([]environment.Environment, map[string][]string, error)
}

// GroupRules are the organization's group rules (org.GroupRules).
type GroupRules interface {
	Rules(ctx context.Context) ([]org.GroupRule, error)
	AddRule(ctx context.Context, in org.RuleInput) (org.GroupRule, error)
	Preview(ctx context.Context, in org.RuleInput) ([]org.PreviewRow, error)
}

// Members builds the members page (admins and owners): roles, cloud.live, grants on
// restricted environments, invitations, group rules; and sends invitations and adds
// group rules.
type Members struct {
	Members      MemberAdmin
	Environments MemberGrants
	Rules        GroupRules
}

// MembersPage is the members page.
type MembersPage struct {
	Members     []org.MembershipView
	Invitations []org.Invitation
	// Restricted are the restricted environments; Grants who holds a grant on which (by
	// user id).
	Restricted []environment.Environment
	Grants     map[string][]string
	// CanEntitle: the reader may make and unmake owners.
	CanEntitle bool
	// CanManageSCIM: the reader manages the directory's SCIM token (scim.CanManageToken).
	CanManageSCIM bool
	// InviteErrors are the problems of a refused invitation beside its fields.
	InviteErrors map[string]string
	// Rules are the group rules; CanManageRules: the reader adds and removes them
	// (org.CanManageRules).
	Rules          []org.GroupRule
	CanManageRules bool
	// RuleErrors are the problems of a refused rule (or preview) beside its fields.
	RuleErrors map[string]string
	// Preview is whom the rule in the form would reach (nil: none asked).
	Preview []org.PreviewRow
}

// Page reads the members page.
func (s Members) Page(ctx context.Context) (MembersPage, error) {
	subject, err := authz.Require(ctx, authz.PermOrgRead)
	if err != nil {
		return MembersPage{}, err
	}
	p := MembersPage{CanEntitle: subject.Can(authz.PermEntitlementsManage), CanManageSCIM: scim.CanManageToken(subject),
		CanManageRules: org.CanManageRules(subject)}
	if p.Members, err = s.Members.List(ctx); err != nil {
		return MembersPage{}, err
	}
	if p.Invitations, err = s.Members.Invitations(ctx); err != nil {
		return MembersPage{}, err
	}
	if p.Restricted, p.Grants, err = s.Environments.RestrictedGrants(ctx); err != nil {
		return MembersPage{}, err
	}
	if p.Rules, err = s.Rules.Rules(ctx); err != nil {
		return MembersPage{}, err
	}
	return p, nil
}

// AddRule adds the group rule in; a refused rule answers the page to draw again with
// the problems beside its fields.
func (s Members) AddRule(ctx context.Context, in org.RuleInput) (*MembersPage, error) {
	_, err := s.Rules.AddRule(ctx, in)
	return s.refused(ctx, err, func(p *MembersPage, fields map[string]string) { p.RuleErrors = fields })
}

// PreviewRule is the page with whom the rule in would reach, or with the rule's problems
// beside its fields; it writes nothing.
func (s Members) PreviewRule(ctx context.Context, in org.RuleInput) (MembersPage, error) {
	rows, err := s.Rules.Preview(ctx, in)
	refused, err := s.refused(ctx, err, func(p *MembersPage, fields map[string]string) { p.RuleErrors = fields })
	switch {
	case err != nil:
		return MembersPage{}, err
	case refused != nil:
		return *refused, nil
	}
	p, err := s.Page(ctx)
	p.Preview = rows
	return p, err
}

// refused is the page with the problems of a refused form set on it by set, nil when err
// refused nothing (err itself when it is another failure).
func (s Members) refused(ctx context.Context, err error, set func(*MembersPage, map[string]string)) (*MembersPage, error) {
	v, refused := errs.AsValidation(err)
	if !refused {
		return nil, err
	}
	p, err := s.Page(ctx)
	if err != nil {
		return nil, err
	}
	set(&p, v.Fields)
	return &p, nil
}

// Invite invites email with role; a refused invitation answers the page to draw again
// with the problems beside its fields.
func (s Members) Invite(ctx context.Context, email string, role authz.Role) (*MembersPage, error) {
	return s.refused(ctx, s.Members.Invite(ctx, email, role), func(p *MembersPage, fields map[string]string) { p.InviteErrors = fields })
}
