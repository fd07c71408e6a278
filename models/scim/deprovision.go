package scim

import (
	"context"
	"slices"

	"gantry/models/audit"
)

// Members finds the Gantry people a directory user links to (org.Service).
type Members interface {
	MembersBySubject(ctx context.Context, orgID, subject string) ([]string, error)
}

// deprovision ends the access of the people directory user u links to (rules.go
// LinkedBy), in the caller's transaction: every browser session of theirs and every API
// token they hold in this organization, at once, with one audit event naming the
// memberships the group rules ended (ended: applyRules ran first). A membership from an
// invitation or a person's action stays: it is never the directory's to end
// (docs/scim.md).
func (s *Service) deprovision(ctx context.Context, c Client, u userRow, why string, ended []string) error {
	linked, err := s.members.MembersBySubject(ctx, c.OrganizationID, deref(u.ExternalID))
	if err != nil {
		return err
	}
	// The people whose rule membership just ended are no members any more, but their
	// sessions and tokens end all the same.
	for _, id := range ended {
		if !slices.Contains(linked, id) {
			linked = append(linked, id)
		}
	}
	slices.Sort(linked)
	var sessions int64
	revoked := []string{}
	for _, userID := range linked {
		n, err := s.sessions.EndAllOf(ctx, userID)
		if err != nil {
			return err
		}
		sessions += n
		ids, err := s.tokens.RevokeAllOf(ctx, c.OrganizationID, userID, c.actor().UserID)
		if err != nil {
			return err
		}
		revoked = append(revoked, ids...)
	}
	return s.record(ctx, c, audit.Entry{Action: "scim.user_deprovisioned", TargetType: "scim_user", TargetID: u.ID,
		Data: map[string]any{"why": why, "user_name": u.UserName, "external_id": deref(u.ExternalID), "linked_user_ids": nonNil(linked),
			"sessions_ended": sessions, "api_tokens_revoked": revoked, "memberships_removed": nonNil(ended)}})
}

func nonNil(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}
