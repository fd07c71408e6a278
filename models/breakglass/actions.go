package breakglass

import (
	"context"
	"errors"
	"fmt"
	"time"

	"gantry/models/audit"
	"gantry/models/authz"
	"gantry/models/db"
	"gantry/models/errs"
	"gantry/models/identity"
	"gantry/models/run"
	"gantry/models/runport"
)

// What people do to a window once it is asked for, each under its row lock and the
// database clock, authorized through Permissions; and what its deadlines do (Due).

// act runs one person's action on window id under its row lock and the database clock:
// verdict picks the action's verdict from Permissions (a decision after its deadline
// expires the window and answers APPROVAL_EXPIRED), then fn changes the window, which
// is saved and audited with the subject as its actor.
func (s *Service) act(ctx context.Context, id string, verdict func(Permissions) runport.Verdict,
	fn func(ctx context.Context, w *Window, subject authz.Subject, now time.Time) error) (Window, error) {
	subject, err := authz.Require(ctx, authz.PermOrgRead)
	if err != nil {
		return Window{}, err
	}
	var out Window
	err = db.Tx(ctx, s.store.db, func(ctx context.Context) error {
		w, err := s.store.get(ctx, subject.OrganizationID, id, true)
		if err != nil {
			return err
		}
		now, err := s.store.clock(ctx)
		if err != nil {
			return err
		}
		p, _, err := s.permissions(ctx, subject, w, now)
		if err != nil {
			return err
		}
		var answer error
		if v := verdict(p); !v.Allowed() {
			if v.Code() != errs.CodeApprovalExpired || w.State.Terminal() {
				return v.Err()
			}
			// Judged at commit: too late; the window expires, and that is recorded.
			if err := w.Expire(v.Reason()); err != nil {
				return err
			}
			answer = db.CommitThen(v.Err())
		} else if err := fn(ctx, &w, subject, now); err != nil {
			return err
		}
		if err := s.tellMoves(ctx, w, subject, now); err != nil {
			return err
		}
		if err := s.store.save(ctx, &w, subject, now); err != nil {
			return err
		}
		out = w
		return answer
	})
	return out, err
}

// Approve approves window id's exact terms (the digest the page showed): the requester
// may open it within run.ApprovalValidity.
func (s *Service) Approve(ctx context.Context, id, terms string) (Window, error) {
	return s.act(ctx, id, func(p Permissions) runport.Verdict { return p.Approve }, func(ctx context.Context, w *Window, subject authz.Subject, now time.Time) error {
		if err := w.Approve(decider(subject), terms, now, run.ApprovalValidity); err != nil {
			return err
		}
		return s.enqueuer.EnqueueWindow(ctx, Job{WindowID: w.ID, State: Approved, RunAt: *w.ApprovalExpiresAt})
	})
}

// Reject rejects window id's terms with a reason.
func (s *Service) Reject(ctx context.Context, id, terms, reason string) (Window, error) {
	return s.act(ctx, id, func(p Permissions) runport.Verdict { return p.Reject }, func(ctx context.Context, w *Window, subject authz.Subject, _ time.Time) error {
		// Who may reject is asked first: a reason does not make a refusal a 422.
		if err := checkRejectReason(reason); err != nil {
			return err
		}
		return w.Reject(decider(subject), terms, normalized(reason))
	})
}

// Cancel withdraws window id before it opens.
func (s *Service) Cancel(ctx context.Context, id string) (Window, error) {
	return s.act(ctx, id, func(p Permissions) runport.Verdict { return p.Cancel }, func(ctx context.Context, w *Window, subject authz.Subject, _ time.Time) error {
		return w.Cancel(decider(subject))
	})
}

// Credentials are a window's credentials, shown once: a breakglass-phase workload
// token scoped to the window's workspace, never living past the window.
type Credentials struct {
	Token     string
	ExpiresAt time.Time
	// Endpoint is the cloud's API ("" unknown).
	Endpoint string
}

// String keeps the token out of %v and logs.
func (Credentials) String() string { return "[credentials redacted]" }

// Open opens window id (its requester, within the approval's validity): the
// workspace's waiting runs go STALE and approved ones EXPIRED, its clock starts, and
// its first credentials are minted (shown once, never stored).
func (s *Service) Open(ctx context.Context, id string) (Window, Credentials, error) {
	var creds Credentials
	w, err := s.act(ctx, id, func(p Permissions) runport.Verdict { return p.Open }, func(ctx context.Context, w *Window, subject authz.Subject, now time.Time) error {
		// Runs first (their rows, then the workspace's), as every transaction that
		// changes runs locks them before its first audit event.
		if err := s.runs.WindowOpened(ctx, w.OrganizationID, w.WorkspaceID, w.ID); err != nil {
			return err
		}
		if err := w.OpenNow(decider(subject), now); err != nil {
			return err
		}
		if err := s.enqueuer.EnqueueWindow(ctx, Job{WindowID: w.ID, State: Open, RunAt: *w.EndsAt}); err != nil {
			return err
		}
		var err error
		creds, err = s.mint(ctx, w, now)
		return err
	})
	if err != nil {
		return Window{}, Credentials{}, err
	}
	return w, creds, nil
}

// IssueCredentials mints fresh credentials for open window id (its requester): each
// issue is audited, the token itself never stored or shown twice.
func (s *Service) IssueCredentials(ctx context.Context, id string) (Window, Credentials, error) {
	var creds Credentials
	w, err := s.act(ctx, id, func(p Permissions) runport.Verdict { return p.Credentials }, func(ctx context.Context, w *Window, _ authz.Subject, now time.Time) error {
		var err error
		creds, err = s.mint(ctx, w, now)
		return err
	})
	if err != nil {
		return Window{}, Credentials{}, err
	}
	return w, creds, nil
}

// mint issues one token for open window w and records that it did (the audit names its
// expiry and the count, never the token).
func (s *Service) mint(ctx context.Context, w *Window, now time.Time) (Credentials, error) {
	token, expires, err := s.minter.MintUntil(ctx, identity.Claims{OrganizationID: w.OrganizationID, EnvironmentID: w.EnvironmentID,
		WorkspaceID: w.WorkspaceID, WindowID: w.ID, Phase: identity.PhaseBreakglass}, *w.EndsAt)
	if err != nil {
		return Credentials{}, fmt.Errorf("minting the window's credentials: %w", err)
	}
	w.CredentialsIssued++
	if err := s.audit.Record(ctx, audit.Entry{Action: "breakglass.credentials_issued", TargetType: "breakglass_window", TargetID: w.ID,
		EnvironmentID: w.EnvironmentID, WorkspaceID: w.WorkspaceID, Data: map[string]any{"workspace_id": w.WorkspaceID,
			"phase": identity.PhaseBreakglass, "scope": identity.PhaseBreakglass.Scope(), "expires_at": expires.UTC(),
			"issued": w.CredentialsIssued, "window_ends_at": w.EndsAt.UTC()}}); err != nil {
		return Credentials{}, err
	}
	return Credentials{Token: token, ExpiresAt: expires, Endpoint: s.cloudEndpoint}, nil
}

// End ends open window id early (its requester or an admin): it awaits codification,
// and the drift check runs now.
func (s *Service) End(ctx context.Context, id string) (Window, error) {
	return s.act(ctx, id, func(p Permissions) runport.Verdict { return p.End }, func(ctx context.Context, w *Window, subject authz.Subject, now time.Time) error {
		return s.end(ctx, w, "ended early by "+subject.Name, now)
	})
}

// end moves an open window to awaiting codification and queues its drift check.
func (s *Service) end(ctx context.Context, w *Window, reason string, now time.Time) error {
	if err := w.End(reason+"; awaiting codification", now); err != nil {
		return err
	}
	check, err := s.runs.DriftCheckFor(ctx, w.OrganizationID, w.WorkspaceID, w.ID)
	switch {
	case errors.Is(err, run.ErrSkip):
		return nil
	case err != nil:
		return err
	}
	w.DriftCheckRunID = &check.ID
	w.moves.Last().Data = map[string]any{"drift_check_run_id": check.ID}
	return nil
}

// Codify asks for the codification of window id (awaiting it): a gated refresh-only
// run accepting the change into state, which the requester of the window never decides.
func (s *Service) Codify(ctx context.Context, id string) (Window, run.Run, error) {
	var r run.Run
	w, err := s.act(ctx, id, func(p Permissions) runport.Verdict { return p.Codify }, func(ctx context.Context, w *Window, subject authz.Subject, _ time.Time) error {
		var err error
		if r, err = s.runs.Codify(ctx, w.WorkspaceID, w.ID, w.RequestedBy); err != nil {
			return err
		}
		w.CodifyRunID = &r.ID
		return s.audit.Record(ctx, audit.Entry{Action: "breakglass.codification_requested", TargetType: "breakglass_window", TargetID: w.ID,
			EnvironmentID: w.EnvironmentID, WorkspaceID: w.WorkspaceID, RunID: r.ID,
			Data: map[string]any{"workspace_id": w.WorkspaceID, "codify_run_id": r.ID}})
	})
	if err != nil {
		return Window{}, run.Run{}, err
	}
	return w, r, nil
}

// Close closes window id (awaiting codification) without codifying it: an owner's
// decision, with a reason of MinReasonLength characters.
func (s *Service) Close(ctx context.Context, id, reason string) (Window, error) {
	return s.act(ctx, id, func(p Permissions) runport.Verdict { return p.Close }, func(ctx context.Context, w *Window, subject authz.Subject, _ time.Time) error {
		if err := checkCloseReason(reason); err != nil {
			return err
		}
		d := decider(subject)
		return w.Close(&d, normalized(reason))
	})
}

// Due ends what window id's deadline for state st ends (the job at that deadline; the
// system acts): a request nobody decided expires, an approval nobody used expires, an
// open window ends and its drift check is queued. A deadline that moved, or a window
// that moved on, is ErrSkip.
func (s *Service) Due(ctx context.Context, id string, st State) (Window, error) {
	var out Window
	err := db.Tx(ctx, s.store.db, func(ctx context.Context) error {
		w, err := s.store.get(ctx, "", id, true)
		if err != nil {
			return err
		}
		now, err := s.store.clock(ctx)
		if err != nil {
			return err
		}
		switch {
		case w.State != st:
			return run.ErrSkip
		case st == Requested && !now.Before(w.DecisionDeadline):
			err = w.Expire("no admin decided within the decision window")
		case st == Approved && w.ApprovalExpiresAt != nil && !now.Before(*w.ApprovalExpiresAt):
			err = w.Expire(fmt.Sprintf("the approval expired: the window was not opened within %d minutes", int(run.ApprovalValidity.Minutes())))
		case st == Open && w.EndsAt != nil && !now.Before(*w.EndsAt):
			err = s.end(ctx, &w, "its time was up", now)
		default:
			return run.ErrSkip
		}
		if err != nil {
			return err
		}
		system := authz.System(w.OrganizationID)
		if err := s.tellMoves(ctx, w, system, now); err != nil {
			return err
		}
		out = w
		return s.store.save(ctx, &w, system, now)
	})
	return out, err
}
