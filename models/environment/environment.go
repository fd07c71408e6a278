// Package environment holds deployment environments: their tier, whether changes need
// an approval (the gate belongs to the environment) and whether using them needs an
// explicit grant (restriction is about people, approval about the change).
package environment

import (
	"fmt"
	"regexp"
	"slices"
	"strings"
	"time"

	"gantry/models/errs"
)

// Tier is how close an environment is to customers.
type Tier string

const (
	TierDevelopment Tier = "development"
	TierStaging     Tier = "staging"
	TierProduction  Tier = "production"
)

// Tiers in the order shown to people.
var Tiers = []Tier{TierDevelopment, TierStaging, TierProduction}

// Valid reports whether t is a known tier.
func (t Tier) Valid() bool { return slices.Contains(Tiers, t) }

// DefaultRequiresApproval is the approval default of a new environment of tier t:
// production is gated unless an admin says otherwise (a default, not a lock).
func (t Tier) DefaultRequiresApproval() bool { return t == TierProduction }

// Environment is one row of environments.
type Environment struct {
	ID               string
	OrganizationID   string
	Name             string
	Tier             Tier
	RequiresApproval bool
	Restricted       bool
	// Executor runs the environment's jobs: "default" (the deployment's), "mock",
	// "tofu/process" or "tofu/oci".
	Executor string
	// DecisionWindowHours is how long a run may wait in PENDING_APPROVAL for a
	// person's decision before it expires (DESIGN §3 "Clocks").
	DecisionWindowHours int
	// PromotionOrder places it in its organization's promotion order: a workspace is
	// promoted to the environments of the next order up (1 to 99; by tier unless an
	// admin says otherwise).
	PromotionOrder int
	// DriftIntervalMinutes is how often each workspace's drift is checked (DESIGN §9):
	// 0 is never (development's default), else 5 minutes to a week.
	DriftIntervalMinutes int
	// Target is where the environment's runs provision and how a phase is let in there
	// (the sandbox cloud unless an admin says otherwise); every read of an environment
	// reads it.
	Target    Target `gorm:"serializer:json"`
	CreatedAt time.Time
	UpdatedAt time.Time
	// Owners (user ids) and OwnerGroups (ID token groups) are the environment's named
	// owners: the deciders of a matrix row that names the environment's owners. Read by
	// Lookup and Owners; stored in their own tables.
	Owners      []string `gorm:"-"`
	OwnerGroups []string `gorm:"-"`
}

// DecisionWindow is the environment's decision window as a duration.
func (e Environment) DecisionWindow() time.Duration {
	return time.Duration(e.DecisionWindowHours) * time.Hour
}

// The decision window's bounds and default, in hours: 1 hour to 30 days, 7 days unless
// an admin says otherwise (the database holds the same bounds).
const (
	DefaultDecisionWindowHours = 168
	MinDecisionWindowHours     = 1
	MaxDecisionWindowHours     = 720
)

// DriftInterval is how often the environment's workspaces are checked for drift (0:
// never).
func (e Environment) DriftInterval() time.Duration {
	return time.Duration(e.DriftIntervalMinutes) * time.Minute
}

// The drift schedule's bounds in minutes: 0 is off, else 5 minutes to a week.
const (
	MinDriftIntervalMinutes = 5
	MaxDriftIntervalMinutes = 7 * 24 * 60
)

// DefaultDriftIntervalMinutes is a tier's drift schedule unless an admin says otherwise:
// production hourly, staging every 4 hours, development never (DESIGN §9: off by
// default in development).
func (t Tier) DefaultDriftIntervalMinutes() int {
	switch t {
	case TierProduction:
		return 60
	case TierStaging:
		return 240
	}
	return 0
}

// DriftSchedule is one environment's drift schedule, for the scheduler.
type DriftSchedule struct {
	OrganizationID, EnvironmentID string
	Interval                      time.Duration
}

// MaxPromotionOrder bounds an environment's place in the promotion order.
const MaxPromotionOrder = 99

// DefaultPromotionOrder is a tier's place in the promotion order unless an admin says
// otherwise: development, then staging, then production.
func (t Tier) DefaultPromotionOrder() int {
	switch t {
	case TierDevelopment:
		return 1
	case TierStaging:
		return 2
	}
	return 3
}

// Grant lets one member use a restricted environment.
type Grant struct {
	OrganizationID string
	EnvironmentID  string `gorm:"primaryKey"`
	UserID         string `gorm:"primaryKey"`
	CreatedAt      time.Time
}

// TableName: gorm would say "grants".
func (Grant) TableName() string { return "environment_grants" }

// Input is what a person submits to create or edit an environment. RequiresApproval
// nil means "the tier's default" on create and "unchanged" on edit.
type Input struct {
	Name             string
	Tier             string
	RequiresApproval *bool
	Restricted       bool
	Grants           []string // user ids
	// Owners (user ids) and OwnerGroups (group names) are the environment's named
	// owners; nil means none on create and "unchanged" on edit, like Executor.
	Owners      *[]string
	OwnerGroups *[]string
	Executor    string // "" means "default"
	// DecisionWindowHours 0 (absent) means the default (168 hours) on create and
	// "unchanged" on edit, like Executor: a client that does not know the field never
	// resets a window an admin set.
	DecisionWindowHours int
	// PromotionOrder 0 (absent) means by tier (development 1, staging 2, production 3)
	// on create and "unchanged" on edit.
	PromotionOrder int
	// DriftIntervalMinutes nil (absent) means the tier's default on create and
	// "unchanged" on edit; 0 turns scheduled drift checks off.
	DriftIntervalMinutes *int
	// Target nil (absent) means the sandbox cloud on create and "unchanged" on edit;
	// otherwise it is checked (Target.Validate) and stored as Target.Normal.
	Target *Target
}

// Executors are the values an environment's executor may take.
var Executors = []string{"default", "mock", "tofu/process", "tofu/oci"}

var namePattern = regexp.MustCompile(`^[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?$`)

// Validate checks the input on its own (the duplicate-name check needs the database and
// lives in the service). Field names match the form's input names.
func (in Input) Validate() *errs.Validation {
	v := &errs.Validation{}
	name := strings.TrimSpace(in.Name)
	switch {
	case name == "":
		v.Add("name", "Enter a name.")
	case len(name) > 63:
		v.Add("name", "Use at most 63 characters.")
	case !namePattern.MatchString(name):
		v.Add("name", "Use lower-case letters, digits and hyphens; start and end with a letter or digit.")
	}
	if !Tier(in.Tier).Valid() {
		v.Add("tier", "Choose development, staging or production.")
	}
	if in.Executor != "" && !slices.Contains(Executors, in.Executor) {
		v.Add("executor", "Choose default, mock, tofu/process or tofu/oci.")
	}
	if h := in.DecisionWindowHours; h != 0 && (h < MinDecisionWindowHours || h > MaxDecisionWindowHours) {
		v.Add("decision_window_hours", "Between 1 and 720 hours.")
	}
	if o := in.PromotionOrder; o != 0 && (o < 1 || o > MaxPromotionOrder) {
		v.Add("promotion_order", fmt.Sprintf("A whole number from 1 to %d.", MaxPromotionOrder))
	}
	if d := in.DriftIntervalMinutes; d != nil && *d != 0 && (*d < MinDriftIntervalMinutes || *d > MaxDriftIntervalMinutes) {
		v.Add("drift_interval_minutes", fmt.Sprintf("Off, or every %d minutes to %d days.", MinDriftIntervalMinutes, MaxDriftIntervalMinutes/(24*60)))
	}
	if in.Target != nil {
		in.Target.Validate(v)
	}
	for _, g := range deref(in.OwnerGroups) {
		if g = strings.TrimSpace(g); g != "" && !groupPattern.MatchString(g) {
			v.Add("owner_groups", "Group names are 1 to 128 letters, digits, spaces and . _ : / @ -, one per line.")
		}
	}
	return v
}

func deref(xs *[]string) []string {
	if xs == nil {
		return nil
	}
	return *xs
}
