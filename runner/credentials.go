package runner

import (
	"context"
	"fmt"
	"time"

	"gantry/models/identity"
	"gantry/models/run"
	"gantry/models/state"
)

// CredentialSource mints the credentials of one job phase and ends them afterwards.
type CredentialSource interface {
	ForPhase(ctx context.Context, r run.Run, phase run.JobKind, ttl time.Duration) (Credentials, error)
	// Revoke ends exactly the credentials ForPhase returned.
	Revoke(ctx context.Context, c Credentials) error
}

// StaticCredentials looks up the static cloud credential an environment may hold
// instead of using workload identity (environment.Credentials implements it). The
// runner acts as the system here: there is no subject in ctx.
type StaticCredentials interface {
	StaticCredential(ctx context.Context, orgID, envID string) (secret string, ok bool, err error)
}

// jobCredentials issues state backend credentials and a workload identity token per
// phase. The token is minted when the phase starts, so an apply's token exists only
// after its approval and cannot expire during a long wait for one. When static is set
// and the run's environment holds a static credential (a standing-credential finding),
// the job gets that instead of a workload token; the state credential is per phase
// either way.
type jobCredentials struct {
	state    *state.Store
	identity *identity.Issuer
	static   StaticCredentials // optional
}

// NewJobCredentials returns the credential source of live runners: state backend
// credentials from states, workload tokens from identity, and an environment's static
// credential from static (nil: none are used).
func NewJobCredentials(states *state.Store, identity *identity.Issuer, static StaticCredentials) CredentialSource {
	return jobCredentials{state: states, identity: identity, static: static}
}

var phases = map[run.JobKind]struct {
	state    state.Phase
	identity identity.Phase
}{
	run.JobPlan:   {state.PhasePlan, identity.PhasePlan},
	run.JobApply:  {state.PhaseApply, identity.PhaseApply},
	run.JobVerify: {state.PhaseVerify, identity.PhaseVerify},
}

func (j jobCredentials) ForPhase(ctx context.Context, r run.Run, phase run.JobKind, ttl time.Duration) (Credentials, error) {
	p, ok := phases[phase]
	if !ok {
		return Credentials{}, fmt.Errorf("no credentials for phase %q", phase)
	}
	user, pass, err := j.state.IssueCredentials(ctx, r.OrganizationID, r.WorkspaceID, r.ID, p.state, ttl)
	if err != nil {
		return Credentials{}, err
	}
	token, err := j.cloudToken(ctx, r, p.identity)
	if err != nil {
		// The state credential was issued: end it now rather than let it live out its ttl.
		_ = j.state.RevokeCredential(context.WithoutCancel(ctx), user)
		return Credentials{}, err
	}
	return Credentials{StateUsername: user, StatePassword: pass, CloudToken: token}, nil
}

// cloudToken is the environment's static credential if it has one, else a workload
// identity token minted for this phase.
func (j jobCredentials) cloudToken(ctx context.Context, r run.Run, phase identity.Phase) (string, error) {
	if j.static != nil {
		secret, ok, err := j.static.StaticCredential(ctx, r.OrganizationID, r.EnvironmentID)
		if err != nil {
			return "", fmt.Errorf("reading the environment's static credential: %w", err)
		}
		if ok {
			return secret, nil
		}
	}
	token, _, err := j.identity.Mint(ctx, identity.Claims{OrganizationID: r.OrganizationID, EnvironmentID: r.EnvironmentID,
		WorkspaceID: r.WorkspaceID, RunID: r.ID, Phase: phase})
	return token, err
}

func (j jobCredentials) Revoke(ctx context.Context, c Credentials) error {
	// The workload token cannot be revoked; it expires within 15 minutes and is scoped
	// to this run's phase. A static credential is not Gantry's to end: it lives until
	// an admin removes it (and deletes it in the cloud). The state credential ends now.
	return j.state.RevokeCredential(ctx, c.StateUsername)
}
