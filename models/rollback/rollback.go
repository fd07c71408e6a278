// Package rollback rolls a workspace back to an earlier state version (DESIGN §9):
// a new run that re-applies the inputs and template version of the run that wrote
// that version, from that run's stored config bundle, through every gate of the
// environment: a rollback is a change like any other, planned against today's state.
// What it cannot bring back is said in words from the template's facts and the
// states, never typed by hand: the data of an irreversible (data-bearing) resource it
// replaces or destroys, and of one replaced or destroyed since the version (only a
// forward fix, a restore from a backup, brings that back).
//
// It stands outside the run lifecycle and asks it through its roles, as
// models/breakglass does: the run that wrote a version (run.Reads) and a run that
// re-applies it (run.Requests, which keeps the rules of who may request what where).
package rollback

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	"gantry/models/authz"
	"gantry/models/classify"
	"gantry/models/errs"
	"gantry/models/run"
)

// What rollbacks need from elsewhere, each a small interface its owner implements.

// Runs reads the run that wrote a version (run.Reads: not found unless the subject
// may see it).
type Runs interface {
	Get(ctx context.Context, id string) (run.Run, error)
}

// Requests checks and queues the run that re-applies the configuration of the run
// that wrote a state version (run.Requests: who may request runs where, an executor
// still offered, a template still in the catalog).
type Requests interface {
	CheckRollback(ctx context.Context, versionID string) error
	RequestRollback(ctx context.Context, versionID string) (run.Run, error)
}

// States reads state versions (state.Store).
type States interface {
	VersionInfo(ctx context.Context, orgID, id string) (run.StateVersionInfo, error)
	Predecessor(ctx context.Context, orgID, workspaceID string) (run.Predecessor, error)
	ResourcesOf(ctx context.Context, orgID, id string) ([]run.StateResource, error)
}

// Facts says which resource types of a template hold data (catalog.ForRuns).
type Facts interface {
	Facts(name string) (run.TemplateFacts, error)
}

// Service rolls workspaces back and says what a rollback cannot bring back. Every
// method authorizes the subject in ctx.
type Service struct {
	runs     Runs
	requests Requests
	states   States
	facts    Facts
}

// New returns the rollback service; every dependency is required.
func New(runs Runs, requests Requests, states States, facts Facts) (*Service, error) {
	if runs == nil || requests == nil || states == nil || facts == nil {
		return nil, errors.New("rollback: Runs, Requests, States and Facts are required")
	}
	return &Service{runs: runs, requests: requests, states: states, facts: facts}, nil
}

// RollBack queues the rollback of workspaceID to its state version versionID. Another
// organization's version, or one of another workspace, is not found; the current
// version, one no run wrote, a destroy's empty state, or a bundle that can no longer be
// planned is refused with the reason.
func (s *Service) RollBack(ctx context.Context, workspaceID, versionID string) (run.Run, error) {
	if _, _, err := s.source(ctx, workspaceID, versionID); err != nil {
		return run.Run{}, err
	}
	return s.requests.RequestRollback(ctx, versionID)
}

// Candidate is what rolling back to a version would start from: the version, the run
// that wrote it (nil for none), and why it cannot be rolled back to ("" it can), in
// the words RollBack refuses it with.
type Candidate struct {
	Version run.StateVersionInfo
	Source  *run.Run
	Refusal string
}

// Candidate says what rolling workspaceID back to versionID would re-apply, or why it
// cannot (the page that asks before a rollback); another organization's or another
// workspace's version is not found.
func (s *Service) Candidate(ctx context.Context, workspaceID, versionID string) (Candidate, error) {
	var c Candidate
	v, src, err := s.source(ctx, workspaceID, versionID)
	c.Version = v
	if src.ID != "" {
		c.Source = &src
	}
	var explained *errs.Explained
	if fields, ok := errs.AsValidation(err); ok {
		c.Refusal = fields.Fields["environment"] // who may request runs there
	} else if errors.As(err, &explained) && errors.Is(err, errs.ErrConflict) {
		c.Refusal = explained.Message
	} else if err != nil {
		return Candidate{}, err
	}
	return c, nil
}

// source is the version a rollback goes to and the run that wrote it, once every check
// passed (the refusals in words; the version, and the run when there is one, also with
// a refusal).
func (s *Service) source(ctx context.Context, workspaceID, versionID string) (run.StateVersionInfo, run.Run, error) {
	subject, err := authz.Require(ctx, authz.PermProvisioningPlan)
	if err != nil {
		return run.StateVersionInfo{}, run.Run{}, err
	}
	v, err := s.states.VersionInfo(ctx, subject.OrganizationID, versionID)
	if err != nil {
		return run.StateVersionInfo{}, run.Run{}, err
	}
	if v.WorkspaceID != workspaceID {
		return run.StateVersionInfo{}, run.Run{}, fmt.Errorf("state version %s of workspace %s: %w", versionID, workspaceID, errs.ErrNotFound)
	}
	if v.RunID == "" {
		return v, run.Run{}, errs.Explain(errs.ErrConflict, fmt.Sprintf("State version %d was not written by a run, so there are no inputs to re-apply.", v.Serial))
	}
	// The workspace is the source run's: what the person may not see is not found.
	src, err := s.runs.Get(ctx, v.RunID)
	if err != nil {
		return run.StateVersionInfo{}, run.Run{}, err
	}
	current, err := s.states.Predecessor(ctx, subject.OrganizationID, workspaceID)
	if err != nil {
		return v, src, err
	}
	switch {
	case current.VersionID == v.ID:
		return v, src, errs.Explain(errs.ErrConflict, fmt.Sprintf("State version %d is the workspace's current state: there is nothing to roll back.", v.Serial))
	case src.Kind == run.KindDestroy:
		return v, src, errs.Explain(errs.ErrConflict, fmt.Sprintf("State version %d is what the destroy of run %s left: to destroy again, use Destroy.", v.Serial, src.Label()))
	}
	return v, src, s.requests.CheckRollback(ctx, v.ID)
}

// Review is what a rollback's review says it cannot bring back: what its plan
// replaces or destroys of irreversible resources (Lost), and what was replaced or
// destroyed since the version it rolls back to (ForwardFix).
type Review struct {
	Serial      int
	SourceLabel string
	Lost        []string
	ForwardFix  []string
}

// ReviewOf compares rollback r's plan (classified as res) and the state it was planned
// against with the version it rolls back to; nil for a run that is no rollback. r is
// read through run.Reads.Get (the subject may see it).
func (s *Service) ReviewOf(ctx context.Context, r run.Run, res classify.Result) (*Review, error) {
	if r.RollbackVersionID == nil {
		return nil, nil
	}
	subject, err := authz.Require(ctx, authz.PermOrgRead)
	if err != nil {
		return nil, err
	}
	if r.OrganizationID != subject.OrganizationID {
		return nil, errs.ErrNotFound
	}
	out := &Review{Serial: r.RollbackSerial}
	if r.SourceRunID != nil {
		if src, err := s.runs.Get(ctx, *r.SourceRunID); err == nil {
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
	var now []run.StateResource
	if r.PriorStateVersionID != nil {
		if now, err = s.states.ResourcesOf(ctx, r.OrganizationID, *r.PriorStateVersionID); err != nil {
			return nil, err
		}
	}
	// A template the catalog no longer offers names no data-bearing type: nothing is
	// said to be lost rather than the review failing (the plan says what it does).
	facts, _ := s.facts.Facts(r.TemplateName)
	out.ForwardFix = forwardFixOnly(then, now, facts.Irreversible, r.RollbackSerial)
	return out, nil
}

// forwardFixOnly says which irreversible resources of the state at serial (then) were
// replaced or destroyed by today (now): a rollback re-creates their configuration, not
// the data they held then.
func forwardFixOnly(then, now []run.StateResource, irreversible []string, serial int) []string {
	var out []string
	for _, t := range then {
		if !slices.Contains(irreversible, t.Type) {
			continue
		}
		i := slices.IndexFunc(now, func(n run.StateResource) bool { return n.Address == t.Address })
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
func WorkspaceBoundary(irreversible []string, resources []run.StateResource) []string {
	var out []string
	for _, r := range resources {
		if slices.Contains(irreversible, r.Type) {
			out = append(out, fmt.Sprintf("%s (%s, %s) holds data: a rollback that replaces or destroys it loses what it holds.", r.Address, r.Type, r.ID))
		}
	}
	return out
}
