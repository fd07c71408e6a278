// Package kube is the tofu/kubernetes executor: every phase of a run (plan, apply,
// verify) is one Kubernetes Job whose pod runs cmd/gantry-phase, which does inside the
// pod what tofurun.Runner does with the process executor on the host. The phase's
// inputs and outcome travel through a job-scoped endpoint of the portal (Portal), its
// short-lived credentials through a per-Job Secret owned by the Job. docs/runners.md
// ("Kubernetes") is the design; this file is the protocol both sides share.
package kube

import (
	"encoding/json"
	"errors"
	"time"

	"gantry/runner"
	"gantry/runner/targets"
	"gantry/runner/tofurun"
)

// PathPrefix is where the phase endpoint is served: PathPrefix + <job name> is a
// phase's description, and its inputs and outcome are below it.
const PathPrefix = "/phase/v1/"

// The phase endpoint's resources below a phase's path.
const (
	pathConfig = "/config" // GET: the config bundle (a tar, models/bundle)
	pathPlan   = "/plan"   // GET: the saved plan file (an apply only)
	pathToken  = "/token"  // POST: a fresh workload token (TokenAnswer)
	pathResult = "/result" // POST: the phase's outcome (Result), once
)

// The files of the per-Job Secret, as the pod sees them in SecretMount. A sensitive
// input variable <name> is the file var.<name>.
const (
	SecretStateUsername = "state-username"
	SecretStatePassword = "state-password"
	SecretCloudToken    = "cloud-token"
	SecretEndpointToken = "endpoint-token"
	secretVarPrefix     = "var."
)

// The phases a Job runs (the lease phases, run.JobKind).
const (
	PhasePlan   = "plan"
	PhaseApply  = "apply"
	PhaseVerify = "verify"
)

// Description is what GET on a phase's path answers: what the pod is to do. It holds no
// secret (those are in the Secret).
type Description struct {
	Job         string      `json:"job"`
	Phase       string      `json:"phase"`
	Kind        runner.Kind `json:"kind,omitempty"` // a plan's kind
	RunID       string      `json:"run_id"`
	WorkspaceID string      `json:"workspace_id"`
	// CloudExpires is when the Secret's cloud token expires (zero: a static credential,
	// never refreshed); the pod asks for the next one two thirds into its life.
	CloudExpires time.Time `json:"cloud_expires,omitzero"`
	// Refreshable says the endpoint mints fresh tokens (POST token).
	Refreshable bool `json:"refreshable,omitempty"`
	// Wiring is how the pod hands the cloud token to the environment's target (no
	// secret: addresses, identities, scope).
	Wiring targets.Wiring `json:"wiring"`
}

// TokenAnswer is a fresh workload token.
type TokenAnswer struct {
	Token   string    `json:"token"`
	Expires time.Time `json:"expires"`
}

// Result is a phase's outcome as the pod uploads it: the fields of runner.PlanResult,
// ApplyResult or VerifyResult that its phase fills, the phase's whole log, and its error.
type Result struct {
	// Plan.
	PlanFile   []byte `json:"plan_file,omitempty"`
	PlanJSON   []byte `json:"plan_json,omitempty"`
	HasChanges bool   `json:"has_changes,omitempty"`
	// Apply.
	Outputs json.RawMessage `json:"outputs,omitempty"`
	// Verify.
	Converged bool   `json:"converged,omitempty"`
	DriftJSON []byte `json:"drift_json,omitempty"`

	Log   []byte       `json:"log,omitempty"`
	Error *PhaseError  `json:"error,omitempty"`
	Kept  *KeptStateUp `json:"kept_state,omitempty"`
}

// KeptStateUp is the state an apply could not store (tofurun.ErrStateNotStored): the pod's
// copy dies with the pod, so it comes to the portal, which keeps it where the other
// executors keep theirs (tofurun.KeptStates beside its work root).
type KeptStateUp struct {
	Name string `json:"name"`
	Data []byte `json:"data"`
}

// Error kinds: what the portal side of a phase turns back into the errors the runner's
// callers test with errors.Is.
const (
	ErrorTofu           = "tofu"             // tofurun.ErrTofu
	ErrorStateNotStored = "state_not_stored" // tofurun.ErrStateNotStored
	ErrorOther          = "other"
)

// PhaseError is the error a phase ended with.
type PhaseError struct {
	Kind    string `json:"kind"`
	Message string `json:"message"`
}

// errorOf is the PhaseError of err (nil for nil).
func errorOf(err error) *PhaseError {
	switch {
	case err == nil:
		return nil
	case errors.Is(err, tofurun.ErrStateNotStored):
		return &PhaseError{Kind: ErrorStateNotStored, Message: err.Error()}
	case errors.Is(err, tofurun.ErrTofu):
		return &PhaseError{Kind: ErrorTofu, Message: err.Error()}
	}
	return &PhaseError{Kind: ErrorOther, Message: err.Error()}
}

// remoteError is a phase's error as the portal returns it: the pod's message, and the
// sentinel of its kind for errors.Is.
type remoteError struct {
	msg  string
	kind error
}

func (e *remoteError) Error() string { return e.msg }
func (e *remoteError) Unwrap() error { return e.kind }

// err turns the uploaded error back into an error (nil for none).
func (p *PhaseError) err() error {
	if p == nil {
		return nil
	}
	switch p.Kind {
	case ErrorStateNotStored:
		return &remoteError{msg: p.Message, kind: tofurun.ErrStateNotStored}
	case ErrorTofu:
		return &remoteError{msg: p.Message, kind: tofurun.ErrTofu}
	}
	return errors.New(p.Message)
}
