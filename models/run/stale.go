package run

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// LockWaiting locks the runs of the workspace a state write may mark STALE, before the
// write's first audit event (update's lock order). While the writer holds the
// workspace's state lock no other run starts waiting on that workspace (FinishPlan
// takes the same lock, shared), so these are all the runs StateWritten will touch.
func (s *Staleness) LockWaiting(ctx context.Context, orgID, workspaceID string) error {
	ids, err := s.k.store.waitingIn(ctx, workspaceID)
	if err != nil {
		return err
	}
	return s.k.store.lockRuns(ctx, ids)
}

// StateWritten marks the runs of the workspace that wait for a decision (PENDING_APPROVAL,
// a soft POLICY_BLOCKED) or for their apply (APPROVED) STALE, with the reason, unless
// their plan was computed against the version just written. The run that wrote it
// (byRunID, applying) is never among them, and each reason names it: a run that waited
// behind an apply is told which run moved the state under it (the audit event and the
// notice carry its id). It joins the transaction in ctx.
func (s *Staleness) StateWritten(ctx context.Context, orgID, workspaceID string, written Predecessor, byRunID string) error {
	return s.k.inTx(ctx, func(ctx context.Context) error {
		ids, err := s.k.store.waitingIn(ctx, workspaceID)
		if err != nil {
			return err
		}
		if len(ids) == 0 {
			return nil
		}
		writer, err := s.k.store.get(ctx, orgID, byRunID)
		if err != nil {
			return fmt.Errorf("reading the run that wrote the state: %w", err)
		}
		for _, id := range ids {
			if id == byRunID {
				continue
			}
			_, err := s.k.update(ctx, orgID, id, nil, func(ctx context.Context, r *Run, _ time.Time) error {
				mine := EvidenceOf(*r).Predecessor
				if !(r.Waiting() || r.State == Approved) || mine == written {
					return ErrSkip
				}
				why := fmt.Sprintf("the workspace state moved to %s, written by run %s, after this run was planned against %s; plan again", written, writer.Label(), mine)
				if err := r.end(Stale, EndStateMoved, why); err != nil {
					return err
				}
				r.moves.Annotate(map[string]any{causeRunKey: writer.ID})
				return nil
			})
			if err != nil && !errors.Is(err, ErrSkip) {
				return err
			}
		}
		return nil
	})
}
