package run

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"gantry/models/authz"
	"gantry/models/errs"
)

// Drift checks, corrections and codifications: runs made from the configuration that
// wrote a workspace's current state (its stored config bundle), so that what is
// compared with the world is what was applied to it.

// stateWriter is the run that wrote workspaceID's current state: what a drift check
// compares the world with and a codification or correction starts from. A workspace
// without state, with a version no run wrote or with only a destroy's empty state has
// nothing to compare (a refusal in words).
func (s *DriftChecks) stateWriter(ctx context.Context, orgID, workspaceID string) (Run, StateVersionInfo, error) {
	name, err := s.k.workspaces.NameOf(ctx, orgID, workspaceID)
	if err != nil {
		return Run{}, StateVersionInfo{}, err
	}
	current, err := s.k.states.Predecessor(ctx, orgID, workspaceID)
	if err != nil {
		return Run{}, StateVersionInfo{}, err
	}
	if current.None() {
		return Run{}, StateVersionInfo{}, errs.Explain(errs.ErrConflict, fmt.Sprintf("Workspace %s has no state yet: there are no live resources to compare with it.", name))
	}
	v, err := s.k.states.VersionInfo(ctx, orgID, current.VersionID)
	if err != nil {
		return Run{}, StateVersionInfo{}, err
	}
	if v.RunID == "" {
		return Run{}, v, errs.Explain(errs.ErrConflict, fmt.Sprintf("State version %d of %s was not written by a run, so there is no configuration to compare the live resources with.", v.Serial, name))
	}
	w, err := s.k.store.get(ctx, orgID, v.RunID)
	if err != nil {
		return Run{}, v, err
	}
	if w.Kind == KindDestroy {
		return w, v, errs.Explain(errs.ErrConflict, fmt.Sprintf("Workspace %s was destroyed by run %s: nothing is left to compare.", name, w.Label()))
	}
	if _, offered := s.k.runners.pick(w.Runner); !offered {
		return w, v, errs.Explain(errs.ErrConflict, fmt.Sprintf("The state of %s was written on the %s executor, which this Gantry does not offer.", name, w.Runner))
	}
	return w, v, nil
}

// fromWriter is a run of kind k queued from the configuration of writer, the run that
// wrote the workspace's current state.
func fromWriter(k Kind, writer Run, v StateVersionInfo) queued {
	return queued{workspaceID: writer.WorkspaceID, environmentID: writer.EnvironmentID, kind: k, template: writer.TemplateName,
		version: writer.TemplateVersion, moduleDigest: writer.ModuleDigest, inputs: writer.Inputs,
		runner: RunnerInfo{Name: writer.Runner, Simulated: writer.Simulated}, configArtifactID: writer.ConfigArtifactID,
		configDigest: writer.ConfigDigest, writer: &writer, writerSerial: v.Serial}
}

// What the drift controls need of a person's rights. The services require them and the
// pages show "Check drift now" and "Plan to correct" from MayCheckDrift and
// MayPlanToCorrect: checking changes nothing, so planning rights do; correcting (and
// codifying a window) changes what is applied.
const (
	permCheckDrift = authz.PermProvisioningPlan
	permFromState  = authz.PermRunsApply
)

// MayCheckDrift reports whether s holds what CheckDrift requires.
func MayCheckDrift(s authz.Subject) bool { return s.Can(permCheckDrift) }

// MayPlanToCorrect reports whether s holds what PlanToCorrect requires.
func MayPlanToCorrect(s authz.Subject) bool { return s.Can(permFromState) }

// CheckDrift queues a drift check of workspaceID for the person asking: it needs what a
// dry run needs (provisioning.plan, a grant in a restricted environment, cloud.live for
// a live executor). A check already queued or planning is returned instead of a second.
func (s *DriftChecks) CheckDrift(ctx context.Context, workspaceID string) (Run, error) {
	subject, err := authz.Require(ctx, permCheckDrift)
	if err != nil {
		return Run{}, err
	}
	var out Run
	err = s.k.inTx(ctx, func(ctx context.Context) error {
		writer, v, err := s.visibleWriter(ctx, subject, workspaceID)
		if err != nil {
			return err
		}
		out, err = s.queueDriftCheck(ctx, subject, writer, v, nil)
		return err
	})
	return out, err
}

// visibleWriter is stateWriter for a person: the workspace must be one they may see
// (else not found), and they must be allowed to request runs in its environment.
func (s *DriftChecks) visibleWriter(ctx context.Context, subject authz.Subject, workspaceID string) (Run, StateVersionInfo, error) {
	ws, err := s.k.workspaces.Get(ctx, subject.OrganizationID, workspaceID)
	if err != nil {
		return Run{}, StateVersionInfo{}, err
	}
	if err := s.k.environments.CheckVisible(ctx, subject, ws.EnvironmentID); err != nil {
		return Run{}, StateVersionInfo{}, fmt.Errorf("workspace %s: %w", workspaceID, errs.ErrNotFound)
	}
	writer, v, err := s.stateWriter(ctx, subject.OrganizationID, workspaceID)
	if err != nil {
		return Run{}, StateVersionInfo{}, err
	}
	env, err := s.k.environments.Lookup(ctx, subject.OrganizationID, ws.EnvironmentID)
	if err != nil {
		return Run{}, StateVersionInfo{}, err
	}
	a, err := s.k.actorFor(ctx, subject, env)
	if err != nil {
		return Run{}, StateVersionInfo{}, err
	}
	refusals := &errs.Validation{}
	mayRequest(a, env, RunnerInfo{Name: writer.Runner, Simulated: writer.Simulated}, refusals)
	if msg, bad := refusals.Fields["environment"]; bad {
		return Run{}, StateVersionInfo{}, errs.Explain(errs.ErrForbidden, msg)
	}
	return writer, v, nil
}

// queueDriftCheck queues a drift check of writer's workspace (for window, when a
// break-glass window's end or codification asks for it), unless one of the same state
// is already queued or planning: that one answers for both.
func (s *DriftChecks) queueDriftCheck(ctx context.Context, subject authz.Subject, writer Run, v StateVersionInfo, window *string) (Run, error) {
	inFlight, err := s.k.store.list(ctx, listQuery{orgID: writer.OrganizationID, workspaceID: writer.WorkspaceID, kinds: []Kind{KindDrift},
		states: []State{Queued, Planning}, order: "number DESC", limit: 1})
	if err != nil {
		return Run{}, err
	}
	// One checking the same state answers for both; one of an older state goes STALE.
	if len(inFlight) > 0 && inFlight[0].SourceRunID != nil && *inFlight[0].SourceRunID == writer.ID {
		return inFlight[0], nil
	}
	q := fromWriter(KindDrift, writer, v)
	q.window = window
	return s.k.queue(ctx, subject, q)
}

// DriftCheckFor queues the drift check a break-glass window's end asks for (the system
// acting; nothing to check is ErrSkip). It joins the caller's transaction.
func (s *DriftChecks) DriftCheckFor(ctx context.Context, orgID, workspaceID, windowID string) (Run, error) {
	var out Run
	err := s.k.inTx(ctx, func(ctx context.Context) error {
		writer, v, err := s.stateWriter(ctx, orgID, workspaceID)
		if err != nil {
			if errs.CodeOf(err) == errs.CodeConflict {
				return ErrSkip
			}
			return err
		}
		system := authz.System(orgID)
		system.Name = "Gantry (end of break-glass window " + windowID + ")"
		out, err = s.queueDriftCheck(ctx, system, writer, v, &windowID)
		return err
	})
	return out, err
}

// ScheduledDriftCheck queues the scheduled drift check of workspaceID if it is still
// due by the database clock (interval since its last check, or since its state was
// written) and no break-glass window is open on it; ErrSkip otherwise. Replicas and a
// second job for the same slot find it already done.
func (s *DriftChecks) ScheduledDriftCheck(ctx context.Context, orgID, workspaceID string, interval time.Duration) (Run, error) {
	var out Run
	err := s.k.inTx(ctx, func(ctx context.Context) error {
		// One scheduler at a time per workspace: the lock orders two jobs for it.
		if _, err := s.k.workspaces.LockSlot(ctx, workspaceID); err != nil {
			return err
		}
		now, err := s.k.now(ctx)
		if err != nil {
			return err
		}
		due, err := s.k.store.driftDue(ctx, workspaceID, now.Add(-interval))
		if err != nil || !due {
			return errors.Join(err, ErrSkip)
		}
		if open, err := s.k.windows.OpenOn(ctx, orgID, workspaceID); err != nil || open != nil {
			return errors.Join(err, ErrSkip) // the window's own check follows it
		}
		writer, v, err := s.stateWriter(ctx, orgID, workspaceID)
		if errs.CodeOf(err) == errs.CodeConflict {
			return ErrSkip
		}
		if err != nil {
			return err
		}
		system := authz.System(orgID)
		system.Name = "Gantry (drift schedule)"
		out, err = s.queueDriftCheck(ctx, system, writer, v, nil)
		return err
	})
	return out, err
}

// DueCheck is a workspace whose scheduled drift check is due, with its environment's
// interval.
type DueCheck struct {
	OrganizationID, WorkspaceID string
	Interval                    time.Duration
}

// DriftDue lists, across organizations, the workspaces whose scheduled drift check is
// due by the database clock (their environment's interval since their last check and
// since their state was written): the scheduler's read.
func (s *DriftChecks) DriftDue(ctx context.Context) ([]DueCheck, error) {
	schedules, err := s.k.environments.DriftSchedules(ctx)
	if err != nil {
		return nil, err
	}
	now, err := s.k.now(ctx)
	if err != nil {
		return nil, err
	}
	var out []DueCheck
	for _, sc := range schedules {
		ids, err := s.k.store.driftDueIn(ctx, sc.EnvironmentID, now.Add(-sc.Interval))
		if err != nil {
			return nil, err
		}
		for _, id := range ids {
			out = append(out, DueCheck{OrganizationID: sc.OrganizationID, WorkspaceID: id, Interval: sc.Interval})
		}
	}
	return out, nil
}

// PlanToCorrect queues a run that brings drifted resources back to what workspaceID's
// state says: a normal run (planned with refresh, through every gate) of the
// configuration that wrote that state. It is the person's own new intent.
func (s *DriftChecks) PlanToCorrect(ctx context.Context, workspaceID string) (Run, error) {
	return s.fromState(ctx, workspaceID, KindApply, func(q *queued) { q.correct = true })
}

// Codify queues the codification of break-glass window windowID on workspaceID for the
// subject in ctx (the breakglass service checked the window awaits codification): a
// refresh-only plan of the configuration that wrote the state, gated like any change,
// decided by someone other than who made the change by hand (madeBy).
func (s *DriftChecks) Codify(ctx context.Context, workspaceID, windowID, madeBy string) (Run, error) {
	return s.fromState(ctx, workspaceID, KindCodify, func(q *queued) { q.window, q.madeBy = &windowID, madeBy })
}

// fromState queues, for the person in ctx, a run of kind k from the configuration that
// wrote workspaceID's state (set by set), refused when the catalog can no longer judge
// its plan.
func (s *DriftChecks) fromState(ctx context.Context, workspaceID string, k Kind, set func(q *queued)) (Run, error) {
	// Both change what is applied (a correction the world, a codification the state).
	subject, err := authz.Require(ctx, permFromState)
	if err != nil {
		return Run{}, err
	}
	var out Run
	err = s.k.inTx(ctx, func(ctx context.Context) error {
		writer, v, err := s.visibleWriter(ctx, subject, workspaceID)
		if err != nil {
			return err
		}
		if err := s.catalogStillOffers(writer); err != nil {
			return err
		}
		q := fromWriter(k, writer, v)
		set(&q)
		out, err = s.k.queue(ctx, subject, q)
		return err
	})
	return out, err
}

// catalogStillOffers refuses a run from writer's configuration when the gates could not
// judge its plan: the catalog no longer offers its template.
func (s *DriftChecks) catalogStillOffers(writer Run) error {
	if _, err := s.k.catalog.Facts(writer.TemplateName); err != nil {
		return errs.Explain(errs.ErrConflict, fmt.Sprintf("The catalog no longer offers template %s, so a plan of run %s's configuration cannot be assessed.", writer.TemplateName, writer.Label()))
	}
	return nil
}

// WindowOpened stops what a break-glass window opening on workspaceID stops (DESIGN
// §9): runs waiting for a decision go STALE and approved runs not yet applying EXPIRED,
// each saying why; while a run applies, the window cannot open (CONFLICT). It joins the
// caller's transaction and locks the runs before the workspace (update's lock order).
func (s *DriftChecks) WindowOpened(ctx context.Context, orgID, workspaceID, windowID string) error {
	return s.k.inTx(ctx, func(ctx context.Context) error {
		ids, err := s.k.store.waitingIn(ctx, workspaceID)
		if err != nil {
			return err
		}
		if err := s.k.store.lockRuns(ctx, ids); err != nil {
			return err
		}
		holder, err := s.k.workspaces.LockSlot(ctx, workspaceID)
		if err != nil {
			return err
		}
		if holder != "" {
			h, err := s.k.store.get(ctx, orgID, holder)
			if err != nil {
				return err
			}
			return errs.Explain(errs.ErrConflict, fmt.Sprintf("Run %s is %s on this workspace: the window opens once it has finished.", h.Label(), map[bool]string{true: "checking drift", false: "applying"}[h.Kind == KindDrift]))
		}
		why := "break-glass window " + windowID + " opened on this workspace"
		for _, id := range ids {
			_, err := s.k.update(ctx, orgID, id, nil, func(ctx context.Context, r *Run, _ time.Time) error {
				switch {
				case r.State == Approved:
					return r.end(Expired, EndWindowOpened, why+" before the apply started; no pipeline run applies while it is open: plan again after it")
				case r.Waiting():
					return r.end(Stale, EndWindowOpened, why+"; no pipeline run is approved while it is open, and its plan may not match the world after the manual change: plan again after it")
				}
				return ErrSkip
			})
			if err != nil && !errors.Is(err, ErrSkip) {
				return err
			}
		}
		return nil
	})
}

// windowRefusal is why a pipeline run of r's workspace may not be approved, applied or
// routed to a decision now: the break-glass window open on it ("" when none is).
func (s *core) windowRefusal(ctx context.Context, r Run) (string, error) {
	w, err := s.windows.OpenOn(ctx, r.OrganizationID, r.WorkspaceID)
	if err != nil || w == nil {
		return "", err
	}
	return openWindowReason(*w), nil
}

// openWindowReason says why nothing applies while window w is open.
func openWindowReason(w WindowInfo) string {
	until := ""
	if w.EndsAt != nil {
		until = " until " + w.EndsAt.UTC().Format("2006-01-02 15:04 UTC")
	}
	return fmt.Sprintf("break-glass window %s is open on this workspace%s: no pipeline run is approved or applied while it is", w.ID, until)
}

// capitalize is s with its first letter upper-case (s is ASCII at its start).
func capitalize(s string) string {
	if s == "" {
		return s
	}
	return strings.ToUpper(s[:1]) + s[1:]
}
