package run

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"gantry/models/artifact"
	"gantry/models/environment"
	"gantry/models/risk"
	"gantry/models/secret"
	"gantry/policies"
)

// The worker-facing half of the service: each phase begins and finishes in its own
// locked transaction, and a phase that already began or finished is a no-op, so a
// duplicated or rescued job never does the work twice.

// ErrSkip means the job has nothing to do: the run already moved past this phase.
var ErrSkip = errors.New("run already past this phase")

// ErrWorkspaceBusy means another run holds the workspace's apply slot; retry later.
var ErrWorkspaceBusy = errors.New("workspace is applying another run")

// PlanWork is what a plan job needs.
type PlanWork struct {
	Run        Run
	Config     []byte
	PriorState []byte // nil when the workspace has no state yet
	Restarted  bool   // an earlier attempt died while planning; planning again is safe
	// Lease is the worker's hold on the run while it plans: renew it, and name it in
	// FinishPlan or FailPhase.
	Lease Lease
	// Secrets are the values of the run's sensitive inputs: its live log masks them.
	Secrets []string
	// Variables are the same values as the runner hands them to OpenTofu
	// (TF_VAR_<name>; variables.go).
	Variables secret.Variables
}

// ExecutorOf names the executor run runID was requested on (every phase uses it): a
// worker asks before beginning a phase, so a job whose executor is still being prepared
// waits without changing the run.
func (s *Jobs) ExecutorOf(ctx context.Context, runID string) (string, error) {
	r, err := s.k.store.get(ctx, "", runID)
	if err != nil {
		return "", err
	}
	return r.Runner, nil
}

// BeginPlan moves a queued run into PLANNING under a lease for claim and returns its
// config and the state it is planned against. A run found in PLANNING without a live
// lease of another job was left there by a worker that died: planning has no side
// effects, so it is planned again.
func (s *Plans) BeginPlan(ctx context.Context, runID string, claim Claim) (PlanWork, error) {
	var work PlanWork
	r, err := s.k.update(ctx, "", runID, nil, func(ctx context.Context, r *Run, _ time.Time) error {
		switch r.State {
		case Queued:
			if err := r.transition(Planning, ""); err != nil {
				return err
			}
			l, _, err := s.jobs.leaseFor(ctx, *r, JobPlan, claim)
			if err != nil {
				return err
			}
			work.Lease = l
		case Planning:
			l, _, err := s.jobs.leaseFor(ctx, *r, JobPlan, claim)
			if err != nil {
				return err
			}
			work.Lease = l
			// The earlier attempt's job may have died holding the state lock: fence it
			// (release the lock, revoke its credentials) before planning again.
			if err := s.jobs.fence(ctx, *r, "the worker planning this run stopped; planning again"); err != nil {
				return err
			}
			work.Restarted = true
		default:
			return ErrSkip
		}
		r.PlanRevision++
		prior, err := s.k.states.Predecessor(ctx, r.OrganizationID, r.WorkspaceID)
		if err != nil {
			return err
		}
		r.setPredecessor(prior)
		if r.Kind.RefreshOnly() {
			if err := s.beginRefreshOnly(ctx, r, prior); err != nil || r.State != Planning {
				return err
			}
		}
		in, err := s.jobs.phaseInputs(ctx, *r, r.PriorStateVersionID)
		work.Config, work.PriorState, work.Variables, work.Secrets = in.config, in.state, in.vars, in.secrets
		return err
	})
	if err != nil {
		return PlanWork{}, err
	}
	if r.State != Planning {
		return PlanWork{Run: r}, ErrSkip
	}
	work.Run = r
	return work, nil
}

// beginRefreshOnly checks, as a drift check or codification starts planning, that the
// state it compares the world with is still the one written by the run whose
// configuration it carries (else it is STALE: a newer apply changed what is expected);
// a drift check then holds the workspace's apply slot while it plans, so it never
// overlaps an apply (ErrWorkspaceBusy: try again later).
func (s *Plans) beginRefreshOnly(ctx context.Context, r *Run, prior Predecessor) error {
	writer := ""
	if !prior.None() {
		v, err := s.k.states.VersionInfo(ctx, r.OrganizationID, prior.VersionID)
		if err != nil {
			return err
		}
		writer = v.RunID
	}
	if r.SourceRunID == nil || writer != *r.SourceRunID {
		return r.end(Stale, EndStateMoved, fmt.Sprintf("the workspace state moved to %s since this %s was asked for; ask again", prior, map[bool]string{true: "drift check", false: "codification"}[r.Kind == KindDrift]))
	}
	if r.Kind == KindDrift {
		return s.jobs.takeSlot(ctx, *r)
	}
	return nil
}

// setPredecessor records the state version the plan is computed from.
func (r *Run) setPredecessor(p Predecessor) {
	r.PriorStateVersionID, r.PriorSerial, r.PriorLineage, r.PriorStateDigest = nil, 0, "", ""
	if !p.None() {
		id := p.VersionID
		r.PriorStateVersionID, r.PriorSerial, r.PriorLineage, r.PriorStateDigest = &id, p.Serial, p.Lineage, p.Digest
	}
}

// PlanOutcome is what the runner produced.
type PlanOutcome struct {
	Lease      Lease // the plan's lease: nothing is recorded once it is lost
	Revision   int
	PlanFile   []byte
	PlanJSON   []byte
	Log        []byte
	HasChanges bool
	// Drift is what a refresh-only plan found drifted, with the cloud's record of who
	// changed each resource (drift checks; DriftOf reads it from PlanJSON).
	Drift []Observed
}

// FinishPlan stores the plan's artifacts, runs the plan gates (risk, policy, cost) and
// moves the run to the plan's outcome: a dry run ends PLANNED and a plan without
// changes NO_CHANGES (both with their findings visible, never gated); a hard-mandatory
// policy failure blocks the run for good and a soft-mandatory one until an admin
// overrides it; otherwise the approval matrix decides between a self-service approval
// and a person's. Only the attempt that still owns the plan revision records anything.
func (s *Plans) FinishPlan(ctx context.Context, out PlanOutcome) (Run, error) {
	runID := out.Lease.RunID
	current, err := s.k.store.get(ctx, "", runID)
	if err != nil {
		return Run{}, err
	}
	if current.State != Planning || current.PlanRevision != out.Revision {
		return Run{}, ErrSkip
	}
	// The plan JSON is stored, shown and judged redacted: OpenTofu writes sensitive
	// values into it in clear (a sensitive root variable's value, and every value
	// derived from one beside its marker). The gates run on the redacted plan too:
	// classification, risk and cost read actions, addresses and types, never a secret,
	// and a policy must not need one (its input masks them anyway, policies.parsePlan).
	// A drift check's attribution read the plan before (runner.observe), for which
	// attributes changed, and keeps only their names.
	planJSON, err := RedactPlan(out.PlanJSON)
	if err != nil {
		return s.jobs.FailPhase(ctx, out.Lease, out.Log, "the plan JSON could not be redacted: "+err.Error())
	}
	out.PlanJSON = planJSON
	// A drift check is never gated: what it found is attributed instead (finishDrift).
	var a Assessment
	if current.Kind != KindDrift {
		a, err = s.jobs.assessPlan(ctx, current, out.PlanJSON)
	}
	if err != nil {
		if ctx.Err() != nil {
			return Run{}, err // the job is stopping; a retry plans again
		}
		// The gates fail the same way on every retry (a template gone from the catalog,
		// an org bundle that does not compile, a policy that runs out of time): end the
		// run with the reason instead of leaving it in PLANNING.
		return s.jobs.FailPhase(ctx, out.Lease, out.Log, "the plan gates could not run: "+err.Error())
	}
	return s.k.update(ctx, "", runID, nil, func(ctx context.Context, r *Run, now time.Time) error {
		if r.State != Planning || r.PlanRevision != out.Revision {
			return ErrSkip
		}
		if err := s.k.leases.holds(ctx, out.Lease); err != nil {
			return err
		}
		files := []struct {
			kind artifact.Kind
			data []byte
			id   **string
		}{{artifact.PlanFile, out.PlanFile, &r.PlanArtifactID}, {artifact.PlanJSON, out.PlanJSON, &r.PlanJSONArtifactID}, {artifact.PlanLog, out.Log, &r.PlanLogArtifactID}}
		for _, f := range files {
			a, err := s.k.artifacts.Put(ctx, r.OrganizationID, r.WorkspaceID, f.kind, f.data)
			if err != nil {
				return err
			}
			*f.id = &a.ID
			if f.kind == artifact.PlanFile {
				r.PlanDigest = a.SHA256
			}
		}
		if r.Kind == KindDrift {
			return s.finishDrift(ctx, r, out)
		}
		// The summary comes from the gates' classification: the plan is read once.
		r.PlanSummary = summaryOf(a.Classification.Counts)
		if err := s.record(ctx, r, a); err != nil {
			return err
		}
		// A state written while the run was planning (a state write marks only waiting
		// runs) leaves this plan computed against an old target.
		if r.Kind.Applies() && out.HasChanges {
			// Held until this commits: a write waits, then finds this run waiting and
			// marks it STALE; or it came first, and the comparison below sees it.
			if err := s.k.states.HoldSteady(ctx, r.OrganizationID, r.WorkspaceID); err != nil {
				return err
			}
			current, err := s.k.states.Predecessor(ctx, r.OrganizationID, r.WorkspaceID)
			if err != nil {
				return err
			}
			if mine := EvidenceOf(*r).Predecessor; current != mine {
				return r.end(Stale, EndStateMoved, fmt.Sprintf("the workspace state moved to %s while this run was planning against %s; plan again", current, mine))
			}
			if why, err := s.k.windowRefusal(ctx, *r); err != nil || why != "" {
				return errors.Join(err, r.end(Stale, EndWindowOpened, why+"; plan again after it"))
			}
		}
		env, err := s.k.environments.Lookup(ctx, r.OrganizationID, r.EnvironmentID)
		if err != nil {
			return err
		}
		switch {
		case r.Kind == KindPlanOnly:
			return r.FinishPlanAs(Planned, EndPlanOnly, "dry run: planned, never applied"+policyNote(a))
		case !out.HasChanges:
			return r.FinishPlanAs(NoChanges, EndNoChanges, "the plan has no changes; nothing to apply")
		}
		if hard := failedRules(a.Policy, policies.HardMandatory); len(hard) > 0 {
			return r.FinishPlanAs(PolicyBlocked, EndPolicyHardBlocked, "blocked by hard-mandatory policy "+strings.Join(hard, ", ")+"; it cannot be overridden: change the request")
		}
		if soft := failedRules(a.Policy, policies.SoftMandatory); len(soft) > 0 {
			// The override and the approval after it share one decision window.
			r.waitFor(decisionWindow(env), now)
			return r.FinishPlanAs(PolicyBlocked, "", "blocked by soft-mandatory policy "+strings.Join(soft, ", ")+" until an admin overrides it with a reason")
		}
		return route(r, env, now, a.Risk.Reason+policyNote(a))
	})
}

// assessPlan runs the plan gates on the plan a run's gates judge (gatedPlan).
func (s *Jobs) assessPlan(ctx context.Context, r Run, planJSON []byte) (Assessment, error) {
	gated, err := gatedPlan(r, planJSON)
	if err != nil {
		return Assessment{}, err
	}
	return s.assess(ctx, r, gated)
}

// finishDrift records what drift check r found: each drifted resource attributed to
// the break-glass window of the workspace that changed it (by the cloud's record of
// who changed it after the state was written) or to nobody. Clean ends NO_CHANGES,
// drift PLANNED; the workspace's windows awaiting codification hear of it.
func (s *Plans) finishDrift(ctx context.Context, r *Run, out PlanOutcome) error {
	d := Drift{Serial: r.PriorSerial}
	status := DriftClean
	if out.HasChanges && len(out.Drift) > 0 {
		var since time.Time
		if r.PriorStateVersionID != nil {
			v, err := s.k.states.VersionInfo(ctx, r.OrganizationID, *r.PriorStateVersionID)
			if err != nil {
				return err
			}
			since = v.CreatedAt
		}
		var ids []string
		for _, o := range out.Drift {
			for _, c := range o.Changes {
				if c.Window != "" {
					ids = append(ids, c.Window)
				}
			}
		}
		windows, err := s.k.windows.Named(ctx, r.OrganizationID, r.WorkspaceID, ids)
		if err != nil {
			return err
		}
		d.Resources, status = attribute(out.Drift, since, windows)
	}
	r.Drift, r.DriftStatus = &d, status
	to, code := Planned, EndDriftFound
	if status == DriftClean {
		to, code = NoChanges, EndNoChanges
	}
	if err := r.FinishPlanAs(to, code, DriftSummary(d, status)); err != nil {
		return err
	}
	r.moves.Annotate(map[string]any{"drift_status": status, "drift": d})
	return s.k.windows.DriftChecked(ctx, DriftCheck{RunID: r.ID, Label: r.Label(), OrganizationID: r.OrganizationID,
		WorkspaceID: r.WorkspaceID, SourceRunID: r.SourceRunID, Status: status})
}

// route sends a planned run that passed its policies to the decision its risk needs:
// the system's self-service approval, or a person's within its environment's decision
// window (the window in force when the run starts waiting: a later edit of the window
// does not move its deadline; the expiry job is scheduled from it, see jobsFor).
func route(r *Run, env environment.Environment, now time.Time, reason string) error {
	codifyFloor(r)
	if risk.Approver(r.RequiredApprover) == risk.ApproverSystem {
		return r.SelfServiceApprove(reason, now)
	}
	r.waitFor(decisionWindow(env), now)
	return r.FinishPlanAs(PendingApproval, "", reason)
}

// decisionWindow is how long a run of env may wait for a person's decision;
// DefaultDecisionWindow if the row somehow has none (the column is NOT NULL, 1 to 720).
func decisionWindow(env environment.Environment) time.Duration {
	if env.DecisionWindowHours <= 0 {
		return DefaultDecisionWindow
	}
	return env.DecisionWindow()
}

// policyNote mentions advisory findings in a run's reason: they annotate, never gate.
func policyNote(a Assessment) string {
	if adv := failedRules(a.Policy, policies.Advisory); len(adv) > 0 {
		return "; advisory: " + strings.Join(adv, ", ")
	}
	return ""
}

// FailPhase ends a run whose phase (held under lease l) failed, keeping the runner's
// log as evidence.
func (s *Jobs) FailPhase(ctx context.Context, l Lease, log []byte, reason string) (Run, error) {
	phase := l.Phase
	return s.k.update(ctx, "", l.RunID, nil, func(ctx context.Context, r *Run, _ time.Time) error {
		if want, ok := phaseState[phase]; !ok || r.State != want {
			return ErrSkip
		}
		if err := s.k.leases.holds(ctx, l); err != nil {
			return err
		}
		// A failed phase may have left its state lock behind (tofu killed mid-run):
		// fence it, so that job can never write again and the next run can lock.
		if err := s.fence(ctx, *r, reason); err != nil {
			return err
		}
		if len(log) > 0 {
			kind := map[JobKind]artifact.Kind{JobPlan: artifact.PlanLog, JobApply: artifact.ApplyLog, JobVerify: artifact.VerifyLog}[phase]
			a, err := s.k.artifacts.Put(ctx, r.OrganizationID, r.WorkspaceID, kind, log)
			if err != nil {
				return err
			}
			switch phase {
			case JobPlan:
				r.PlanLogArtifactID = &a.ID
			case JobApply:
				r.ApplyLogArtifactID = &a.ID
			case JobVerify:
				r.VerifyLogArtifactID = &a.ID
			}
		}
		// A failed apply that wrote state versions is attested too: what it wrote is
		// the workspace's state now.
		if phase == JobApply {
			if err := s.k.attest(ctx, *r, "failed: "+reason); err != nil {
				return fmt.Errorf("attesting the failed apply: %w", err)
			}
		}
		return r.end(Failed, failedIn(phase), reason)
	})
}
