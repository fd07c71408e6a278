package run

import (
	"context"

	"gantry/models/secret"
)

// phaseInputs are what a phase of a run reads before it starts.
type phaseInputs struct {
	config, state []byte
	vars          secret.Variables
	secrets       []string
}

// phaseInputs reads what a phase of r needs (its configuration, the state version
// stateVersion if any, its variables and the values its log masks) inside the
// transaction that begins the phase: a read failing (the database going away) rolls the
// beginning back, so no lease or RUNNING is left behind for a phase that never started
// (an apply left so would become APPLY_INTERRUPTED though nothing ran).
func (s *Jobs) phaseInputs(ctx context.Context, r Run, stateVersion *string) (phaseInputs, error) {
	var in phaseInputs
	var err error
	if in.config, _, err = s.k.artifacts.Get(ctx, r.OrganizationID, r.ConfigArtifactID); err != nil {
		return phaseInputs{}, err
	}
	if in.vars, in.secrets, err = s.phaseSecrets(ctx, r, in.config); err != nil {
		return phaseInputs{}, err
	}
	if stateVersion != nil {
		if in.state, err = s.k.states.Content(ctx, r.OrganizationID, *stateVersion); err != nil {
			return phaseInputs{}, err
		}
	}
	return in, nil
}
