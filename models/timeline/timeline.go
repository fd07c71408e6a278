// Package timeline tells a run's story as the gates of DESIGN §2's sequence (request,
// validation, plan, policy, cost, decision, apply, state, verification), each with how
// far it got, when, by whom and why, from the run, its audit events and its plan gates
// (run.Reads.Gates). It is a read model outside the run lifecycle: it reads a run and
// decides nothing.
package timeline

import (
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"gantry/models/audit"
	"gantry/models/bundle"
	"gantry/models/review"
	"gantry/models/run"
	"gantry/models/runport"
	"gantry/policies"
)

// StageStatus is how far one gate of the sequence got.
type StageStatus string

const (
	StageDone    StageStatus = "done"
	StageCurrent StageStatus = "current"
	// StageWaiting: a later step of a run that is still moving.
	StageWaiting StageStatus = "waiting"
	// StageNotReached: a step a run that has ended never got to.
	StageNotReached StageStatus = "not-reached"
	// StageSkipped: a step that does not apply to this run (a dry run's apply).
	StageSkipped StageStatus = "skipped"
	StageFailed  StageStatus = "failed"
	// How a decision ended when it was not an approval: each named as what it was.
	StageBlocked   StageStatus = "blocked"
	StageRejected  StageStatus = "rejected"
	StageCancelled StageStatus = "cancelled"
	StageExpired   StageStatus = "expired"
	StageStale     StageStatus = "stale"
)

// Label is the status as a person reads it.
func (s StageStatus) Label() string { return strings.ReplaceAll(string(s), "-", " ") }

// Stage is one gate of DESIGN §2's sequence as a run went through it.
type Stage struct {
	Name   string
	Status StageStatus
	At     *time.Time
	Actor  string
	Detail string
	// Review: the plan review page says more (policy results, cost lines).
	Review bool
	// Mark flags the step for an auditor: a decision the run's own requester made
	// (runport.SelfApproved); "" for any other.
	Mark string
}

// transition is one recorded move of the run.
type transition struct {
	event    audit.Event
	from, to run.State
	reason   string
}

// movesOf reads the run's moves from its audit events, oldest first.
func movesOf(events []audit.Event) []transition {
	var out []transition
	for _, ev := range events {
		var d struct {
			From   run.State `json:"from"`
			To     run.State `json:"to"`
			Reason string    `json:"reason"`
		}
		if ev.Action == "run.queued" {
			d.To = run.Queued
		} else if err := json.Unmarshal(ev.Data, &d); err != nil || d.To == "" {
			continue
		}
		out = append(out, transition{event: ev, from: d.From, to: d.To, reason: d.Reason})
	}
	return out
}

// into finds the first move into one of states.
func into(moves []transition, states ...run.State) *audit.Event {
	if m := moveInto(moves, states...); m != nil {
		return &m.event
	}
	return nil
}

func moveInto(moves []transition, states ...run.State) *transition {
	for i := range moves {
		for _, s := range states {
			if moves[i].to == s {
				return &moves[i]
			}
		}
	}
	return nil
}

func stageFrom(name string, ev *audit.Event, status StageStatus, detail string) Stage {
	st := Stage{Name: name, Status: status, Detail: detail}
	if ev != nil {
		at := ev.OccurredAt
		st.At, st.Actor = &at, ev.ActorName
	}
	return st
}

// Of derives the gate timeline from the run, its audit events and its plan
// gates: what is shown is what was recorded, never inferred from the clock. A step a
// finished run never reached says so; only a run still moving has steps WAITING.
func Of(r run.Run, events []audit.Event, g run.Gates) []Stage {
	moves := movesOf(events)
	t := timeline{r: r, moves: moves, later: StageWaiting}
	if r.Finished() {
		t.later = StageNotReached
	}
	queued := into(moves, run.Queued)
	stages := []Stage{
		stageFrom("Request", queued, StageDone, fmt.Sprintf("%s of %s %s", r.Kind.Words(), r.TemplateName, r.TemplateVersion)),
		stageFrom("Template and inputs validated, configuration generated", queued, StageDone, "config bundle "+bundle.Short(r.ConfigDigest)),
		t.plan(),
		t.policy(g),
		t.cost(),
		t.decision(),
	}
	return append(stages, t.apply()...)
}

type timeline struct {
	r     run.Run
	moves []transition
	later StageStatus // for a step not reached yet
}

// planned reports whether the plan's artifacts and gates were recorded.
func (t timeline) planned() bool { return t.r.PlanDigest != "" }

func (t timeline) plan() Stage {
	const name = "Plan"
	r := t.r
	switch {
	case t.planned():
		// The plan ends with the run's first move out of PLANNING.
		var end *audit.Event
		for i := range t.moves {
			if t.moves[i].from == run.Planning && t.moves[i].to != run.Planning {
				end = &t.moves[i].event
			}
		}
		if r.Kind == run.KindDrift && r.Drift != nil {
			return stageFrom(name, end, StageDone, fmt.Sprintf("refresh-only plan %s: %s", bundle.Short(r.PlanDigest), run.DriftSummary(*r.Drift, r.DriftStatus)))
		}
		return stageFrom(name, end, StageDone, fmt.Sprintf("plan %s: %d to add, %d to change, %d to replace, %d to destroy",
			bundle.Short(r.PlanDigest), r.PlanSummary.Create, r.PlanSummary.Update, r.PlanSummary.Replace, r.PlanSummary.Delete))
	case r.State == run.Planning:
		return stageFrom(name, into(t.moves, run.Planning), StageCurrent, "")
	case r.State == run.Failed:
		return stageFrom(name, into(t.moves, run.Failed), StageFailed, r.StateReason)
	case r.State == run.Cancelled:
		return stageFrom(name, into(t.moves, run.Cancelled), StageCancelled, "cancelled before the plan finished")
	}
	return Stage{Name: name, Status: t.later}
}

func (t timeline) policy(g run.Gates) Stage {
	const name = "Policy decision"
	r := t.r
	ev := g.Evaluation
	if ev == nil {
		if r.Kind == run.KindDrift {
			return Stage{Name: name, Status: StageSkipped, Detail: "a drift check is not gated: what it finds is attributed instead"}
		}
		if t.planned() {
			return Stage{Name: name, Status: StageSkipped, Detail: "no policy evaluation was recorded for this plan"}
		}
		return Stage{Name: name, Status: t.later}
	}
	at := ev.CreatedAt
	st := Stage{Name: name, At: &at, Review: true}
	var passed, advisory, soft, hard []string
	for _, res := range ev.Results {
		switch {
		case res.Passed:
			passed = append(passed, res.RuleID)
		case res.Enforcement == policies.Advisory:
			advisory = append(advisory, res.RuleID)
		case res.Enforcement == policies.SoftMandatory:
			soft = append(soft, res.RuleID)
		default:
			hard = append(hard, res.RuleID)
		}
	}
	counts := fmt.Sprintf("%d of %d rules passed", len(passed), len(ev.Results))
	if len(ev.Results) == 1 {
		counts = fmt.Sprintf("%d of 1 rule passed", len(passed))
	}
	if len(advisory) > 0 {
		counts += fmt.Sprintf("; advisory findings: %s", strings.Join(advisory, ", "))
	}
	switch {
	case len(hard) > 0:
		st.Status, st.Detail = StageBlocked, counts+"; blocked for good by hard-mandatory "+strings.Join(hard, ", ")
	case len(soft) > 0:
		var open []string
		for _, id := range soft {
			if _, ok := g.Overrides[id]; !ok {
				open = append(open, id)
			}
		}
		switch {
		case len(open) == 0:
			st.Status, st.Detail = StageDone, counts+"; soft-mandatory "+strings.Join(soft, ", ")+" overridden by an admin with a reason"
		case r.State == run.PolicyBlocked:
			st.Status, st.Detail = StageCurrent, counts+"; soft-mandatory "+strings.Join(open, ", ")+" failed: waiting for an admin's override"
		default:
			st.Status, st.Detail = StageBlocked, counts+"; soft-mandatory "+strings.Join(open, ", ")+" failed and was never overridden"
		}
	default:
		st.Status, st.Detail = StageDone, counts
	}
	return st
}

func (t timeline) cost() Stage {
	const name = "Cost and impact estimate"
	r := t.r
	switch {
	case r.Cost != nil && r.Cost.NoPrice:
		return Stage{Name: name, Status: StageDone, Detail: r.Cost.NoPriceFor(), Review: true}
	case r.Cost != nil:
		detail := fmt.Sprintf("%s per month (%s → %s)", review.SignedMoney(r.Cost.Delta), review.Money(r.Cost.Before), review.Money(r.Cost.After))
		if len(r.Cost.Unpriced) > 0 {
			detail += "; no price for " + strings.Join(r.Cost.Unpriced, ", ")
		}
		return Stage{Name: name, Status: StageDone, Detail: detail, Review: true}
	case t.planned():
		return Stage{Name: name, Status: StageSkipped, Detail: "no estimate was recorded for this plan"}
	}
	return Stage{Name: name, Status: t.later}
}

func (t timeline) decision() Stage {
	const name = "Decision"
	r := t.r
	switch {
	case r.Kind == run.KindPlanOnly:
		return Stage{Name: name, Status: StageSkipped, Detail: "dry runs are never decided on"}
	case r.Kind == run.KindDrift:
		return Stage{Name: name, Status: StageSkipped, Detail: "drift checks are never decided on: they change nothing"}
	case r.State == run.NoChanges:
		return Stage{Name: name, Status: StageSkipped, Detail: "the plan changes nothing: nothing to decide"}
	}
	if m := moveInto(t.moves, run.Approved); m != nil {
		if r.ApprovalKind == "self-service" {
			return stageFrom(name, &m.event, StageDone, "self-service approval of plan "+bundle.Short(r.ApprovedPlanDigest)+" ("+m.reason+")")
		}
		st := stageFrom(name, &m.event, StageDone, "approved plan "+bundle.Short(r.ApprovedPlanDigest))
		st.Actor = r.ApprovedByName
		if r.SelfApproved() {
			st.Mark = runport.SelfApproved
		}
		return st
	}
	if ev := into(t.moves, run.Rejected); ev != nil {
		st := stageFrom(name, ev, StageRejected, r.StateReason)
		st.Actor = r.RejectedByName
		return st
	}
	switch r.State {
	case run.PendingApproval:
		// Who decides, not the risk sentence again: the page says that once, above.
		detail := "waiting for " + run.DecidersOf(r).Summary()
		if r.DecisionDeadline != nil {
			detail += "; decide by " + r.DecisionDeadline.UTC().Format("2006-01-02 15:04 UTC")
		}
		return stageFrom(name, into(t.moves, run.PendingApproval), StageCurrent, detail)
	case run.Expired:
		return stageFrom(name, into(t.moves, run.Expired), StageExpired, r.StateReason)
	case run.Stale:
		return stageFrom(name, into(t.moves, run.Stale), StageStale, r.StateReason)
	case run.Cancelled:
		if t.planned() {
			st := stageFrom(name, into(t.moves, run.Cancelled), StageCancelled, r.StateReason)
			st.Actor = r.CancelledByName
			return st
		}
	}
	return Stage{Name: name, Status: t.later}
}

func (t timeline) apply() []Stage {
	r := t.r
	names := [3]string{"Apply in an isolated worker", "State persisted (encrypted)", "Verification"}
	if !r.Kind.Applies() || r.State == run.NoChanges {
		why := map[run.Kind]string{run.KindPlanOnly: "dry run", run.KindDrift: "a drift check never applies"}[r.Kind]
		if r.State == run.NoChanges {
			why = "nothing to apply"
		}
		return []Stage{{Name: names[0], Status: StageSkipped, Detail: why}, {Name: names[1], Status: StageSkipped}, {Name: names[2], Status: StageSkipped}}
	}
	running, verifying := into(t.moves, run.Running), into(t.moves, run.Verifying)
	ended := into(t.moves, run.Failed, run.ApplyInterrupted, run.Stale, run.Expired, run.Cancelled)
	apply := Stage{Name: names[0], Status: t.later}
	switch {
	case verifying != nil:
		apply = stageFrom(names[0], running, StageDone, "applied the approved plan file "+bundle.Short(r.ApprovedPlanDigest))
	case r.State == run.Running:
		apply = stageFrom(names[0], running, StageCurrent, "")
	case running != nil && (r.State == run.Failed || r.State == run.ApplyInterrupted):
		apply = stageFrom(names[0], ended, StageFailed, r.StateReason)
	case r.ApprovedPlanDigest != "" && (r.State == run.Failed || r.State == run.Stale || r.State == run.Expired):
		apply = stageFrom(names[0], ended, StageFailed, "refused before any change: "+r.StateReason)
	case r.ApprovedPlanDigest != "" && r.State == run.Cancelled:
		apply = stageFrom(names[0], ended, StageCancelled, "cancelled before the apply began")
	}
	persisted := Stage{Name: names[1], Status: t.later}
	if r.NewStateVersionID != nil {
		persisted = stageFrom(names[1], verifying, StageDone, "new state version")
		if verifying == nil {
			persisted.Detail = "a state version was written before the apply stopped"
		}
	}
	verify := Stage{Name: names[2], Status: t.later}
	switch {
	case r.State == run.Succeeded:
		verify = stageFrom(names[2], into(t.moves, run.Succeeded), StageDone, "live resources match the applied state")
	case r.State == run.Verifying:
		verify = stageFrom(names[2], verifying, StageCurrent, "")
	case r.State == run.Failed && verifying != nil:
		verify = stageFrom(names[2], ended, StageFailed, r.StateReason)
	}
	return []Stage{apply, persisted, verify}
}
