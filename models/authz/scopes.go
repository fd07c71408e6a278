package authz

import "slices"

// Scope is what an API token may be used for (DESIGN §10). A token's holder (a person
// or a service account, both members) keeps their role: the token only narrows it, so
// what a token may do is its scopes' permissions within its holder's role (and, as for
// anyone, the grants of restricted environments and cloud.live).
type Scope string

const (
	// ScopeRead reads what the holder may see.
	ScopeRead Scope = "read"
	// ScopePlan requests dry runs.
	ScopePlan Scope = "plan"
	// ScopeApply requests runs that change infrastructure (apply, destroy, a drift check's
	// correction, a break-glass window), and dry runs.
	ScopeApply Scope = "apply"
	// ScopeDecide approves and rejects runs (never a risk-3 one: that needs a person's
	// fresh sign-in).
	ScopeDecide Scope = "decide"
	// ScopeAdmin manages environments, policies, members, webhooks and the matrix.
	ScopeAdmin Scope = "admin"
	// ScopeAudit reads and exports the audit log.
	ScopeAudit Scope = "audit"
)

// Scopes lists every scope in the order pages show them.
var Scopes = []Scope{ScopeRead, ScopePlan, ScopeApply, ScopeDecide, ScopeAdmin, ScopeAudit}

// Valid reports whether sc is a known scope.
func (sc Scope) Valid() bool { return slices.Contains(Scopes, sc) }

// Permissions is the one table of what a scope lets a token do (within its holder's
// role); every scope reads (docs/api.md says the same table, a test walks it).
func (sc Scope) Permissions() []Permission {
	switch sc {
	case ScopeRead:
		return []Permission{PermOrgRead}
	case ScopePlan:
		return []Permission{PermOrgRead, PermProvisioningPlan}
	case ScopeApply:
		return []Permission{PermOrgRead, PermProvisioningPlan, PermRunsApply}
	case ScopeDecide:
		return []Permission{PermOrgRead, PermProvisioningApply}
	case ScopeAdmin:
		return []Permission{PermOrgRead, PermEnvironmentsManage, PermPoliciesManage, PermMembersManage, PermWebhooksManage,
			PermMatrixManage, PermEntitlementsManage}
	case ScopeAudit:
		return []Permission{PermOrgRead, PermAuditRead, PermAuditExport}
	}
	return nil
}

// anyGrants reports whether one of scopes grants p.
func anyGrants(scopes []Scope, p Permission) bool {
	for _, sc := range scopes {
		if slices.Contains(sc.Permissions(), p) {
			return true
		}
	}
	return false
}
