package run

import (
	"context"
	"errors"

	"gantry/models/authz"
	"gantry/models/environment"
	"gantry/models/errs"
	"gantry/policies"
)

// Who decides: the rules' view of a subject in an environment, and who overrode a
// run's policy failure (the four-eyes rule on overrides, rules.go).

// actorFor is the rules' view of subject in environment env: the role, cloud.live and
// groups the database holds now (a demotion counts at once), and the grant on env.
func (s *core) actorFor(ctx context.Context, subject authz.Subject, env environment.Environment) (Actor, error) {
	a := Actor{Subject: subject}
	if subject.System {
		return a, nil
	}
	m, err := s.members.Member(ctx, subject.OrganizationID, subject.UserID)
	switch {
	case errors.Is(err, errs.ErrNotFound):
		// No longer a member: nothing is allowed.
		a.Role = ""
		return a, nil
	case err != nil:
		return Actor{}, err
	}
	a.Role, a.CloudLive, a.Groups = m.Role, m.CloudLive, m.Groups
	if env.Restricted && environment.NeedsGrant(a.Role) {
		if a.Granted, err = s.environments.HasGrant(ctx, env.ID, subject.UserID); err != nil {
			return Actor{}, err
		}
	}
	return a, nil
}

// Actor is the rules' view of subject in environment env (actorFor), for the rules of
// other aggregates that decide like runs do (break-glass windows).
func (s *Decisions) Actor(ctx context.Context, subject authz.Subject, env environment.Environment) (Actor, error) {
	return s.k.actorFor(ctx, subject, env)
}

// overriders are who overrode a policy failure of run r, by user id (the rules'
// Actor.Overrode), read in the transaction carried by ctx. Only a soft-mandatory
// failure is ever overridden, so another run reads nothing.
func (s *core) overriders(ctx context.Context, r Run) (map[string]bool, error) {
	if r.PolicyEvaluationID == nil || r.PolicyOutcome != string(policies.OutcomeSoft) {
		return map[string]bool{}, nil
	}
	_, overrides, err := s.policies.EvaluationWithOverrides(ctx, r.OrganizationID, *r.PolicyEvaluationID)
	if err != nil {
		return nil, err
	}
	out := make(map[string]bool, len(overrides))
	for _, o := range overrides {
		out[o.OverriddenBy] = true
	}
	return out, nil
}
