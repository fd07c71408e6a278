package run

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	"gantry/models/authz"
	"gantry/models/classify"
	"gantry/models/errs"
)

// Rollbacks (DESIGN §9): rolling a workspace back to state version N is a new run that
// re-applies the inputs and template version of the run that wrote N, from that run's
// stored config bundle, through every gate of the environment: a rollback is a change
// like any other, planned against today's state. What it cannot bring back is said in
// words from the template's facts and the states, never typed by hand: the data of an
// irreversible (data-bearing) resource it replaces or destroys, and of one replaced or
// destroyed since N (only a forward fix, a restore from a backup, brings that back).

// RollBack queues the rollback of workspaceID to its state version versionID. Another
// organization's version, or one of another workspace, is not found; the current
// version, one no run wrote, a destroy's empty state, or a bundle that can no longer be
// planned is refused with the reason.
func (s *Rollbacks) RollBack(ctx context.Context, workspaceID, versionID string) (Run, error) {
	subject, err := authz.Require(ctx, authz.PermProvisioningPlan)
	if err != nil {
		return Run{}, err
	}
	var out Run
	err = s.k.inTx(ctx, func(ctx context.Context) error {
		v, src, err := s.rollbackSource(ctx, subject, workspaceID, versionID)
		if err != nil {
			return err
		}
		out, err = s.k.queue(ctx, subject, queued{workspaceID: src.WorkspaceID, environmentID: src.EnvironmentID, kind: KindApply,
			template: src.TemplateName, version: src.TemplateVersion, moduleDigest: src.ModuleDigest, inputs: src.Inputs,
			runner: RunnerInfo{Name: src.Runner, Simulated: src.Simulated}, configArtifactID: src.ConfigArtifactID,
			configDigest: src.ConfigDigest, source: src, rollback: &v})
		return err
	})
	return out, err
}

// RollbackCandidate is what rolling back to a version would start from: the version,
// the run that wrote it (nil for none), and why it cannot be rolled back to ("" it can),
// in the words RollBack refuses it with.
type RollbackCandidate struct {
	Version StateVersionInfo
	Source  *Run
	Refusal string
}

// RollbackCandidate says what rolling workspaceID back to versionID would re-apply, or
// why it cannot (the page that asks before a rollback); another organization's or
// another workspace's version is not found.
func (s *Rollbacks) RollbackCandidate(ctx context.Context, workspaceID, versionID string) (RollbackCandidate, error) {
	subject, err := authz.Require(ctx, authz.PermProvisioningPlan)
	if err != nil {
		return RollbackCandidate{}, err
	}
	var c RollbackCandidate
	c.Version, c.Source, err = s.rollbackSource(ctx, subject, workspaceID, versionID)
	var explained *errs.Explained
	if v, ok := errs.AsValidation(err); ok {
		c.Refusal = v.Fields["environment"] // mayRequest's: who may request runs there
	} else if errors.As(err, &explained) && errors.Is(err, errs.ErrConflict) {
		c.Refusal = explained.Message
	} else if err != nil {
		return RollbackCandidate{}, err
	}
	return c, nil
}

// rollbackSource is the version a rollback goes to and the run that wrote it, once
// every check passed (the refusals in words; the version, and the run when there is
// one, also with a refusal).
func (s *Rollbacks) rollbackSource(ctx context.Context, subject authz.Subject, workspaceID, versionID string) (StateVersionInfo, *Run, error) {
	v, err := s.k.states.VersionInfo(ctx, subject.OrganizationID, versionID)
	if err != nil {
		return StateVersionInfo{}, nil, err
	}
	if v.WorkspaceID != workspaceID {
		return StateVersionInfo{}, nil, fmt.Errorf("state version %s of workspace %s: %w", versionID, workspaceID, errs.ErrNotFound)
	}
	if v.RunID == "" {
		return v, nil, errs.Explain(errs.ErrConflict, fmt.Sprintf("State version %d was not written by a run, so there are no inputs to re-apply.", v.Serial))
	}
	src, err := s.k.store.get(ctx, subject.OrganizationID, v.RunID)
	if err != nil {
		return StateVersionInfo{}, nil, err
	}
	// The workspace is the source run's: what the person may not see is not found.
	if err := s.k.visible(ctx, subject, src); err != nil {
		return StateVersionInfo{}, nil, err
	}
	current, err := s.k.states.Predecessor(ctx, subject.OrganizationID, workspaceID)
	if err != nil {
		return v, &src, err
	}
	switch {
	case current.VersionID == v.ID:
		return v, &src, errs.Explain(errs.ErrConflict, fmt.Sprintf("State version %d is the workspace's current state: there is nothing to roll back.", v.Serial))
	case src.Kind == KindDestroy:
		return v, &src, errs.Explain(errs.ErrConflict, fmt.Sprintf("State version %d is what the destroy of run %s left: to destroy again, use Destroy.", v.Serial, src.Label()))
	}
	env, err := s.k.environments.Lookup(ctx, src.OrganizationID, src.EnvironmentID)
	if err != nil {
		return v, &src, err
	}
	a, err := s.k.actorFor(ctx, subject, env)
	if err != nil {
		return v, &src, err
	}
	chosen, offered := s.k.runners.pick(env.Executor)
	if !offered || chosen.Name != src.Runner {
		return v, &src, errs.Explain(errs.ErrConflict, fmt.Sprintf("Environment %s no longer runs jobs on the %s executor run %s was planned for, so its configuration cannot be planned again: request the change from the catalog.",
			env.Name, src.Runner, src.Label()))
	}
	refusals := &errs.Validation{}
	mayRequest(a, env, chosen, refusals)
	if err := refusals.Err(); err != nil {
		return v, &src, err
	}
	// The stored bundle holds the module tree and lock file; the gates need the
	// template's facts (irreversible types, prices) from the catalog.
	if _, err := s.k.catalog.Facts(src.TemplateName); err != nil {
		return v, &src, errs.Explain(errs.ErrConflict, fmt.Sprintf("The catalog no longer offers template %s, so a plan of run %s's configuration cannot be assessed.", src.TemplateName, src.Label()))
	}
	return v, &src, nil
}

// RollbackReview is what a rollback's review says it cannot bring back: what its plan
// replaces or destroys of irreversible resources (Lost), and what was replaced or
// destroyed since the version it rolls back to (ForwardFix).
type RollbackReview struct {
	Serial      int
	SourceLabel string
	Lost        []string
	ForwardFix  []string
}

// rollbackReview compares rollback r's plan and the state it was planned against with
// the version it rolls back to.
func (s *core) rollbackReview(ctx context.Context, r Run, res classify.Result, facts TemplateFacts) (*RollbackReview, error) {
	if r.RollbackVersionID == nil {
		return nil, nil
	}
	out := &RollbackReview{Serial: r.RollbackSerial}
	if r.SourceRunID != nil {
		if src, err := s.store.get(ctx, r.OrganizationID, *r.SourceRunID); err == nil {
			out.SourceLabel = src.Label()
		}
	}
	for _, c := range res.Changes {
		if !c.Irreversible {
			continue
		}
		switch c.Class {
		case classify.ClassReplace:
			out.Lost = append(out.Lost, fmt.Sprintf("%s (%s) is replaced: it comes back empty, and the data it holds now is lost.", c.Address, c.Type))
		case classify.ClassDestroy:
			out.Lost = append(out.Lost, fmt.Sprintf("%s (%s) is destroyed with the data it holds.", c.Address, c.Type))
		}
	}
	then, err := s.states.ResourcesOf(ctx, r.OrganizationID, *r.RollbackVersionID)
	if err != nil {
		return nil, err
	}
	var now []StateResource
	if r.PriorStateVersionID != nil {
		if now, err = s.states.ResourcesOf(ctx, r.OrganizationID, *r.PriorStateVersionID); err != nil {
			return nil, err
		}
	}
	out.ForwardFix = forwardFixOnly(then, now, facts.Irreversible, r.RollbackSerial)
	return out, nil
}

// forwardFixOnly says which irreversible resources of the state at serial (then) were
// replaced or destroyed by today (now): a rollback re-creates their configuration, not
// the data they held then.
func forwardFixOnly(then, now []StateResource, irreversible []string, serial int) []string {
	var out []string
	for _, t := range then {
		if !slices.Contains(irreversible, t.Type) {
			continue
		}
		i := slices.IndexFunc(now, func(n StateResource) bool { return n.Address == t.Address })
		switch {
		case i < 0:
			out = append(out, fmt.Sprintf("%s (%s) was destroyed after serial %d: the rollback creates it again, empty; the data it held then is gone (only a restore from a backup brings it back).",
				t.Address, t.Type, serial))
		case now[i].ID != t.ID:
			out = append(out, fmt.Sprintf("%s (%s) was replaced after serial %d (%s, now %s): the data it held then is gone; only a restore from a backup brings it back.",
				t.Address, t.Type, serial, t.ID, now[i].ID))
		}
	}
	return out
}

// TemplateBoundary says what rolling back a workspace of a template with these
// irreversible (data-bearing) resource types can and cannot bring back.
func TemplateBoundary(irreversible []string) []string {
	out := []string{"A rollback is a new run that re-applies the inputs and template version that produced an earlier state version; it is planned against today's state and passes every gate."}
	if len(irreversible) == 0 {
		return append(out, "None of this template's resource types holds data, so a rollback brings the configuration back whole.")
	}
	verb := "hold"
	if len(irreversible) == 1 {
		verb = "holds"
	}
	return append(out, fmt.Sprintf("It cannot bring back data: %s %s data, and replacing or destroying one loses it. The rollback's review names each one its plan would replace or destroy, and each one replaced or destroyed since the version rolled back to.",
		strings.Join(irreversible, ", "), verb))
}

// WorkspaceBoundary names the irreversible resources a workspace's state holds now: a
// rollback that replaces or destroys one loses what it holds.
func WorkspaceBoundary(irreversible []string, resources []StateResource) []string {
	var out []string
	for _, r := range resources {
		if slices.Contains(irreversible, r.Type) {
			out = append(out, fmt.Sprintf("%s (%s, %s) holds data: a rollback that replaces or destroys it loses what it holds.", r.Address, r.Type, r.ID))
		}
	}
	return out
}
