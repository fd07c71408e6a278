// Package authz defines who is acting (the Subject carried in the request context), the
// roles of an organization and the permissions each role holds. Services call Require at
// the top of every method; handlers only ask Can to decide what to show.
package authz

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"gantry/models/errs"
)

// Role is a member's role in one organization.
type Role string

const (
	RoleViewer   Role = "viewer"
	RoleOperator Role = "operator"
	RoleAdmin    Role = "admin"
	RoleOwner    Role = "owner"
	// RoleAuditor is read-only and may export the audit log; it sits outside the
	// viewer < operator < admin < owner ladder.
	RoleAuditor Role = "auditor"
)

// Roles lists every role in the order shown to people.
var Roles = []Role{RoleViewer, RoleOperator, RoleAdmin, RoleOwner, RoleAuditor}

// Valid reports whether r is one of the defined roles.
func (r Role) Valid() bool {
	for _, known := range Roles {
		if r == known {
			return true
		}
	}
	return false
}

// rank orders the ladder; the auditor has no rank on it.
func (r Role) rank() int {
	switch r {
	case RoleViewer:
		return 1
	case RoleOperator:
		return 2
	case RoleAdmin:
		return 3
	case RoleOwner:
		return 4
	}
	return 0
}

// AtLeast reports whether r is min or above it on the ladder.
func (r Role) AtLeast(min Role) bool { return r.rank() > 0 && r.rank() >= min.rank() }

// Permission names one thing a subject may do.
type Permission string

const (
	PermOrgRead            Permission = "org.read"
	PermEnvironmentsManage Permission = "environments.manage"
	PermAuditRead          Permission = "audit.read"
	// PermAuditExport: export the audit log as signed files (auditors, admins, owners).
	PermAuditExport       Permission = "audit.export"
	PermProvisioningPlan  Permission = "provisioning.plan"
	PermProvisioningApply Permission = "provisioning.apply"
	// PermRunsApply: request runs that change infrastructure (apply, destroy, a
	// break-glass window), not only dry runs. Every role that plans holds it; an API
	// token only with scope apply.
	PermRunsApply Permission = "runs.apply"
	// PermPoliciesManage: set policy enforcement per environment, upload org
	// policies and override soft-mandatory failures (admins and owners).
	PermPoliciesManage Permission = "policies.manage"
	// PermMatrixManage: edit the risk classes and the approval matrix (owners).
	PermMatrixManage Permission = "matrix.manage"
	// PermMembersManage: invite members, change their roles below owner, remove them
	// and grant restricted environments (admins and owners).
	PermMembersManage Permission = "members.manage"
	// PermEntitlementsManage: grant cloud.live and make or unmake owners (owners).
	PermEntitlementsManage Permission = "entitlements.manage"
	// PermWebhooksManage: add, change, redeliver and remove the organization's outgoing
	// webhooks, and read their delivery logs (admins and owners).
	PermWebhooksManage Permission = "webhooks.manage"
)

// allows is the one table of which role holds which permission.
func (r Role) allows(p Permission) bool {
	switch p {
	case PermOrgRead:
		return r.Valid()
	case PermEnvironmentsManage, PermPoliciesManage, PermMembersManage, PermWebhooksManage:
		return r.AtLeast(RoleAdmin)
	case PermMatrixManage, PermEntitlementsManage:
		return r.AtLeast(RoleOwner)
	case PermAuditRead, PermAuditExport:
		return r == RoleAuditor || r.AtLeast(RoleAdmin)
	case PermProvisioningPlan, PermProvisioningApply, PermRunsApply:
		return r.AtLeast(RoleOperator)
	}
	return false
}

// Subject is the actor of a request: a signed-in member of one organization, or the
// system itself (seeding, workers), which acts as an owner of the organization.
type Subject struct {
	UserID         string
	Name           string
	OrganizationID string
	Role           Role
	System         bool
	// AuthenticatedAt is when the person last signed in (zero for the system): an
	// elevated decision needs a recent sign-in.
	AuthenticatedAt time.Time
	// TokenID is the API token the request came with ("" for a signed-in person): the
	// subject may then do only what both its role and the token's Scopes allow.
	TokenID string
	Scopes  []Scope
}

// System returns the subject Gantry uses for its own actions in organization orgID.
func System(orgID string) Subject {
	return Subject{UserID: "system", Name: "Gantry", OrganizationID: orgID, Role: RoleOwner, System: true}
}

// Can reports whether the subject holds permission p in its organization: its role
// allows it and, for an API token, one of the token's scopes does too.
func (s Subject) Can(p Permission) bool {
	return s.OrganizationID != "" && s.Role.allows(p) && (s.TokenID == "" || anyGrants(s.Scopes, p))
}

// LogValue keeps log lines short and free of anything but ids.
func (s Subject) LogValue() slog.Value {
	return slog.GroupValue(slog.String("user", s.UserID), slog.String("org", s.OrganizationID), slog.String("role", string(s.Role)))
}

type ctxKey struct{}

// WithSubject returns ctx carrying s.
func WithSubject(ctx context.Context, s Subject) context.Context {
	return context.WithValue(ctx, ctxKey{}, s)
}

// SubjectFrom returns the subject in ctx, if any.
func SubjectFrom(ctx context.Context) (Subject, bool) {
	s, ok := ctx.Value(ctxKey{}).(Subject)
	return s, ok
}

// Require returns the subject in ctx when it holds p: ErrUnauthenticated when there is
// none, ErrForbidden when its role does not allow p.
func Require(ctx context.Context, p Permission) (Subject, error) {
	s, ok := SubjectFrom(ctx)
	if !ok || s.OrganizationID == "" {
		return Subject{}, errs.ErrUnauthenticated
	}
	if !s.Can(p) {
		return Subject{}, fmt.Errorf("%s needs %s, role is %s: %w", s.UserID, p, s.Role, errs.ErrForbidden)
	}
	return s, nil
}
