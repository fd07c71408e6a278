package org

import (
	"context"
	"fmt"

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
	err := db.Conn(ctx, s.db).Raw(`SELECT u.id FROM users u JOIN memberships m ON m.user_id = u.id AND m.organization_id = ?
	        WHERE (u.subject = ? OR u.last_sign_in->>'oid' = ?) AND NOT u.service_account ORDER BY u.id`, orgID, subject, subject).Scan(&ids).Error
	if err != nil {
		return nil, fmt.Errorf("finding members by subject: %w", err)
	}
	return ids, nil
}
