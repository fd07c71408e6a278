package pages

import (
	"context"
	"time"

	"gantry/models/apitoken"
	"gantry/models/authz"
	"gantry/models/errs"
	"gantry/models/org"
)

// TokenService manages API tokens (apitoken.Service).
type TokenService interface {
	List(ctx context.Context) ([]apitoken.View, error)
	Issue(ctx context.Context, in apitoken.Issue) (apitoken.Issued, error)
}

// ServiceAccounts are the members tokens may be made for (org.Members): the service
// accounts, and adding one.
type ServiceAccounts interface {
	List(ctx context.Context) ([]org.MembershipView, error)
	AddServiceAccount(ctx context.Context, name string, role authz.Role) (org.User, error)
}

// Tokens builds the API tokens page (DESIGN §10): everyone's own personal tokens, and
// for admins the organization's service accounts and their tokens; and takes its forms.
type Tokens struct {
	Tokens  TokenService
	Members ServiceAccounts
}

// TokensPage is the API tokens page, token lifetimes judged at Now.
type TokensPage struct {
	Now    time.Time
	Tokens []apitoken.View
	// CanManage: the reader manages the organization's service accounts (listed here);
	// SeesAll: the reader sees every member's tokens, not only their own.
	CanManage, SeesAll bool
	ServiceAccounts    []org.MembershipView
	// Issued is a token just issued, its secret shown in this answer only.
	Issued *apitoken.Issued
	// IssueErrors and AccountErrors are the problems of a refused token or service
	// account, beside their fields.
	IssueErrors, AccountErrors map[string]string
}

// Page reads the API tokens page for the reader.
func (s Tokens) Page(ctx context.Context) (TokensPage, error) {
	subject, err := authz.Require(ctx, authz.PermOrgRead)
	if err != nil {
		return TokensPage{}, err
	}
	p := TokensPage{Now: time.Now(), CanManage: subject.Can(authz.PermMembersManage),
		SeesAll: subject.Can(authz.PermMembersManage) || subject.Can(authz.PermAuditRead)}
	if p.Tokens, err = s.Tokens.List(ctx); err != nil {
		return TokensPage{}, err
	}
	if p.CanManage {
		members, err := s.Members.List(ctx)
		if err != nil {
			return TokensPage{}, err
		}
		for _, m := range members {
			if m.ServiceAccount {
				p.ServiceAccounts = append(p.ServiceAccounts, m)
			}
		}
	}
	return p, nil
}

// Issue issues the token in describes and answers the page with its secret, or with the
// problems of a refused one beside their fields.
func (s Tokens) Issue(ctx context.Context, in apitoken.Issue) (TokensPage, error) {
	issued, err := s.Tokens.Issue(ctx, in)
	v, refused := errs.AsValidation(err)
	if err != nil && !refused {
		return TokensPage{}, err
	}
	p, err := s.Page(ctx)
	if err != nil {
		return TokensPage{}, err
	}
	if refused {
		p.IssueErrors = v.Fields
	} else {
		p.Issued = &issued
	}
	return p, nil
}

// AddServiceAccount adds a service account named name with role. A refused one answers
// the page to draw again with the problems beside its fields (the user is then zero).
func (s Tokens) AddServiceAccount(ctx context.Context, name string, role authz.Role) (org.User, *TokensPage, error) {
	u, err := s.Members.AddServiceAccount(ctx, name, role)
	v, refused := errs.AsValidation(err)
	if !refused {
		return u, nil, err
	}
	p, err := s.Page(ctx)
	if err != nil {
		return org.User{}, nil, err
	}
	p.AccountErrors = v.Fields
	return org.User{}, &p, nil
}
