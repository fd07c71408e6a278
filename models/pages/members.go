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

// Members builds the members page (admins and owners): roles, cloud.live, grants on
// restricted environments, invitations; and sends invitations.
type Members struct {
	Members      MemberAdmin
	Environments MemberGrants
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
}

// Page reads the members page.
func (s Members) Page(ctx context.Context) (MembersPage, error) {
	subject, err := authz.Require(ctx, authz.PermOrgRead)
	if err != nil {
		return MembersPage{}, err
	}
	p := MembersPage{CanEntitle: subject.Can(authz.PermEntitlementsManage), CanManageSCIM: scim.CanManageToken(subject)}
	if p.Members, err = s.Members.List(ctx); err != nil {
		return MembersPage{}, err
	}
	if p.Invitations, err = s.Members.Invitations(ctx); err != nil {
		return MembersPage{}, err
	}
	if p.Restricted, p.Grants, err = s.Environments.RestrictedGrants(ctx); err != nil {
		return MembersPage{}, err
	}
	return p, nil
}

// Invite invites email with role; a refused invitation answers the page to draw again
// with the problems beside its fields.
func (s Members) Invite(ctx context.Context, email string, role authz.Role) (*MembersPage, error) {
	err := s.Members.Invite(ctx, email, role)
	v, refused := errs.AsValidation(err)
	if !refused {
		return nil, err
	}
	p, err := s.Page(ctx)
	if err != nil {
		return nil, err
	}
	p.InviteErrors = v.Fields
	return &p, nil
}
