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

// jobCredentials issues state backend credentials and a workload identity token per
// phase. The token is minted when the phase starts, so an apply's token exists only
// after its approval and cannot expire during a long wait for one.
type jobCredentials struct {
	state    *state.Service
	identity *identity.Issuer
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
	token, _, err := j.identity.Mint(ctx, identity.Claims{OrganizationID: r.OrganizationID, EnvironmentID: r.EnvironmentID,
		WorkspaceID: r.WorkspaceID, RunID: r.ID, Phase: p.identity})
	if err != nil {
		return Credentials{}, err
	}
	return Credentials{StateUsername: user, StatePassword: pass, CloudToken: token}, nil
}

func (j jobCredentials) Revoke(ctx context.Context, c Credentials) error {
	// The workload token cannot be revoked; it expires within 15 minutes and is scoped
	// to this run's phase. The state credential ends now.
	return j.state.RevokeCredential(ctx, c.StateUsername)
}
