package org

import (
	"slices"
	"time"

	"gantry/models/authz"
)

// Where a membership came from (memberships.source).
const (
	// SourceDirect: an invitation, an owner's or admin's action, a service account or
	// bootstrap. Group rules never change it.
	SourceDirect = "direct"
	// SourceRule: a group rule made it; the rules change it and end it.
	SourceRule = "rule"
)

// GroupRule maps an identity provider's group (or a SCIM directory group, by display
// name) to a role and, when CloudLive, the live-cloud entitlement, in one organization.
type GroupRule struct {
	ID             string
	OrganizationID string
	// GroupName is matched exactly against the groups claim's values (an Entra group's
	// object id, a Keycloak full path such as /platform/approvers, an Okta group name).
	GroupName string
	Role      authz.Role
	CloudLive bool
	CreatedBy string
	CreatedAt time.Time
}

// CanManageRules is who adds and removes an organization's group rules: its owners (a
// rule hands roles and cloud.live to people no one invited). Admins read them.
func CanManageRules(s authz.Subject) bool { return s.Can(authz.PermEntitlementsManage) }

// RuleRoles are the roles a rule may give, lowest first: owner stays invitation-only.
var RuleRoles = []authz.Role{authz.RoleViewer, authz.RoleAuditor, authz.RoleOperator, authz.RoleAdmin}

// MaxGroupName is the longest group name a rule holds, in characters (group_rules'
// CHECK says the same).
const MaxGroupName = 256

// ruleRank orders the roles a rule gives: a person in several mapped groups gets the
// highest. The auditor sits above viewer (it reads the audit log too) and below operator
// (who acts); someone who needs both is mapped to admin.
func ruleRank(r authz.Role) int { return slices.Index(RuleRoles, r) }

// RuleOutcome is what the rules make of one person in one organization.
type RuleOutcome int

const (
	// RuleKeep: nothing changes.
	RuleKeep RuleOutcome = iota
	// RuleAdmit: a new membership from the rules.
	RuleAdmit
	// RuleChange: the rules' membership gets another role or cloud.live.
	RuleChange
	// RuleEnd: the rules' membership ends.
	RuleEnd
)

// Standing is what is known of one person's groups for one organization.
type Standing struct {
	// Claimed are the groups the provider asserted at the last sign-in.
	Claimed []string
	// ClaimsKnown is false when the provider said the groups did not fit in the token
	// (Entra's overage): the claimed groups are then unknown, not empty.
	ClaimsKnown bool
	// Directory are the organization's SCIM groups the person's directory users are in.
	Directory []string
	// Deactivated: the organization's directory turned a user linked to the person
	// inactive; the rules then admit them nowhere and end what they made.
	Deactivated bool
}

// RuleDecision is the rules' verdict for one person: the outcome, the role and
// cloud.live the rules give (zero when none) and the groups that matched.
type RuleDecision struct {
	Outcome   RuleOutcome
	Role      authz.Role
	CloudLive bool
	Matched   []string
}

// Decide applies rules to a person's standing and current membership (nil: none). A
// direct membership is never changed; a person in mapped groups gets the highest mapped
// role and cloud.live when any matched rule gives it; a rule membership with no mapped
// group ends. When the claimed groups are unknown (overage), the rules only admit: a
// rule membership is left as it is, since an unknown list is not an empty one.
func Decide(rules []GroupRule, st Standing, current *Membership) RuleDecision {
	if current != nil && current.Source != SourceRule {
		return RuleDecision{Outcome: RuleKeep}
	}
	var d RuleDecision
	if !st.Deactivated {
		for _, r := range rules {
			if ruleRank(r.Role) < 0 {
				continue // owner or unknown: refused on the way in, ignored here
			}
			if !slices.Contains(st.Claimed, r.GroupName) && !slices.Contains(st.Directory, r.GroupName) {
				continue
			}
			d.Matched = append(d.Matched, r.GroupName)
			if ruleRank(r.Role) > ruleRank(d.Role) {
				d.Role = r.Role
			}
			d.CloudLive = d.CloudLive || r.CloudLive
		}
	}
	slices.Sort(d.Matched)
	d.Matched = slices.Compact(d.Matched)
	switch {
	case current != nil && !st.ClaimsKnown && !st.Deactivated:
		d.Outcome = RuleKeep
	case len(d.Matched) == 0 && current == nil:
		d.Outcome = RuleKeep
	case len(d.Matched) == 0:
		d.Outcome = RuleEnd
	case current == nil:
		d.Outcome = RuleAdmit
	case current.Role != d.Role || current.CloudLive != d.CloudLive:
		d.Outcome = RuleChange
	default:
		d.Outcome = RuleKeep
	}
	return d
}
