package breakglass

import (
	"context"
	"errors"
	"fmt"
	"time"

	"gantry/models/audit"
	"gantry/models/authz"
	"gantry/models/db"
	"gantry/models/environment"
	"gantry/models/errs"
	"gantry/models/identity"
	"gantry/models/run"
	"gantry/models/workspace"
)

// What windows need from other aggregates, each as a small interface the owner
// implements.

// Runs is what windows need of the run lifecycle (run.Service).
type Runs interface {
	// Actor is the rules' view of a person in an environment.
	Actor(ctx context.Context, subject authz.Subject, env environment.Environment) (run.Actor, error)
	// WorkspaceExecutor is the executor that wrote the workspace's state.
	WorkspaceExecutor(ctx context.Context, orgID, workspaceID string) (run.RunnerInfo, error)
	// WindowOpened makes the workspace's waiting runs STALE and approved ones EXPIRED.
	WindowOpened(ctx context.Context, orgID, workspaceID, windowID string) error
	// DriftCheckFor queues the drift check at a window's end.
	DriftCheckFor(ctx context.Context, orgID, workspaceID, windowID string) (run.Run, error)
	// Codify queues a codification of the window for the subject in ctx.
	Codify(ctx context.Context, workspaceID, windowID, madeBy string) (run.Run, error)
}

// Environments reads a window's environment, and which ones a person may not see
// (environment.Service).
type Environments interface {
	Lookup(ctx context.Context, orgID, id string) (environment.Environment, error)
	HiddenFrom(ctx context.Context, subject authz.Subject) ([]string, error)
}

// Workspaces reads a window's workspace (workspace.Store).
type Workspaces interface {
	Get(ctx context.Context, orgID, id string) (workspace.Workspace, error)
}

// Minter mints a window's credentials (identity.Issuer).
type Minter interface {
	MintUntil(ctx context.Context, c identity.Claims, notAfter time.Time) (string, time.Time, error)
}

// Job is the window's next deadline: a request's decision deadline, an approval's
// validity, an open window's end. Its worker calls Service.Due.
type Job struct {
	WindowID string
	State    State // the state the deadline ends
	RunAt    time.Time
}

// Enqueuer puts window jobs on the queue inside the transaction carried by ctx.
type Enqueuer interface {
	EnqueueWindow(ctx context.Context, jobs ...Job) error
}

// Service is the manual change path for people: ask for, decide on, open, use, end,
// codify and close windows. Every method authorizes its subject through Permissions.
type Service struct {
	store        *Store
	audit        *audit.Log
	runs         Runs
	environments Environments
	workspaces   Workspaces
	minter       Minter
	enqueuer     Enqueuer
	// cloudEndpoint is where the credentials are used, shown with them ("": unknown).
	cloudEndpoint string
}

// Config is what a Service is built from; CloudEndpoint is optional.
type Config struct {
	Store         *Store
	Audit         *audit.Log
	Runs          Runs
	Environments  Environments
	Workspaces    Workspaces
	Minter        Minter
	Enqueuer      Enqueuer
	CloudEndpoint string
}

// NewService returns the service; every dependency but CloudEndpoint is required.
func NewService(c Config) (*Service, error) {
	if c.Store == nil || c.Audit == nil || c.Runs == nil || c.Environments == nil || c.Workspaces == nil || c.Minter == nil || c.Enqueuer == nil {
		return nil, errors.New("breakglass service: Store, Audit, Runs, Environments, Workspaces, Minter and Enqueuer are required")
	}
	return &Service{store: c.Store, audit: c.Audit, runs: c.Runs, environments: c.Environments, workspaces: c.Workspaces,
		minter: c.Minter, enqueuer: c.Enqueuer, cloudEndpoint: c.CloudEndpoint}, nil
}

// CloudEndpoint is where a window's credentials are used ("" when this Gantry does not
// know it).
func (s *Service) CloudEndpoint() string { return s.cloudEndpoint }

// decider is the subject as the entity sees it.
func decider(s authz.Subject) Decider { return Decider{UserID: s.UserID, Name: s.Name} }

// View is a window with what the person reading it may do.
type View struct {
	Window
	Permissions Permissions
	Environment environment.Environment
	Workspace   string
	// Now is the database clock the permissions were judged by.
	Now time.Time
}

// permissions judges subject's rights on w at now.
func (s *Service) permissions(ctx context.Context, subject authz.Subject, w Window, now time.Time) (Permissions, environment.Environment, error) {
	env, err := s.environments.Lookup(ctx, w.OrganizationID, w.EnvironmentID)
	if err != nil {
		return Permissions{}, environment.Environment{}, err
	}
	a, err := s.runs.Actor(ctx, subject, env)
	if err != nil {
		return Permissions{}, environment.Environment{}, err
	}
	return PermissionsOf(w, a, env, now), env, nil
}

// Get reads window id for the subject: another organization's, or one in an
// environment they may not see, is not found.
func (s *Service) Get(ctx context.Context, id string) (View, error) {
	subject, err := authz.Require(ctx, authz.PermOrgRead)
	if err != nil {
		return View{}, err
	}
	w, err := s.store.get(ctx, subject.OrganizationID, id, false)
	if err != nil {
		return View{}, err
	}
	return s.view(ctx, subject, w)
}

func (s *Service) view(ctx context.Context, subject authz.Subject, w Window) (View, error) {
	now, err := s.store.clock(ctx)
	if err != nil {
		return View{}, err
	}
	p, env, err := s.permissions(ctx, subject, w, now)
	if err != nil {
		return View{}, err
	}
	if !p.Visible {
		return View{}, fmt.Errorf("break-glass window %s: %w", w.ID, errs.ErrNotFound)
	}
	ws, err := s.workspaces.Get(ctx, w.OrganizationID, w.WorkspaceID)
	if err != nil {
		return View{}, err
	}
	return View{Window: w, Permissions: p, Environment: env, Workspace: ws.Name, Now: now}, nil
}

// OfWorkspace lists workspaceID's windows, newest first (at most limit), for a subject
// who may see the workspace (the caller read it through the workspace service).
func (s *Service) OfWorkspace(ctx context.Context, workspaceID string, limit int) ([]Window, error) {
	subject, err := authz.Require(ctx, authz.PermOrgRead)
	if err != nil {
		return nil, err
	}
	return s.store.list(ctx, limit, "organization_id = ? AND workspace_id = ?", subject.OrganizationID, workspaceID)
}

// Recent lists the subject's organization's windows, newest first, leaving out those of
// environments hidden from them.
func (s *Service) Recent(ctx context.Context, limit int) ([]Window, error) {
	subject, err := authz.Require(ctx, authz.PermOrgRead)
	if err != nil {
		return nil, err
	}
	hidden, err := s.environments.HiddenFrom(ctx, subject)
	if err != nil {
		return nil, err
	}
	if len(hidden) > 0 {
		return s.store.list(ctx, limit, "organization_id = ? AND environment_id NOT IN ?", subject.OrganizationID, hidden)
	}
	return s.store.list(ctx, limit, "organization_id = ?", subject.OrganizationID)
}

// ToDecide lists the windows of the subject's organization waiting for an admin's
// decision that the subject may take (an admin or owner, not the requester; none of the
// environments hidden from them), oldest first, at most limit: the landing page shows them.
func (s *Service) ToDecide(ctx context.Context, limit int) ([]Window, error) {
	subject, err := authz.Require(ctx, authz.PermOrgRead)
	if err != nil || !subject.Role.AtLeast(authz.RoleAdmin) {
		return nil, err
	}
	hidden, err := s.environments.HiddenFrom(ctx, subject)
	if err != nil {
		return nil, err
	}
	where, args := "organization_id = ? AND state = ? AND requested_by <> ?", []any{subject.OrganizationID, Requested, subject.UserID}
	if len(hidden) > 0 {
		where, args = where+" AND environment_id NOT IN ?", append(args, hidden)
	}
	var out []Window
	if err := s.store.conn(ctx).Where(where, args...).Order("created_at, id").Limit(limit).Find(&out).Error; err != nil {
		return nil, fmt.Errorf("listing windows to decide: %w", err)
	}
	return out, nil
}

// Check says what asking for a window on workspaceID would be refused for (field
// messages), without writing anything: the form shows it before anyone types.
func (s *Service) Check(ctx context.Context, req Request) error {
	subject, err := authz.Require(ctx, authz.PermOrgRead)
	if err != nil {
		return err
	}
	_, _, err = s.checkRequest(ctx, subject, req)
	return err
}

// checkRequest validates a request: the workspace (not found unless visible), who asks,
// the reason and duration, a live executor, and no other window asked for, approved or
// open on it.
func (s *Service) checkRequest(ctx context.Context, subject authz.Subject, req Request) (workspace.Workspace, environment.Environment, error) {
	ws, err := s.workspaces.Get(ctx, subject.OrganizationID, req.WorkspaceID)
	if err != nil {
		return workspace.Workspace{}, environment.Environment{}, err
	}
	env, err := s.environments.Lookup(ctx, subject.OrganizationID, ws.EnvironmentID)
	if err != nil {
		return workspace.Workspace{}, environment.Environment{}, err
	}
	a, err := s.runs.Actor(ctx, subject, env)
	if err != nil {
		return workspace.Workspace{}, environment.Environment{}, err
	}
	if !environment.Visible(env, a.Role, a.Granted) {
		return workspace.Workspace{}, environment.Environment{}, fmt.Errorf("workspace %s: %w", req.WorkspaceID, errs.ErrNotFound)
	}
	v := req.check()
	mayRequest(a, env, v)
	exec, err := s.runs.WorkspaceExecutor(ctx, subject.OrganizationID, ws.ID)
	var explained *errs.Explained
	switch {
	case errors.As(err, &explained):
		v.Add("workspace", explained.Message+" A break-glass window changes what a run applied.")
	case err != nil:
		return workspace.Workspace{}, environment.Environment{}, err
	case exec.Simulated:
		v.Add("workspace", fmt.Sprintf("Workspace %s runs on the %s executor (SIMULATED): there is no live cloud to change by hand.", ws.Name, exec.Name))
	}
	active, err := s.store.list(ctx, 1, "workspace_id = ? AND state IN ?", ws.ID, []State{Requested, Approved, Open})
	if err != nil {
		return workspace.Workspace{}, environment.Environment{}, err
	}
	if len(active) > 0 {
		v.Add("workspace", fmt.Sprintf("Workspace %s already has a break-glass window that is %s (%s): one at a time.", ws.Name, active[0].State.Label(), active[0].ID))
	}
	return ws, env, v.Err()
}

// Request asks for a window on req.WorkspaceID: it waits for an admin's decision
// within the environment's decision window. Bad input is *errs.Validation and nothing
// is written.
func (s *Service) Request(ctx context.Context, req Request) (Window, error) {
	subject, err := authz.Require(ctx, authz.PermProvisioningPlan)
	if err != nil {
		return Window{}, err
	}
	if req.Duration == 0 {
		req.Duration = DefaultDuration
	}
	var out Window
	err = db.Tx(ctx, s.store.db, func(ctx context.Context) error {
		ws, env, err := s.checkRequest(ctx, subject, req)
		if err != nil {
			return err
		}
		now, err := s.store.clock(ctx)
		if err != nil {
			return err
		}
		w := Window{ID: db.NewID("bgw"), OrganizationID: subject.OrganizationID, EnvironmentID: env.ID, WorkspaceID: ws.ID,
			State: Requested, Reason: normalized(req.Reason), DurationMinutes: int(req.Duration / time.Minute),
			RequestedBy: subject.UserID, RequestedByName: subject.Name, DecisionDeadline: now.Add(env.DecisionWindow()),
			CreatedAt: now, UpdatedAt: now}
		w.StateReason = "waiting for an admin's approval (not the requester) by " + w.DecisionDeadline.UTC().Format("2006-01-02 15:04 UTC")
		w.TermsDigest = TermsOf(w).Digest()
		if err := s.store.conn(ctx).Create(&w).Error; err != nil {
			return fmt.Errorf("creating break-glass window: %w", db.Translate(err))
		}
		if err := s.audit.Record(ctx, audit.Entry{Action: "breakglass.requested", TargetType: "breakglass_window", TargetID: w.ID,
			EnvironmentID: w.EnvironmentID, WorkspaceID: w.WorkspaceID, Data: map[string]any{"workspace_id": w.WorkspaceID,
				"reason": w.Reason, "duration_minutes": w.DurationMinutes, "terms_digest": w.TermsDigest,
				"decision_deadline": w.DecisionDeadline.UTC()}}); err != nil {
			return err
		}
		out = w
		return s.enqueuer.EnqueueWindow(ctx, Job{WindowID: w.ID, State: Requested, RunAt: w.DecisionDeadline})
	})
	return out, err
}

// act runs one person's action on window id under its row lock and the database clock:
// verdict picks the action's verdict from Permissions (a decision after its deadline
// expires the window and answers APPROVAL_EXPIRED), then fn changes the window, which
// is saved and audited with the subject as its actor.
func (s *Service) act(ctx context.Context, id string, verdict func(Permissions) run.Verdict,
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
	return s.act(ctx, id, func(p Permissions) run.Verdict { return p.Approve }, func(ctx context.Context, w *Window, subject authz.Subject, now time.Time) error {
		if err := w.Approve(decider(subject), terms, now, run.ApprovalValidity); err != nil {
			return err
		}
		return s.enqueuer.EnqueueWindow(ctx, Job{WindowID: w.ID, State: Approved, RunAt: *w.ApprovalExpiresAt})
	})
}

// Reject rejects window id's terms with a reason.
func (s *Service) Reject(ctx context.Context, id, terms, reason string) (Window, error) {
	return s.act(ctx, id, func(p Permissions) run.Verdict { return p.Reject }, func(ctx context.Context, w *Window, subject authz.Subject, _ time.Time) error {
		// Who may reject is asked first: a reason does not make a refusal a 422.
		if err := checkRejectReason(reason); err != nil {
			return err
		}
		return w.Reject(decider(subject), terms, normalized(reason))
	})
}

// Cancel withdraws window id before it opens.
func (s *Service) Cancel(ctx context.Context, id string) (Window, error) {
	return s.act(ctx, id, func(p Permissions) run.Verdict { return p.Cancel }, func(ctx context.Context, w *Window, subject authz.Subject, _ time.Time) error {
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
	w, err := s.act(ctx, id, func(p Permissions) run.Verdict { return p.Open }, func(ctx context.Context, w *Window, subject authz.Subject, now time.Time) error {
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
	w, err := s.act(ctx, id, func(p Permissions) run.Verdict { return p.Credentials }, func(ctx context.Context, w *Window, _ authz.Subject, now time.Time) error {
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
	return s.act(ctx, id, func(p Permissions) run.Verdict { return p.End }, func(ctx context.Context, w *Window, subject authz.Subject, now time.Time) error {
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
	w.moves[len(w.moves)-1].data = map[string]any{"drift_check_run_id": check.ID}
	return nil
}

// Codify asks for the codification of window id (awaiting it): a gated refresh-only
// run accepting the change into state, which the requester of the window never decides.
func (s *Service) Codify(ctx context.Context, id string) (Window, run.Run, error) {
	var r run.Run
	w, err := s.act(ctx, id, func(p Permissions) run.Verdict { return p.Codify }, func(ctx context.Context, w *Window, subject authz.Subject, _ time.Time) error {
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
	return s.act(ctx, id, func(p Permissions) run.Verdict { return p.Close }, func(ctx context.Context, w *Window, subject authz.Subject, _ time.Time) error {
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
		out = w
		return s.store.save(ctx, &w, authz.System(w.OrganizationID), now)
	})
	return out, err
}
