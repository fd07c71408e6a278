// Package runner executes the phases of a run (plan, apply, verify) through an
// executor, and hosts the River workers that drive runs through their lifecycle.
package runner

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"time"

	"gantry/runner/targets"

	"gantry/models/run"
	"gantry/models/secret"
)

// Kind is what a run intends.
type Kind string

const (
	KindApply    Kind = "apply"     // plan, then (after any approval) apply
	KindPlanOnly Kind = "plan_only" // a dry run: plan only, never gated, never applied
	KindDestroy  Kind = "destroy"   // plan the destruction of everything in the workspace
	// KindRefreshOnly compares the live resources with the state (tofu plan -refresh-only):
	// a drift check, or a codification, whose apply accepts the world into state.
	KindRefreshOnly Kind = "refresh_only"
)

// Credentials are the job-scoped secrets one phase runs with: minted for that phase
// (the apply's only after approval), short-lived, and handed to the executor only as
// process environment or a mounted secret file, never written into configuration.
type Credentials struct {
	// StateUsername and StatePassword authenticate to Gantry's state backend
	// (TF_HTTP_USERNAME / TF_HTTP_PASSWORD).
	StateUsername, StatePassword string
	// CloudToken is the workload identity token the provider presents to the cloud (or
	// the environment's static credential).
	CloudToken string
	// CloudExpires is when CloudToken expires; zero when it does not (a static
	// credential).
	CloudExpires time.Time
	// Refresh mints the next workload token of the same phase, with the same claims,
	// through the same issuer, for a phase that outlives CloudToken: a runner calls it
	// before the token expires (see KeepFresh) and hands the job the new one. Nil: the
	// token is not refreshed (a static credential, a simulated runner).
	Refresh func(ctx context.Context) (token string, expires time.Time, err error)
	// Wiring is how the phase hands CloudToken to its target's providers (no secret:
	// the target's addresses and identities, the phase's scope and session name).
	Wiring targets.Wiring
}

// redacted is what a log line or a formatted value shows of credentials.
const redacted = "[credentials redacted]"

// LogValue keeps credentials out of slog output.
func (Credentials) LogValue() slog.Value { return slog.StringValue(redacted) }

// String and GoString keep credentials out of %v, %+v and %#v.
func (Credentials) String() string   { return redacted }
func (Credentials) GoString() string { return redacted }

// MarshalJSON keeps credentials out of any JSON a request is encoded into (slog's JSON
// handler encodes structs with encoding/json).
func (Credentials) MarshalJSON() ([]byte, error) { return []byte(`"` + redacted + `"`), nil }

// PlanRequest is the input of a plan: the config bundle (a tar, see models/bundle)
// and the workspace's current state (nil when there is none yet).
type PlanRequest struct {
	RunID       string
	WorkspaceID string
	Kind        Kind
	Config      []byte
	PriorState  []byte
	Credentials Credentials
	// Variables are the values of the bundle's sensitive root variables. An executor
	// sets them only as TF_VAR_<name> in tofu's process environment, never in a file;
	// the config bundle only declares them.
	Variables secret.Variables
	// Log receives the phase's log while it runs (the worker's LiveLog; nil: nobody
	// watches). The result's Log still carries all of it, as evidence.
	Log io.Writer
}

// PlanResult is what a plan produced. PlanFile is the artifact apply takes (tofu's
// saved plan); PlanJSON is `tofu show -json` of it.
type PlanResult struct {
	PlanFile   []byte
	PlanJSON   []byte
	Log        []byte
	HasChanges bool
}

// ApplyRequest applies exactly PlanFile, planned from Config against PriorState. It
// carries no Variables: the saved plan holds their values (OpenTofu applies it
// without them).
type ApplyRequest struct {
	RunID       string
	WorkspaceID string
	Config      []byte
	PlanFile    []byte
	PriorState  []byte
	Credentials Credentials
	Log         io.Writer // as PlanRequest.Log
}

// ApplyResult is the new state and the root module's outputs. A runner whose tofu
// writes state through Gantry's http backend leaves State nil: the backend already
// stored the version.
type ApplyResult struct {
	State   []byte
	Outputs json.RawMessage // {"name": {"value": ..., "sensitive": bool}}, as `tofu output -json`
	Log     []byte
}

// VerifyRequest compares the live resources with State (a refresh-only plan).
type VerifyRequest struct {
	RunID       string
	WorkspaceID string
	Config      []byte
	State       []byte
	Credentials Credentials
	// Variables as PlanRequest's: the refresh-only plan evaluates the configuration.
	Variables secret.Variables
	Log       io.Writer // as PlanRequest.Log
}

// VerifyResult says whether the live resources match; DriftJSON is the refresh-only
// plan (`tofu show -json`) when they do not.
type VerifyResult struct {
	Converged bool
	DriftJSON []byte
	Log       []byte
}

// Runner executes the phases of one run. Implementations: the MockTofuRunner (runner/mock,
// SIMULATED), and OpenTofu executors.
type Runner interface {
	// Name identifies the executor in the run record, e.g. "mock".
	Name() string
	// Simulated is true when nothing real is planned or applied; everything such a
	// runner produced is labeled SIMULATED wherever it is shown.
	Simulated() bool
	Plan(ctx context.Context, req PlanRequest) (PlanResult, error)
	Apply(ctx context.Context, req ApplyRequest) (ApplyResult, error)
	Verify(ctx context.Context, req VerifyRequest) (VerifyResult, error)
}

// ChangeLog reads a cloud's record of who changed a live resource (the sandbox cloud's
// change history; a real cloud's audit trail), with a phase's own read-only token.
type ChangeLog interface {
	// Changes returns the recorded changes of the resource of type typ with cloud id id.
	Changes(ctx context.Context, token, typ, id string) ([]run.CloudChange, error)
}

// LogTo is where a runner writes a phase's log besides its result: w, or nowhere.
func LogTo(w io.Writer) io.Writer {
	if w == nil {
		return io.Discard
	}
	return w
}
