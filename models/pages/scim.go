package pages

import (
	"context"

	"gantry/models/authz"
	"gantry/models/scim"
)

// SCIMTokens makes and tells of an organization's SCIM token (scim.Service).
type SCIMTokens interface {
	Token(ctx context.Context) (scim.TokenStatus, error)
	Rotate(ctx context.Context) (scim.Issued, error)
}

// SCIM builds the directory sync page (owners): the SCIM base URL, whether the
// organization has a token, and making or rotating it.
type SCIM struct {
	Tokens SCIMTokens
	// BaseURL is where directories reach SCIM: the portal's URL and /scim/v2.
	BaseURL string
}

// SCIMPage is the directory sync page.
type SCIMPage struct {
	BaseURL string
	Status  scim.TokenStatus
	// CanManage: the reader makes and rotates the token (scim.CanManageToken).
	CanManage bool
	// Issued is the token just made, its secret shown in this answer only.
	Issued *scim.Issued
}

// Page reads the directory sync page; the service refuses whoever is no owner.
func (s SCIM) Page(ctx context.Context) (SCIMPage, error) {
	status, err := s.Tokens.Token(ctx)
	if err != nil {
		return SCIMPage{}, err
	}
	subject, _ := authz.SubjectFrom(ctx)
	return SCIMPage{BaseURL: s.BaseURL, Status: status, CanManage: scim.CanManageToken(subject)}, nil
}

// Rotate makes the organization's SCIM token, ending the one before, and answers the
// page with the new secret.
func (s SCIM) Rotate(ctx context.Context) (SCIMPage, error) {
	issued, err := s.Tokens.Rotate(ctx)
	if err != nil {
		return SCIMPage{}, err
	}
	p, err := s.Page(ctx)
	if err != nil {
		return SCIMPage{}, err
	}
	p.Issued = &issued
	return p, nil
}
