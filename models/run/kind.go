package run

// What a run intends (its kind) and what its plan changes (its summary).

// Kind is what a run intends.
type Kind string

const (
	KindApply    Kind = "apply"
	KindPlanOnly Kind = "plan_only"
	KindDestroy  Kind = "destroy"
	// KindDrift is a drift check (DESIGN §9): a refresh-only plan of the configuration
	// that wrote the workspace's state, asking whether the live resources still match
	// it. Never gated, never applied; Gantry schedules it, or a person asks for one.
	KindDrift Kind = "drift_check"
	// KindCodify accepts what a break-glass window changed by hand into state: a
	// refresh-only plan, gated like any change, whose apply writes a state version of
	// the world as it is (nothing in the cloud changes).
	KindCodify Kind = "codify"
)

// Valid reports whether k is a kind a person requests through the request form (apply,
// dry run, destroy); drift checks and codifications have their own ways in.
func (k Kind) Valid() bool { return k == KindApply || k == KindPlanOnly || k == KindDestroy }

// RefreshOnly reports whether runs of kind k plan with -refresh-only: they compare the
// world with the state instead of the configuration with the world.
func (k Kind) RefreshOnly() bool { return k == KindDrift || k == KindCodify }

// Applies reports whether a run of kind k may apply (everything but a dry run and a
// drift check): such runs take their turn in the workspace's queue.
func (k Kind) Applies() bool { return k != KindPlanOnly && k != KindDrift }

// Summary counts a plan's resource changes by action.
type Summary struct {
	Create  int `json:"create"`
	Update  int `json:"update"`
	Replace int `json:"replace"`
	Delete  int `json:"delete"`
	NoOp    int `json:"no_op"`
	Read    int `json:"read"`
}

// Changes is the number of changes that do something.
func (s Summary) Changes() int { return s.Create + s.Update + s.Replace + s.Delete }
