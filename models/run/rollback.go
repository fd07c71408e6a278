package run

import (
	"context"
	"fmt"

	"gantry/models/authz"
	"gantry/models/errs"
)

// Rollbacks (DESIGN §9, models/rollback) re-apply, through every gate, the inputs and
// template version of the run that wrote an earlier state version, from that run's
// stored config bundle. models/rollback keeps the rollback's own rules (which versions
// make sense to go back to, what cannot be brought back); the run lifecycle keeps its
// rules here: the run that wrote the version is one the subject may see, they may
// request runs in its environment, its executor is still offered and the catalog still
// offers its template.

// permRollback is what asking for a rollback requires (the rules of a request of the
// source run's environment come on top).
const permRollback = authz.PermProvisioningPlan

// MayRollBack reports whether s holds what CheckRollback and RequestRollback require:
// the workspace page offers a rollback from it.
func MayRollBack(s authz.Subject) bool { return s.Can(permRollback) }

// CheckRollback says whether the subject may roll back to state version versionID now:
// nil, or the refusal RequestRollback would answer (not found for a version or a run
// they may not see; the refusal in words otherwise).
func (s *Requests) CheckRollback(ctx context.Context, versionID string) error {
	subject, err := authz.Require(ctx, permRollback)
	if err != nil {
		return err
	}
	_, _, err = s.rollbackSource(ctx, subject, versionID)
	return err
}

// RequestRollback queues the rollback to state version versionID: a new run re-applying
// the configuration of the run that wrote it, planned against today's state.
func (s *Requests) RequestRollback(ctx context.Context, versionID string) (Run, error) {
	subject, err := authz.Require(ctx, permRollback)
	if err != nil {
		return Run{}, err
	}
	var out Run
	err = s.k.inTx(ctx, func(ctx context.Context) error {
		v, src, err := s.rollbackSource(ctx, subject, versionID)
		if err != nil {
			return err
		}
		out, err = s.k.queue(ctx, subject, queued{workspaceID: src.WorkspaceID, environmentID: src.EnvironmentID, kind: KindApply,
			template: src.TemplateName, version: src.TemplateVersion, moduleDigest: src.ModuleDigest, inputs: src.Inputs,
			runner: RunnerInfo{Name: src.Runner, Simulated: src.Simulated}, configArtifactID: src.ConfigArtifactID,
			configDigest: src.ConfigDigest, source: &src, rollback: &v})
		return err
	})
	return out, err
}

// rollbackSource is state version versionID and the run that wrote it, once the run
// lifecycle's rules hold for re-applying that run's configuration.
func (s *Requests) rollbackSource(ctx context.Context, subject authz.Subject, versionID string) (StateVersionInfo, Run, error) {
	v, err := s.k.states.VersionInfo(ctx, subject.OrganizationID, versionID)
	if err != nil {
		return StateVersionInfo{}, Run{}, err
	}
	if v.RunID == "" {
		return v, Run{}, errs.Explain(errs.ErrConflict, fmt.Sprintf("State version %d was not written by a run, so there are no inputs to re-apply.", v.Serial))
	}
	// The workspace is the source run's: what the person may not see is not found.
	src, err := s.k.getVisible(ctx, subject, v.RunID)
	if err != nil {
		return StateVersionInfo{}, Run{}, err
	}
	env, err := s.k.environments.Lookup(ctx, src.OrganizationID, src.EnvironmentID)
	if err != nil {
		return v, src, err
	}
	a, err := s.k.actorFor(ctx, subject, env)
	if err != nil {
		return v, src, err
	}
	chosen, offered := s.k.runners.pick(env.Executor)
	if !offered || chosen.Name != src.Runner {
		return v, src, errs.Explain(errs.ErrConflict, fmt.Sprintf("Environment %s no longer runs jobs on the %s executor run %s was planned for, so its configuration cannot be planned again: request the change from the catalog.",
			env.Name, src.Runner, src.Label()))
	}
	refusals := &errs.Validation{}
	mayRequest(a, env, chosen, refusals)
	if err := refusals.Err(); err != nil {
		return v, src, err
	}
	// The stored bundle holds the module tree and lock file; the gates need the
	// template's facts (irreversible types, prices) from the catalog.
	if _, err := s.k.catalog.Facts(src.TemplateName); err != nil {
		return v, src, errs.Explain(errs.ErrConflict, fmt.Sprintf("The catalog no longer offers template %s, so a plan of run %s's configuration cannot be assessed.", src.TemplateName, src.Label()))
	}
	return v, src, nil
}
