package run

import (
	"context"
	"errors"
	"fmt"
	"time"

	"gantry/models/artifact"
	"gantry/models/audit"
	"gantry/models/authz"
	"gantry/models/db"
	"gantry/models/errs"
)

// Stopping an apply (DESIGN §2: RUNNING, "cancel where supported"). A person cancels a
// run that is applying: under the run's lock, against the apply's lease, the run ends
// APPLY_INTERRUPTED (code APPLY_CANCELLED) with who and why, and the lease is marked
// stopping instead of ended. Its worker keeps renewing it, hears "stop" at its next
// heartbeat (ErrStopRequested), interrupts OpenTofu as a terminal's Ctrl-C would (tofu
// finishes what it is doing and stores the state it wrote, with the apply's own state
// credential and its fenced lock), then records the log and that state
// (FinishStopped), fences the workspace's state lock and ends the lease. The apply slot
// stays the run's: no later run applies until an admin recovers it. A worker that dies
// while stopping leaves a stopping lease to expire: the sweeper fences then.
//
// A cancel and the apply's own finish race under the run lock: the first to commit
// wins. A finish that loses (FinishApply, FailPhase) finds the run APPLY_INTERRUPTED
// and skips; the worker records what the apply wrote through FinishStopped instead. A
// cancel that loses finds the run VERIFYING (or ended) and is refused 409.

// ErrStopRequested answers a heartbeat of an apply that was cancelled: the lease is
// still the worker's (renewed), and the worker stops the apply and records it.
var ErrStopRequested = errors.New("the run was cancelled while it applied: stop the apply and record what it wrote")

// Cancellation is what a cancel carries: a reason, and whether the person confirmed it
// (the confirmation page; the API's "confirm"). Cancelling a run that is applying needs
// both, with a reason of MinReasonLength characters.
type Cancellation struct {
	Reason    string
	Confirmed bool
}

// check refuses a cancellation of a run that is applying without its confirmation and
// reason (422, at their fields; nothing is recorded).
func (c Cancellation) check(r Run) error {
	if r.State != Running {
		return nil
	}
	v := &errs.Validation{}
	if !c.Confirmed {
		v.Add("confirm", "Cancelling an apply stops OpenTofu halfway through: confirm it.")
	}
	if err := checkReason(c.Reason, MinReasonLength, fmt.Sprintf("Say why you stop this apply, in at least %d characters: it is kept with the run and in the audit log.", MinReasonLength)); err != nil {
		v.Add("reason", err.(*errs.Validation).Fields["reason"])
	}
	return v.Err()
}

// stopApply marks the apply lease of run r stopping, inside the cancel's transaction. A
// lease whose worker is gone (expired, or none) has nobody to stop: the workspace's
// state lock is fenced now, as the sweeper would, and the lease ends.
func (s *Decisions) stopApply(ctx context.Context, r Run, why string) error {
	var rows []leaseRow
	err := db.Conn(ctx, s.k.store.db).Raw(`UPDATE run_leases SET stopping = true WHERE run_id = ? AND phase = ?
		RETURNING *, expires_at <= clock_timestamp() AS expired`, r.ID, string(JobApply)).Scan(&rows).Error
	if err != nil {
		return fmt.Errorf("stopping the apply of run %s: %w", r.ID, err)
	}
	if len(rows) == 1 && !rows[0].Expired {
		return nil
	}
	if err := (&Jobs{k: s.k}).fence(ctx, r, why); err != nil {
		return err
	}
	return s.k.leases.endLeases(ctx, r.ID)
}

// StoppedApply is what the worker of a cancelled apply recorded: the lease it held, the
// state its runner returned (the mock; nil when tofu wrote it through the backend) and
// the apply's log.
type StoppedApply struct {
	Lease Lease
	State []byte
	Log   []byte
}

// FinishStopped records what a cancelled apply wrote, once its worker stopped it: the
// log, the state version it wrote (a state the runner returned is stored first, through
// the backend's rules), attested like any apply's; then the workspace's state lock is
// fenced and the lease ends. ErrSkip when run l.RunID was not cancelled under l (the
// apply finished first, or another worker's lease).
func (s *Applies) FinishStopped(ctx context.Context, out StoppedApply) (Run, error) {
	return s.k.update(ctx, "", out.Lease.RunID, nil, func(ctx context.Context, r *Run, _ time.Time) error {
		if r.State != ApplyInterrupted || r.Ending != EndApplyCancelled {
			return ErrSkip
		}
		var stopping int64
		if err := db.Conn(ctx, s.k.store.db).Raw("SELECT count(*) FROM (SELECT 1 FROM run_leases WHERE run_id = ? AND token = ? AND stopping FOR UPDATE) l",
			r.ID, out.Lease.Token).Scan(&stopping).Error; err != nil {
			return fmt.Errorf("reading the stopping lease of run %s: %w", r.ID, err)
		}
		if stopping == 0 {
			return ErrSkip
		}
		versionID, err := s.k.states.VersionOf(ctx, r.OrganizationID, r.WorkspaceID, r.ID)
		if err != nil {
			return err
		}
		if out.State != nil {
			if versionID, err = s.k.states.RecordApplied(ctx, r.OrganizationID, r.WorkspaceID, r.ID, out.State, s.staleness); err != nil {
				return err
			}
		}
		data := map[string]any{"lease": out.Lease.Token, "state_written": versionID != "", "number": r.Number, "workspace_id": r.WorkspaceID,
			"simulated": r.Simulated}
		if versionID != "" {
			r.NewStateVersionID, data["state_version_id"] = &versionID, versionID
		}
		if len(out.Log) > 0 {
			a, err := s.k.artifacts.Put(ctx, r.OrganizationID, r.WorkspaceID, artifact.ApplyLog, out.Log)
			if err != nil {
				return err
			}
			r.ApplyLogArtifactID, data["apply_log_artifact_id"] = &a.ID, a.ID
		}
		if err := s.k.attest(ctx, *r, "cancelled mid-apply: "+r.StateReason); err != nil {
			return fmt.Errorf("attesting the stopped apply: %w", err)
		}
		if err := s.jobs.fence(ctx, *r, "the apply was cancelled and stopped"); err != nil {
			return err
		}
		if err := s.k.leases.endLeases(ctx, r.ID); err != nil {
			return err
		}
		if err := s.k.audit.RecordAs(ctx, authz.System(r.OrganizationID), audit.Entry{Action: "run.apply_stopped", TargetType: "run", TargetID: r.ID,
			Data: data, EnvironmentID: r.EnvironmentID, WorkspaceID: r.WorkspaceID}); err != nil {
			return err
		}
		// The run's state does not move: its page hears of the log and state by this.
		return s.k.store.notify(ctx, *r)
	})
}
