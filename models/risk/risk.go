// Package risk classifies a plan into a risk class (blast radius, not diff size) and says
// which decision that class needs: the approval matrix of DESIGN §3, held as data that an
// organization's owners edit. Every edit is a new, audited version (see Store).
//
// The matrix has two tables. Rules map a condition a plan may meet to a risk class; the
// highest class among the conditions a plan meets wins. Decisions map a level (the class,
// with risk 1 split by whether the environment requires approval) to who decides.
package risk

import (
	"fmt"
	"strconv"
)

// Class is a risk class, 0 (nothing happens) to 3 (data or org-wide control may be lost).
type Class int

// MaxClass is the highest risk class.
const MaxClass Class = 3

// Condition is something a plan may do that puts it into a risk class.
type Condition string

const (
	CondNoChanges        Condition = "no_changes"         // dry run, or a plan without changes
	CondCreateUpdateOnly Condition = "create_update_only" // only creates / in-place updates, nothing org-scoped
	CondReplace          Condition = "replace"            // any replace
	CondProduction       Condition = "production_change"  // any change in a production-tier environment
	CondOrgScopedUpdate  Condition = "org_scoped_change"  // any create/update/replace/destroy of an org-scoped resource
	CondDestroy          Condition = "destroy"            // any delete action, or a destroy run
	CondIrreversible     Condition = "irreversible_loss"  // replace or destroy of a data-bearing resource
	CondOrgPolicyChange  Condition = "org_policy_change"  // change to an org-level policy resource
)

// Conditions lists every condition in the default matrix's order.
var Conditions = []Condition{
	CondNoChanges, CondCreateUpdateOnly, CondReplace, CondProduction,
	CondOrgScopedUpdate, CondDestroy, CondIrreversible, CondOrgPolicyChange,
}

// Rule puts the plans that meet Condition into Class.
type Rule struct {
	ID          string    `json:"id"`
	Condition   Condition `json:"condition"`
	Class       Class     `json:"class"`
	Description string    `json:"description"`
}

// Level is the row of the decision table a plan needs: its class, with risk 1 split by
// whether the environment requires approval.
type Level string

const (
	Level0          Level = "0"
	Level1          Level = "1"
	Level1Protected Level = "1-protected"
	Level2          Level = "2"
	Level3          Level = "3"
)

// Levels lists every level, lowest first.
var Levels = []Level{Level0, Level1, Level1Protected, Level2, Level3}

// Approver names who decides.
type Approver string

const (
	// ApproverNone: no decision is taken (nothing will change).
	ApproverNone Approver = "none"
	// ApproverSystem: a self-service approval by Gantry, bound to the same evidence as a
	// person's and naming the rule.
	ApproverSystem Approver = "system"
	// ApproverOperator, ApproverAdmin, ApproverOwner: a person holding at least that role
	// (and provisioning.apply).
	ApproverOperator Approver = "operator"
	ApproverAdmin    Approver = "admin"
	ApproverOwner    Approver = "owner"
	// ApproverEnvOwners: a named owner of the run's environment (a user, or a member of
	// a group from the ID token's groups claim) holding provisioning.apply.
	ApproverEnvOwners Approver = "environment_owners"
)

// Approvers lists every approver, in the order shown to people.
var Approvers = []Approver{ApproverNone, ApproverSystem, ApproverOperator, ApproverAdmin, ApproverOwner, ApproverEnvOwners}

// Escalations lists what a decision may escalate to ("" is no escalation).
var Escalations = []Approver{"", ApproverOperator, ApproverAdmin, ApproverOwner, ApproverEnvOwners}

// MaxEscalateAfterHours bounds a row's escalation wait (30 days, the longest decision window).
const MaxEscalateAfterHours = 720

// Role reports whether a is a role on the ladder (operator, admin or owner).
func (a Approver) Role() bool { return a.rank() > 0 }

// rank orders the role approvers; none, system and named owners are not on the ladder (0).
func (a Approver) rank() int {
	switch a {
	case ApproverOperator:
		return 1
	case ApproverAdmin:
		return 2
	case ApproverOwner:
		return 3
	}
	return 0
}

// Person reports whether a is a person: a role (operator, admin or owner) or a named
// environment owner.
func (a Approver) Person() bool { return a.rank() > 0 || a == ApproverEnvOwners }

// AtLeast reports whether a asks at least as much as min: both roles and a's rank at or
// above min's; a named owner asks only what min asks when min is a named owner too.
func (a Approver) AtLeast(min Approver) bool {
	if min.Role() {
		return a.Role() && a.rank() >= min.rank()
	}
	return a == min
}

// Decision is one row of the decision table: who decides the runs of one level.
type Decision struct {
	Level    Level    `json:"level"`
	Approver Approver `json:"approver"`
	// FourEyes: the requester may not approve.
	FourEyes bool `json:"four_eyes"`
	// Elevated: fresh authentication, typing DESTROY and a reason of 10+ characters.
	Elevated bool `json:"elevated"`
	// Escalation is who may also decide once a run has waited EscalateAfterHours for
	// its approver ("" = none).
	Escalation         Approver `json:"escalation"`
	EscalateAfterHours int      `json:"escalate_after_hours,omitempty"`
}

// Summary says in words who decides, e.g. "an admin or owner, not the requester".
func (d Decision) Summary() string {
	var s string
	switch d.Approver {
	case ApproverNone:
		return "no decision needed"
	case ApproverSystem:
		return "self-service: a system approval bound to the same evidence, naming the rule"
	case ApproverOperator:
		s = "one operator, admin or owner"
	case ApproverAdmin:
		s = "an admin or owner"
	case ApproverOwner:
		s = "an owner"
	case ApproverEnvOwners:
		s = "a named owner of the environment"
	default:
		return "unknown approver " + strconv.Quote(string(d.Approver))
	}
	if d.FourEyes {
		s += ", not the requester"
	}
	if d.Elevated {
		s += ", freshly authenticated, typing DESTROY with a reason of 10+ characters"
	}
	if d.Escalation != "" {
		s += fmt.Sprintf("; after %d h also %s", d.EscalateAfterHours, Decision{Approver: d.Escalation}.Summary())
	}
	return s
}

// Matrix is an organization's risk rules and decision table.
type Matrix struct {
	Rules     []Rule     `json:"rules"`
	Decisions []Decision `json:"decisions"`
}

// Default is DESIGN §3's table. Each call returns a fresh copy the caller may edit.
func Default() Matrix {
	return Matrix{
		Rules: []Rule{
			{ID: string(CondNoChanges), Condition: CondNoChanges, Class: 0, Description: "dry run, or a plan without changes"},
			{ID: string(CondCreateUpdateOnly), Condition: CondCreateUpdateOnly, Class: 1, Description: "create or update in place only, nothing org-scoped"},
			{ID: string(CondReplace), Condition: CondReplace, Class: 2, Description: "any replace"},
			{ID: string(CondProduction), Condition: CondProduction, Class: 2, Description: "any change in a production environment"},
			{ID: string(CondOrgScopedUpdate), Condition: CondOrgScopedUpdate, Class: 2, Description: "any change to an org-scoped resource (policy, IAM)"},
			{ID: string(CondDestroy), Condition: CondDestroy, Class: 3, Description: "any destroy (delete action or destroy run)"},
			{ID: string(CondIrreversible), Condition: CondIrreversible, Class: 3, Description: "replace or destroy of an irreversible (data-bearing) resource"},
			{ID: string(CondOrgPolicyChange), Condition: CondOrgPolicyChange, Class: 3, Description: "org-level policy change"},
		},
		Decisions: []Decision{
			{Level: Level0, Approver: ApproverNone},
			{Level: Level1, Approver: ApproverSystem},
			{Level: Level1Protected, Approver: ApproverOperator, FourEyes: true},
			{Level: Level2, Approver: ApproverAdmin, FourEyes: true},
			{Level: Level3, Approver: ApproverOwner, FourEyes: true, Elevated: true},
		},
	}
}
