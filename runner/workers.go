package runner

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/riverqueue/river"

	"gantry/models/run"
)

// Jobs is what every phase worker drives of the run lifecycle (run.Jobs): the run's
// executor, failing the phase, its live log and its lease.
type Jobs interface {
	ExecutorOf(ctx context.Context, runID string) (string, error)
	FailPhase(ctx context.Context, l run.Lease, log []byte, reason string) (run.Run, error)
	// AppendLog stores the next chunk (masked) of the live log of a phase held under l.
	AppendLog(ctx context.Context, r run.Run, l run.Lease, text []byte) error
	Renewer
}

// Plans begins and finishes plans (run.Plans).
type Plans interface {
	BeginPlan(ctx context.Context, runID string, claim run.Claim) (run.PlanWork, error)
	FinishPlan(ctx context.Context, out run.PlanOutcome) (run.Run, error)
}

// Applies begins and finishes applies (run.Applies).
type Applies interface {
	BeginApply(ctx context.Context, runID string, claim run.Claim) (run.ApplyWork, error)
	FinishApply(ctx context.Context, out run.ApplyOutcome) (run.Run, error)
	// FinishStopped records what an apply cancelled mid-way wrote (run/stop.go).
	FinishStopped(ctx context.Context, out run.StoppedApply) (run.Run, error)
}

// Verifies begins and finishes verifications (run.Verifies).
type Verifies interface {
	BeginVerify(ctx context.Context, runID string, claim run.Claim) (run.VerifyWork, error)
	FinishVerify(ctx context.Context, l run.Lease, converged bool, log []byte) (run.Run, error)
}

// Deadlines are the decisions the clock takes (run.Decisions): a run that waited past
// its deadline expires, one past its escalation time escalates.
type Deadlines interface {
	ExpireIfDue(ctx context.Context, runID string, st run.State) (run.Run, error)
	EscalateIfDue(ctx context.Context, runID string) (run.Run, error)
}

// skipped treats "the run already moved past this phase" as a finished job, and so a
// lost lease: the sweeper already closed this job and moved the run on.
func skipped(err error) bool { return errors.Is(err, run.ErrSkip) || errors.Is(err, run.ErrLeaseLost) }

// PlanWorker plans runs.
type PlanWorker struct {
	river.WorkerDefaults[PlanArgs]
	phase
	Plans Plans
	// Changes reads who changed a drifted resource (nil: drift is reported unattributed).
	Changes ChangeLog
}

func (w *PlanWorker) Timeout(*river.Job[PlanArgs]) time.Duration { return w.PhaseTimeout }

func (w *PlanWorker) Work(ctx context.Context, job *river.Job[PlanArgs]) error {
	if err := waitForExecutor(ctx, w.Jobs, w.Runners, job.Args.RunID); err != nil {
		return err
	}
	work, err := w.Plans.BeginPlan(ctx, job.Args.RunID, w.Leases.claim(job.ID))
	switch {
	case errors.Is(err, run.ErrWorkspaceBusy):
		// A drift check waits for the apply in progress (it never overlaps one).
		return river.JobSnooze(busyRetry)
	case skipped(err):
		return nil
	case err != nil:
		return err
	}
	if work.Restarted {
		w.Logger.WarnContext(ctx, "planning again after an interrupted attempt", "run", job.Args.RunID, "attempt", job.Attempt)
	}
	o, done, err := w.open(ctx, work.Run, work.Lease, work.Secrets)
	if done {
		return err
	}
	defer o.close()
	ctx, creds, live := o.ctx, o.creds, o.live
	res, err := o.rn.Plan(ctx, PlanRequest{RunID: work.Run.ID, WorkspaceID: work.Run.WorkspaceID, Kind: kindOf(work.Run.Kind),
		Config: work.Config, PriorState: work.PriorState, Credentials: creds, Variables: work.Variables, Log: live})
	live.Close() // the live log is complete before the run leaves the phase
	// The stored log is the runner's whole log, which holds what it printed in clear.
	res.Log = live.Mask(res.Log)
	if err != nil {
		return w.failed(ctx, work.Lease, res.Log, "plan", err)
	}
	out := run.PlanOutcome{Lease: work.Lease, Revision: work.Run.PlanRevision, PlanFile: res.PlanFile, PlanJSON: res.PlanJSON, Log: res.Log, HasChanges: res.HasChanges}
	if work.Run.Kind == run.KindDrift && res.HasChanges {
		// The phase's token may have run out during a long plan: read with a fresh one.
		token := creds.CloudToken
		if creds.Refresh != nil {
			if t, _, err := creds.Refresh(ctx); err == nil {
				token = t
			}
		}
		if out.Drift, err = observe(ctx, w.Changes, token, res.PlanJSON); err != nil {
			_, ferr := w.Jobs.FailPhase(ctx, work.Lease, res.Log, "reading the drift: "+err.Error())
			return ignoreSkip(ferr)
		}
	}
	return persist(ctx, w.Logger, out.Lease, func(ctx context.Context) error {
		_, err := w.Plans.FinishPlan(ctx, out)
		return err
	})
}

// kindOf is what the runner does for a run of kind k: a drift check and a codification
// plan refresh-only.
func kindOf(k run.Kind) Kind {
	if k.RefreshOnly() {
		return KindRefreshOnly
	}
	return Kind(k)
}

// observe reads the drifted resources of a refresh-only plan and, from the cloud's
// change history (read with the phase's own read-only token), who changed each. A
// history that cannot be read is said per resource; the drift is still reported.
func observe(ctx context.Context, changes ChangeLog, token string, planJSON []byte) ([]run.Observed, error) {
	obs, err := run.DriftOf(planJSON)
	if err != nil {
		return nil, err
	}
	for i := range obs {
		switch {
		case changes == nil:
			obs[i].HistoryError = "this Gantry reads no cloud change history"
		case obs[i].ID == "":
			obs[i].HistoryError = "the refresh names no id for it"
		default:
			if obs[i].Changes, err = changes.Changes(ctx, token, obs[i].Type, obs[i].ID); err != nil {
				obs[i].HistoryError = err.Error()
			}
		}
	}
	return obs, nil
}

func ignoreSkip(err error) error {
	if skipped(err) {
		return nil
	}
	return err
}

// ApplyWorker applies approved runs, one at a time per workspace. Its opening is its
// own: from the checks on, a failure ends the run ("nothing was applied"), and the state
// lock is reserved between the credentials and the apply.
type ApplyWorker struct {
	river.WorkerDefaults[ApplyArgs]
	phase
	Applies Applies
	// OnStart, if set, is called when an apply passed its checks and is about to run,
	// with when the worker picked the job up (the queue-latency benchmark tells the
	// queue's part from the checks' part with it).
	OnStart func(runID string, pickedUp time.Time)
	// Hooks hear of every attempt of an apply job (nil fields in production).
	Hooks ApplyHooks
	// Locks reserves the workspace's state lock before tofu runs (nil: not reserved).
	Locks StateReserver
}

// ApplyHooks let a test see, and hold, each attempt of an apply job: the interleavings of
// an interrupted apply (the job's next attempt against the sweeper) are forced with them
// instead of hoped for.
type ApplyHooks struct {
	// Begin is called as an attempt is about to ask to begin the apply; it may block (a
	// test holds a late attempt there until the sweeper has acted).
	Begin func(ctx context.Context, runID string, attempt int)
	// Begun hears how BeginApply answered the attempt: err (run.ErrSkip when the attempt
	// began nothing) and the run's state when BeginApply changed or began it ("" when it
	// left the run alone).
	Begun func(runID string, attempt int, state run.State, err error)
	// Finish is called as the worker of an apply that ran to its end is about to record
	// it; it may block (a test makes a cancel commit first, or after).
	Finish func(ctx context.Context, runID string)
}

// StateReserver takes a workspace's state lock for a run's apply before tofu runs,
// held by the apply's state credential, and returns its fencing token (state.Store).
type StateReserver interface {
	Reserve(ctx context.Context, orgID, workspaceID, runID, credentialID string) (int64, error)
}

func (w *ApplyWorker) Timeout(*river.Job[ApplyArgs]) time.Duration { return w.PhaseTimeout }

// busyRetry is how soon an apply waiting for its workspace tries again.
const busyRetry = 2 * time.Second

func (w *ApplyWorker) Work(ctx context.Context, job *river.Job[ApplyArgs]) error {
	pickedUp := time.Now()
	if err := waitForExecutor(ctx, w.Jobs, w.Runners, job.Args.RunID); err != nil {
		return err
	}
	if w.Hooks.Begin != nil {
		w.Hooks.Begin(ctx, job.Args.RunID, job.Attempt)
	}
	work, err := w.Applies.BeginApply(ctx, job.Args.RunID, w.Leases.claim(job.ID))
	if w.Hooks.Begun != nil {
		w.Hooks.Begun(job.Args.RunID, job.Attempt, work.Run.State, err)
	}
	switch {
	case errors.Is(err, run.ErrWorkspaceBusy):
		return river.JobSnooze(busyRetry)
	case skipped(err):
		return nil
	case err != nil:
		return err
	}
	if w.OnStart != nil {
		w.OnStart(work.Run.ID, pickedUp)
	}
	ctx, release := hold(ctx, w.Jobs, work.Lease, w.Leases, w.Logger)
	defer release()
	rn, err := w.Runners.For(work.Run.Runner)
	if err != nil {
		return ignoreSkip(w.fail(ctx, work.Lease, ApplyResult{}, err.Error()+"; nothing was applied"))
	}
	creds, revoke, err := credentialsFor(ctx, w.Creds, rn, work.Run, work.Lease, w.PhaseTimeout)
	if err != nil {
		return ignoreSkip(w.fail(ctx, work.Lease, ApplyResult{}, err.Error()+"; nothing was applied"))
	}
	defer revoke()
	// The state lock is the apply's before tofu runs (DESIGN §3): a plan of another run,
	// or anything else, cannot lock or write the state between the checks and the apply.
	if w.Locks != nil && creds.StateUsername != "" {
		fence, err := w.Locks.Reserve(ctx, work.Run.OrganizationID, work.Run.WorkspaceID, work.Run.ID, creds.StateUsername)
		if err != nil {
			return ignoreSkip(w.fail(ctx, work.Lease, ApplyResult{}, "the workspace state lock could not be reserved for the apply: "+err.Error()+"; nothing was applied"))
		}
		w.Logger.InfoContext(ctx, "state lock reserved for the apply", "run", work.Run.ID, "fence", fence)
	}
	// From here on the apply has side effects: any failure ends the run (a retry of
	// this job finds it RUNNING and marks it APPLY_INTERRUPTED, never applies again).
	live := liveLogFor(ctx, w.Jobs, w.Logger, work.Run, work.Lease, work.Secrets, creds)
	res, err := rn.Apply(ctx, ApplyRequest{RunID: work.Run.ID, WorkspaceID: work.Run.WorkspaceID,
		Config: work.Config, PlanFile: work.PlanFile, PriorState: work.PriorState, Credentials: creds, Log: live})
	live.Close()
	res.Log = live.Mask(res.Log)
	if stopRequested(ctx) {
		// Cancelled while it applied: tofu was interrupted and stored what it wrote.
		w.Logger.WarnContext(ctx, "the cancelled apply stopped", "run", work.Run.ID, "error", err)
		return persist(context.WithoutCancel(ctx), w.Logger, work.Lease, func(ctx context.Context) error {
			return w.orStopped(ctx, run.ErrSkip, work.Lease, res)
		})
	}
	if err != nil && errors.Is(err, ErrInterrupted) && ctx.Err() == nil {
		// The apply's process was killed from outside (a pod deleted or evicted): whether
		// tofu changed anything is unknown. The lease decides, as for a dead portal:
		// the worker releases it as it returns, and River's next attempt of this job
		// finds the run RUNNING under the job's expired lease and marks it
		// APPLY_INTERRUPTED (BeginApply); it is never applied again.
		w.Logger.WarnContext(ctx, "the apply was interrupted from outside; leaving the run to its lease", "run", work.Run.ID, "error", err)
		return err
	}
	if err != nil {
		// Record the failure even when the job's context ended (timeout, shutdown):
		// otherwise the retry would see RUNNING and lose the log.
		return persist(context.WithoutCancel(ctx), w.Logger, work.Lease, func(ctx context.Context) error {
			return w.fail(ctx, work.Lease, res, "apply failed: "+err.Error())
		})
	}
	if res.State != nil { // else tofu wrote the state through the backend
		if _, _, err = stateHeader(res.State); err != nil {
			return ignoreSkip(w.fail(ctx, work.Lease, ApplyResult{Log: res.Log}, "the apply produced an unreadable state: "+err.Error()))
		}
	}
	// The apply happened: its outcome is recorded even if the job's context ended. A
	// cancel that committed first (the run is APPLY_INTERRUPTED) has it recorded as the
	// stopped apply's.
	return persist(context.WithoutCancel(ctx), w.Logger, work.Lease, func(ctx context.Context) error {
		if w.Hooks.Finish != nil {
			w.Hooks.Finish(ctx, work.Run.ID)
		}
		_, err := w.Applies.FinishApply(ctx, run.ApplyOutcome{Lease: work.Lease, State: res.State, Outputs: res.Outputs, Log: res.Log})
		return w.orStopped(ctx, err, work.Lease, res)
	})
}

// fail ends the apply FAILED with reason or, when the run was cancelled meanwhile,
// records the stopped apply. The record is made even if the job's context ended.
func (w *ApplyWorker) fail(ctx context.Context, l run.Lease, res ApplyResult, reason string) error {
	ctx = context.WithoutCancel(ctx)
	_, err := w.Jobs.FailPhase(ctx, l, res.Log, reason)
	return w.orStopped(ctx, err, l, res)
}

// orStopped follows a finish that err answered: a skip (the run left RUNNING under this
// worker, which only a cancel does while the lease is held) records the stopped apply;
// FinishStopped skips in turn when the run was not cancelled under l.
func (w *ApplyWorker) orStopped(ctx context.Context, err error, l run.Lease, res ApplyResult) error {
	if !errors.Is(err, run.ErrSkip) {
		return err
	}
	_, err = w.Applies.FinishStopped(ctx, run.StoppedApply{Lease: l, State: res.State, Log: res.Log})
	return err
}

// stateHeader reads serial and lineage from a state file.
func stateHeader(state []byte) (int, string, error) {
	var h struct {
		Serial  int    `json:"serial"`
		Lineage string `json:"lineage"`
	}
	if err := json.Unmarshal(state, &h); err != nil {
		return 0, "", err
	}
	if h.Serial < 1 || h.Lineage == "" {
		return 0, "", fmt.Errorf("state has serial %d and lineage %q", h.Serial, h.Lineage)
	}
	return h.Serial, h.Lineage, nil
}

// VerifyWorker runs the refresh-only comparison after an apply.
type VerifyWorker struct {
	river.WorkerDefaults[VerifyArgs]
	phase
	Verifies Verifies
}

func (w *VerifyWorker) Timeout(*river.Job[VerifyArgs]) time.Duration { return w.PhaseTimeout }

func (w *VerifyWorker) Work(ctx context.Context, job *river.Job[VerifyArgs]) error {
	if err := waitForExecutor(ctx, w.Jobs, w.Runners, job.Args.RunID); err != nil {
		return err
	}
	work, err := w.Verifies.BeginVerify(ctx, job.Args.RunID, w.Leases.claim(job.ID))
	if skipped(err) {
		return nil
	}
	if err != nil {
		return err
	}
	o, done, err := w.open(ctx, work.Run, work.Lease, work.Secrets)
	if done {
		return err
	}
	defer o.close()
	ctx, live := o.ctx, o.live
	res, err := o.rn.Verify(ctx, VerifyRequest{RunID: work.Run.ID, WorkspaceID: work.Run.WorkspaceID, Config: work.Config,
		State: work.State, Credentials: o.creds, Variables: work.Variables, Log: live})
	live.Close()
	res.Log = live.Mask(res.Log)
	if err != nil {
		return w.failed(ctx, work.Lease, res.Log, "verification", err)
	}
	// The drift is a plan JSON: stored with the log, it is redacted as a plan is (the
	// sensitive variables' values, and what derives from them), then masked as the log
	// is. One that does not read is stored masked only.
	drift := res.DriftJSON
	if redacted, err := run.RedactPlan(drift); err == nil {
		drift = redacted
	}
	log := append(res.Log, live.Mask(drift)...)
	return persist(ctx, w.Logger, work.Lease, func(ctx context.Context) error {
		_, err := w.Verifies.FinishVerify(ctx, work.Lease, res.Converged, log)
		return err
	})
}

// ExpireWorker ends runs whose decision window or approval validity ran out.
type ExpireWorker struct {
	river.WorkerDefaults[ExpireArgs]
	Runs Deadlines
}

func (w *ExpireWorker) Work(ctx context.Context, job *river.Job[ExpireArgs]) error {
	_, err := w.Runs.ExpireIfDue(ctx, job.Args.RunID, job.Args.State)
	return ignoreSkip(err)
}

// EscalateWorker records that a waiting run's escalation took effect.
type EscalateWorker struct {
	river.WorkerDefaults[EscalateArgs]
	Runs Deadlines
}

func (w *EscalateWorker) Work(ctx context.Context, job *river.Job[EscalateArgs]) error {
	_, err := w.Runs.EscalateIfDue(ctx, job.Args.RunID)
	return ignoreSkip(err)
}
