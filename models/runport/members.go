package runport

import (
	"context"

	"gantry/models/authz"
)

// Member is what the rules need to know about a member of an organization.
type Member struct {
	Name      string
	Role      authz.Role
	CloudLive bool
	Groups    []string
}

// OrgMember is a member of an organization as the rules see it.
type OrgMember struct {
	UserID string
	Member
}

// MemberWatcher is what the members service (models/org) calls, in the transaction
// that changes a member: demoting or removing a member or taking cloud.live away sends
// that member's approvals that have not started applying back to waiting; any change
// rewrites which waiting runs the member may decide (run.Eligibility implements it).
type MemberWatcher interface {
	VoidApprovalsOf(ctx context.Context, orgID, userID, reason string) error
	RefreshDecidersOf(ctx context.Context, orgID, userID string) error
}
