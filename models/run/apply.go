package run

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"gantry/models/artifact"
	"gantry/models/authz"
	"gantry/models/bundle"
	"gantry/models/errs"
	"gantry/policies"
)

// The apply phase: everything the approval bound is checked again before the first
// side effect, then the stored plan file is applied and the state it wrote recorded.

// ApplyWork is what an apply job needs.
type ApplyWork struct {
	Lease      Lease // as PlanWork.Lease
	Run        Run
	Config     []byte
	PlanFile   []byte
	PriorState []byte
	Secrets    []string // as PlanWork.Secrets
}

// BeginApply re-checks everything the approval bound before the first side effect
// (DESIGN §3): the approval is still valid, the stored plan file still has the approved
// digest, the approver still may approve, the workspace state is still the one the
// plan was computed from. Then it takes the workspace's apply slot and moves the run to
// RUNNING under a lease for claim. A run found RUNNING with no lease, or with the
// expired lease of an earlier attempt of claim's job, was being applied by a worker
// that died or was interrupted: it becomes APPLY_INTERRUPTED and is never applied again
// blindly.
func (s *Applies) BeginApply(ctx context.Context, runID string, claim Claim) (ApplyWork, error) {
	var work ApplyWork
	rc := s.prepareRecheck(ctx, runID)
	r, err := s.k.update(ctx, "", runID, nil, func(ctx context.Context, r *Run, now time.Time) error {
		switch r.State {
		case Running:
			old, err := s.k.leases.lease(ctx, r.ID)
			if err != nil {
				return err
			}
			if !old.leftBy(claim) {
				// A live lease: a worker still applies it (perhaps an earlier attempt of
				// this very job). An expired lease of another job: the sweeper
				// interrupts it.
				return ErrSkip
			}
			if err := s.jobs.fence(ctx, *r, "the worker applying this run stopped mid-apply"); err != nil {
				return err
			}
			return r.end(ApplyInterrupted, EndApplyInterrupted, "the worker applying this run stopped mid-apply; no later run of the workspace applies until an admin recovers this one")
		case Approved:
		default:
			return ErrSkip
		}
		// Fail closed: an approval without a validity is treated as expired.
		if r.ApprovalExpiresAt == nil || !now.Before(*r.ApprovalExpiresAt) {
			return s.k.endValidity(ctx, r) // naming what it waited behind (queue.go)
		}
		// A manual change is being made: the approval does not wait for it to end.
		if why, err := s.k.windowRefusal(ctx, *r); err != nil || why != "" {
			return errors.Join(err, r.end(Expired, EndWindowOpened, why+"; the approval ended before the apply started: plan again after it"))
		}
		plan, _, err := s.k.artifacts.Get(ctx, r.OrganizationID, deref(r.PlanArtifactID))
		if err != nil {
			return r.RefuseApply("the plan file could not be read: " + err.Error())
		}
		if got := bundle.Digest(plan); got != r.ApprovedPlanDigest || r.PlanDigest != r.ApprovedPlanDigest {
			return r.RefuseApply(fmt.Sprintf("plan digest mismatch: approved %s, the run carries %s and the stored plan file is %s",
				r.ApprovedPlanDigest, r.PlanDigest, got))
		}
		if err := s.stillEntitled(ctx, *r, now); err != nil {
			return r.RefuseApply(err.Error())
		}
		if err := s.policyStillHolds(ctx, *r, rc, now); err != nil {
			return r.RefuseApply(err.Error())
		}
		current, err := s.k.states.Predecessor(ctx, r.OrganizationID, r.WorkspaceID)
		if err != nil {
			return err
		}
		if mine := EvidenceOf(*r).Predecessor; current != mine {
			return r.end(Stale, EndStateMoved, fmt.Sprintf("the workspace state moved to %s after this run was planned against %s; plan again", current, mine))
		}
		if err := s.jobs.takeSlot(ctx, *r); err != nil {
			return err
		}
		work.PlanFile = plan
		if err := r.transition(Running, ""); err != nil {
			return err
		}
		if work.Lease, _, err = s.jobs.leaseFor(ctx, *r, JobApply, claim); err != nil {
			return err
		}
		// The apply needs no variables (OpenTofu applies the saved plan, which holds
		// them), but its log masks them as the plan's does.
		in, err := s.jobs.phaseInputs(ctx, *r, r.PriorStateVersionID)
		work.Config, work.PriorState, work.Secrets = in.config, in.state, in.secrets
		return err
	})
	if err != nil {
		return ApplyWork{}, err
	}
	if r.State != Running {
		return ApplyWork{Run: r}, ErrSkip
	}
	work.Run = r
	return work, nil
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

// stillEntitled checks, before any side effect, that the requester still may request
// the run and, for a person's approval, that the approver still may approve it (DESIGN
// §3: a role, grant or cloud.live removed after the decision voids it). The rules are
// those of requesting and approving (rules.go), asked again now.
func (s *Applies) stillEntitled(ctx context.Context, r Run, now time.Time) error {
	env, err := s.k.environments.Lookup(ctx, r.OrganizationID, r.EnvironmentID)
	if err != nil {
		return err
	}
	requester, err := s.k.actorFor(ctx, authz.Subject{UserID: r.RequestedBy, Name: r.RequestedByName, OrganizationID: r.OrganizationID}, env)
	if err != nil {
		return err
	}
	v := &errs.Validation{}
	if !requester.Can(authz.PermProvisioningPlan) {
		return fmt.Errorf("%s, who requested this run, may no longer request runs; the approval is void", r.RequestedByName)
	}
	mayRequest(requester, env, RunnerInfo{Name: r.Runner, Simulated: r.Simulated}, v)
	if msg, bad := v.Fields["environment"]; bad {
		return fmt.Errorf("%s, who requested this run, no longer may (%s); the approval is void", r.RequestedByName, strings.TrimSuffix(msg, "."))
	}
	if r.ApprovalKind != "person" || r.ApprovedBy == nil {
		return nil
	}
	approver, err := s.k.actorFor(ctx, authz.Subject{UserID: *r.ApprovedBy, Name: r.ApprovedByName, OrganizationID: r.OrganizationID}, env)
	if err != nil {
		return err
	}
	// Judged as the approval was: while it waited for that decision (the approval's own
	// moment), by the rules that decided it.
	waiting := r
	waiting.State = PendingApproval
	at := now
	if r.ApprovedAt != nil {
		at = *r.ApprovedAt
	}
	verdict := decide(waiting, approver, env, at, ActionApprove, true)
	if !verdict.Allowed() && verdict.Code() != errs.CodeApprovalExpired {
		return fmt.Errorf("%s, who approved this run, no longer may (%s); the approval is void", r.ApprovedByName, strings.TrimSuffix(verdict.Reason(), "."))
	}
	return nil
}

// recheck is a re-evaluation of an approved run's plan, computed before the run is
// locked (a large plan takes a moment) and judged inside the lock.
type recheck struct {
	planDigest string
	assessment Assessment
	err        error
}

// prepareRecheck re-runs the plan gates on run runID's plan if it is about to apply.
func (s *Applies) prepareRecheck(ctx context.Context, runID string) *recheck {
	r, err := s.k.store.get(ctx, "", runID)
	if err != nil || r.State != Approved || r.PolicyEvaluationID == nil {
		return nil
	}
	rc := &recheck{planDigest: r.PlanDigest}
	planJSON, _, err := s.k.artifacts.Get(ctx, r.OrganizationID, deref(r.PlanJSONArtifactID))
	if err != nil {
		rc.err = fmt.Errorf("the plan JSON could not be read: %w", err)
		return rc
	}
	rc.assessment, rc.err = s.jobs.assessPlan(ctx, r, planJSON)
	return rc
}

// policyStillHolds judges the policy re-evaluation before an apply (DESIGN §3: the
// bundle and the environment's modes may have changed since the approval). The same
// result as approved passes; a different one is stored as evidence and refuses the
// apply when a hard-mandatory rule fails, or a soft-mandatory rule fails without an
// override given to exactly this result (same rule version, mode and messages) that
// has not expired with the run's decision window.
func (s *Applies) policyStillHolds(ctx context.Context, r Run, rc *recheck, at time.Time) error {
	if r.PolicyEvaluationID == nil {
		return nil // planned before policies were evaluated
	}
	if rc == nil || rc.planDigest != r.PlanDigest {
		return errors.New("the policy re-check did not run on this plan")
	}
	if rc.err != nil {
		return fmt.Errorf("the policy re-check failed: %w", rc.err)
	}
	now := rc.assessment.Policy
	if now.Digest == r.PolicyResultDigest && r.PolicyOutcome != "soft_failed" {
		return nil // the approved result again, and no override to have expired
	}
	approved, overrides, err := s.k.policies.EvaluationWithOverrides(ctx, r.OrganizationID, *r.PolicyEvaluationID)
	if err != nil {
		return err
	}
	for rule, o := range overrides {
		if !o.ValidAt(at) {
			return fmt.Errorf("the override of %s expired at %s with the run's decision window", rule, o.ExpiresAt.UTC().Format(time.RFC3339))
		}
	}
	if now.Digest == r.PolicyResultDigest {
		return nil
	}
	again, err := s.k.policies.Record(ctx, r.OrganizationID, r.ID, r.PlanRevision, r.PlanDigest, now)
	if err != nil {
		return err
	}
	before := map[string]policies.Result{}
	for _, res := range approved.Results {
		before[res.RuleID] = res
	}
	var refused []string
	for _, res := range now.Results {
		if res.Passed {
			continue
		}
		switch res.Enforcement {
		case policies.HardMandatory:
			refused = append(refused, res.RuleID+" (hard-mandatory)")
		case policies.SoftMandatory:
			_, overridden := overrides[res.RuleID]
			if !overridden || !sameResult(before[res.RuleID], res) {
				refused = append(refused, res.RuleID+" (soft-mandatory, no override of this result)")
			}
		}
	}
	if len(refused) > 0 {
		return fmt.Errorf("the policy re-check before apply (evaluation %s, bundle %s) fails %s", again.ID, again.BundleDigest, strings.Join(refused, ", "))
	}
	return nil
}

// sameResult reports whether two results of one rule say the same thing.
func sameResult(a, b policies.Result) bool {
	return a.RuleVersion == b.RuleVersion && a.Enforcement == b.Enforcement && a.Passed == b.Passed && slices.Equal(a.Messages, b.Messages)
}

// takeSlot claims the workspace's apply slot for r, or reports ErrWorkspaceBusy. Runs
// of one workspace apply one at a time, in the order they were requested.
func (s *Jobs) takeSlot(ctx context.Context, r Run) error {
	holder, err := s.k.workspaces.LockSlot(ctx, r.WorkspaceID)
	if err != nil {
		return err
	}
	if holder != "" && holder != r.ID {
		return ErrWorkspaceBusy
	}
	// Runs apply in the order they were requested: an earlier run on its way to apply
	// (not a dry run) goes first, even if this one was approved sooner. Runs waiting for
	// a person's decision do not hold the queue (that can take days, this approval is
	// valid for minutes); a state this run writes makes them STALE.
	earlier, err := s.k.store.earlierInQueue(ctx, r)
	if err != nil {
		return err
	}
	if earlier > 0 {
		return ErrWorkspaceBusy
	}
	return s.k.workspaces.SetSlot(ctx, r.WorkspaceID, r.ID)
}

// ApplyOutcome is what the runner's apply produced.
type ApplyOutcome struct {
	Lease   Lease // the apply's lease: nothing is recorded once it is lost
	State   []byte
	Outputs []byte
	Log     []byte
}

// FinishApply records the state the apply produced and moves the run to VERIFYING.
// A runner that returns the state (the mock) has it stored here, through the state
// backend's rules, as a new encrypted version; a runner whose tofu wrote it through the
// http backend returns none, and the version the backend stored for this run is the one
// recorded. Either way the runs still waiting on the old state go STALE in the same
// transaction.
func (s *Applies) FinishApply(ctx context.Context, out ApplyOutcome) (Run, error) {
	return s.k.update(ctx, "", out.Lease.RunID, nil, func(ctx context.Context, r *Run, _ time.Time) error {
		if r.State != Running {
			return ErrSkip
		}
		if err := s.k.leases.holds(ctx, out.Lease); err != nil {
			return err
		}
		var versionID string
		var err error
		if out.State != nil {
			if versionID, err = s.k.states.RecordApplied(ctx, r.OrganizationID, r.WorkspaceID, r.ID, out.State, s.staleness); err != nil {
				return err
			}
		} else {
			if versionID, err = s.k.states.VersionOf(ctx, r.OrganizationID, r.WorkspaceID, r.ID); err != nil {
				return err
			}
			if versionID == "" {
				return r.end(Failed, EndApplyFailed, "the apply finished but wrote no state through the backend")
			}
		}
		logArt, err := s.k.artifacts.Put(ctx, r.OrganizationID, r.WorkspaceID, artifact.ApplyLog, out.Log)
		if err != nil {
			return err
		}
		r.NewStateVersionID, r.ApplyLogArtifactID, r.Outputs = &versionID, &logArt.ID, out.Outputs
		if err := s.k.attest(ctx, *r, "applied"); err != nil {
			return fmt.Errorf("attesting the apply: %w", err)
		}
		return r.transition(Verifying, "")
	})
}
