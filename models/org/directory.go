package org

import (
	"context"
	"fmt"

	"gorm.io/gorm"

	"gantry/models/db"
)

// MembersBySubject returns the members of organization orgID who sign in with subject
// at any issuer Gantry trusts, or whose last sign-in asserted it as Entra's object id
// (oid) (people, never service accounts): what a directory's externalId links to
// (models/scim/rules.go LinkedBy). An e-mail address never links.
func (s *Service) MembersBySubject(ctx context.Context, orgID, subject string) ([]string, error) {
	var ids []string
	if subject == "" {
		return nil, nil
	}
	err := linkedTo(db.Conn(ctx, s.db).Model(&User{}), subject).
		Where("users.id IN (SELECT user_id FROM memberships WHERE organization_id = ?)", orgID).Order("users.id").Pluck("users.id", &ids).Error
	if err != nil {
		return nil, fmt.Errorf("finding members by subject: %w", err)
	}
	return ids, nil
}

// How a directory's externalId links to people (models/scim/rules.go LinkedBy), in its
// one home: the subject they sign in with, or the object id their last sign-in asserted
// (Entra's oid); never a service account, never by an e-mail address. links says it of
// one person, linkedTo narrows a query on users to the people one link names.

// links are the identifiers a directory's externalId names u by.
func links(u User) []string {
	out := []string{u.Subject}
	if u.LastSignIn != nil && u.LastSignIn.ObjectID != "" && u.LastSignIn.ObjectID != u.Subject {
		out = append(out, u.LastSignIn.ObjectID)
	}
	return out
}

// linkedTo narrows q, a query on users, to the people link names.
func linkedTo(q *gorm.DB, link string) *gorm.DB {
	return q.Where("NOT users.service_account AND (users.subject = ? OR users.last_sign_in->>'oid' = ?)", link, link)
}
