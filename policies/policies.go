// Package policies is Gantry's policy engine (DESIGN §7): the built-in Rego rules
// (rules/*.rego, embedded) plus an organization's own policies, compiled once into a
// Bundle and evaluated against a `tofu show -json` plan with the run's context.
//
// Every rule is one Rego module, `package gantry.rules.<id>` (built-in) or
// `package gantry.org.<name>` (organization-managed), that defines a constant
// `metadata` object (id, title, description, enforcement) and a set `deny` of
// human-readable messages. A rule passes when its deny set is empty. What a failure
// does to a run depends on the rule's enforcement, which an environment may change:
// see docs/policy-input.md.
//
// The package is a leaf: it imports no application package.
package policies

// Enforcement is what a failed rule does to a run.
type Enforcement string

// The enforcement levels.
const (
	// Advisory: the failure is shown on the run, nothing more.
	Advisory Enforcement = "advisory"
	// SoftMandatory: the run is blocked until an admin overrides the failure with a reason.
	SoftMandatory Enforcement = "soft_mandatory"
	// HardMandatory: the run is blocked for good.
	HardMandatory Enforcement = "hard_mandatory"
)

// Valid reports whether e is one of the three levels.
func (e Enforcement) Valid() bool {
	switch e {
	case Advisory, SoftMandatory, HardMandatory:
		return true
	}
	return false
}

// Origins of a rule.
const (
	OriginBuiltin = "builtin"
	OriginOrg     = "org"
)

// Rule describes one rule of a bundle.
type Rule struct {
	ID          string
	Title       string
	Description string
	Enforcement Enforcement // the rule's default
	// Version is the sha256 (hex) of the rule's Rego module source: an override binds to it.
	Version string
	Origin  string // OriginBuiltin or OriginOrg
}

// OrgPolicy is an organization-managed policy as stored (uploaded Rego, versioned).
type OrgPolicy struct {
	Name    string
	Version int
	Rego    string
	Tests   string
}
