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

// Actors give the rules' view of a person in an environment (run.Decisions): who may
// ask for, decide on and use a window is judged as for runs.
type Actors interface {
	Actor(ctx context.Context, subject authz.Subject, env environment.Environment) (run.Actor, error)
}

// Runs is what windows need of the runs they open, end and codify (run.DriftChecks).
type Runs interface {
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
	actors       Actors
	environments Environments
	workspaces   Workspaces
	minter       Minter
	enqueuer     Enqueuer
	notifier     Notifier
	members      Members
	// decisionWindow is how long a request waits for a decision (CheckDecisionWindow).
	decisionWindow time.Duration
	// cloudEndpoint is where the credentials are used, shown with them ("": unknown).
	cloudEndpoint string
}

// Config is what a Service is built from; CloudEndpoint is optional.
type Config struct {
	Store        *Store
	Audit        *audit.Log
	Runs         Runs
	Actors       Actors
	Environments Environments
	Workspaces   Workspaces
	Minter       Minter
	Enqueuer     Enqueuer
	Notifier     Notifier
	Members      Members
	// DecisionWindow is how long a request waits for a decision (zero:
	// DefaultDecisionWindow; else within CheckDecisionWindow's bounds).
	DecisionWindow time.Duration
	CloudEndpoint  string
}

// NewService returns the service; every dependency but DecisionWindow and
// CloudEndpoint is required.
func NewService(c Config) (*Service, error) {
	if c.Store == nil || c.Audit == nil || c.Runs == nil || c.Actors == nil || c.Environments == nil || c.Workspaces == nil || c.Minter == nil ||
		c.Enqueuer == nil || c.Notifier == nil || c.Members == nil {
		return nil, errors.New("breakglass service: Store, Audit, Runs, Actors, Environments, Workspaces, Minter, Enqueuer, Notifier and Members are required")
	}
	if c.DecisionWindow == 0 {
		c.DecisionWindow = DefaultDecisionWindow
	}
	if err := CheckDecisionWindow(c.DecisionWindow); err != nil {
		return nil, err
	}
	return &Service{store: c.Store, audit: c.Audit, runs: c.Runs, actors: c.Actors, environments: c.Environments, workspaces: c.Workspaces,
		minter: c.Minter, enqueuer: c.Enqueuer, notifier: c.Notifier, members: c.Members, decisionWindow: c.DecisionWindow,
		cloudEndpoint: c.CloudEndpoint}, nil
}

// DecisionWindow is how long a request waits for an admin's decision before it expires.
func (s *Service) DecisionWindow() time.Duration { return s.decisionWindow }

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
	a, err := s.actors.Actor(ctx, subject, env)
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

// ToDecide lists the windows of the subject's organization waiting for a decision the
// subject may take now (Permissions.MayDecide: an admin or owner, not the requester,
// within the decision deadline, none of the environments hidden from them), oldest
// first, at most limit (0: all): the inbox and the landing page list them ahead of
// runs.
func (s *Service) ToDecide(ctx context.Context, limit int) ([]Window, error) {
	subject, err := authz.Require(ctx, authz.PermOrgRead)
	if err != nil || !MayDecideSome(subject) {
		return nil, err
	}
	now, err := s.store.clock(ctx)
	if err != nil {
		return nil, err
	}
	hidden, err := s.environments.HiddenFrom(ctx, subject)
	if err != nil {
		return nil, err
	}
	// The query narrows; the rules decide, window by window (a handful at most: one
	// request at a time per workspace).
	where, args := "organization_id = ? AND state = ? AND requested_by <> ? AND decision_deadline > ?",
		[]any{subject.OrganizationID, Requested, subject.UserID, now}
	if len(hidden) > 0 {
		where, args = where+" AND environment_id NOT IN ?", append(args, hidden)
	}
	var found []Window
	if err := s.store.conn(ctx).Where(where, args...).Order("created_at, id").Find(&found).Error; err != nil {
		return nil, fmt.Errorf("listing windows to decide: %w", err)
	}
	out := make([]Window, 0, len(found))
	for _, w := range found {
		p, _, err := s.permissions(ctx, subject, w, now)
		if err != nil {
			return nil, err
		}
		if p.MayDecide() {
			out = append(out, w)
		}
		if limit > 0 && len(out) == limit {
			break
		}
	}
	return out, nil
}

// CountToDecide is how many windows wait for the subject's decision (ToDecide): the
// navigation's count of what waits for them includes it.
func (s *Service) CountToDecide(ctx context.Context) (int64, error) {
	ws, err := s.ToDecide(ctx, 0)
	return int64(len(ws)), err
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
	a, err := s.actors.Actor(ctx, subject, env)
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
// within the break-glass decision window (minutes: an emergency), and those who may
// decide it are told. Bad input is *errs.Validation and nothing
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
			RequestedBy: subject.UserID, RequestedByName: subject.Name, DecisionDeadline: now.Add(s.decisionWindow),
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
		if err := s.enqueuer.EnqueueWindow(ctx, Job{WindowID: w.ID, State: Requested, RunAt: w.DecisionDeadline}); err != nil {
			return err
		}
		if err := s.tellRequested(ctx, w, env, ws.Name, subject, now); err != nil {
			return err
		}
		return s.store.announce(ctx, w)
	})
	return out, err
}
