package run

import (
	"context"
	"errors"
	"time"

	"gantry/models/artifact"
	"gantry/models/secret"
)

// The verification phase: after an apply, a refresh-only comparison of the live
// resources with the state the apply wrote.

// VerifyWork is what a verify job needs.
type VerifyWork struct {
	Lease     Lease // as PlanWork.Lease
	Run       Run
	Config    []byte
	State     []byte
	Secrets   []string         // as PlanWork.Secrets
	Variables secret.Variables // as PlanWork.Variables: the refresh-only plan evaluates the configuration too
}

// BeginVerify takes a lease for claim on a run being verified and returns the
// applied state to verify, or ErrSkip.
func (s *Verifies) BeginVerify(ctx context.Context, runID string, claim Claim) (VerifyWork, error) {
	var work VerifyWork
	r, err := s.k.update(ctx, "", runID, nil, func(ctx context.Context, r *Run, _ time.Time) error {
		if r.State != Verifying || r.NewStateVersionID == nil {
			return ErrSkip
		}
		l, _, err := s.jobs.leaseFor(ctx, *r, JobVerify, claim)
		if err != nil {
			return err
		}
		work.Lease = l
		// The apply has released its lock; a lock this run still holds is a verify
		// attempt that died mid-way: fence it so the retry can lock.
		if s.k.fencer != nil && !r.Simulated {
			held, err := s.k.fencer.HoldsLock(ctx, r.WorkspaceID, r.ID)
			if err != nil {
				return err
			}
			if held {
				if err := s.jobs.fence(ctx, *r, "the worker verifying this run stopped; verifying again"); err != nil {
					return err
				}
			}
		}
		in, err := s.jobs.phaseInputs(ctx, *r, r.NewStateVersionID)
		work.Config, work.State, work.Variables, work.Secrets = in.config, in.state, in.vars, in.secrets
		return err
	})
	if err != nil {
		return VerifyWork{}, err
	}
	work.Run = r
	return work, nil
}

// FinishVerify ends the run verified under lease l: SUCCEEDED when the live resources
// match the applied state, FAILED with the residual drift otherwise.
func (s *Verifies) FinishVerify(ctx context.Context, l Lease, converged bool, log []byte) (Run, error) {
	return s.k.update(ctx, "", l.RunID, nil, func(ctx context.Context, r *Run, _ time.Time) error {
		if r.State != Verifying {
			return ErrSkip
		}
		if err := s.k.leases.holds(ctx, l); err != nil {
			return err
		}
		a, err := s.k.artifacts.Put(ctx, r.OrganizationID, r.WorkspaceID, artifact.VerifyLog, log)
		if err != nil {
			return err
		}
		r.VerifyLogArtifactID = &a.ID
		if !converged {
			return r.end(Failed, EndDriftAfterApply, "verification found drift between the live resources and the applied state")
		}
		if err := r.end(Succeeded, EndVerified, "applied and verified"); err != nil {
			return err
		}
		// A codification is proven by the drift check after it finding nothing.
		if r.Kind == KindCodify && r.BreakglassWindowID != nil {
			if _, err := s.drift.DriftCheckFor(ctx, r.OrganizationID, r.WorkspaceID, *r.BreakglassWindowID); err != nil && !errors.Is(err, ErrSkip) {
				return err
			}
		}
		return nil
	})
}
