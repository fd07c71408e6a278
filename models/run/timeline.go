package run

import (
	"encoding/json"
	"fmt"
	"time"

	"gantry/models/audit"
)

// StageStatus is how far one gate of the sequence got.
type StageStatus string

const (
	StageDone    StageStatus = "done"
	StageCurrent StageStatus = "current"
	StageWaiting StageStatus = "waiting"
	StageFailed  StageStatus = "failed"
	StageSkipped StageStatus = "skipped"
)

// Stage is one gate of DESIGN §2's sequence as a run went through it.
type Stage struct {
	Name   string
	Status StageStatus
	At     *time.Time
	Actor  string
	Detail string
}

// transitionAt finds the first audit event that moved the run into one of states.
func transitionAt(events []audit.Event, states ...State) *audit.Event {
	for i := range events {
		var d struct {
			To State `json:"to"`
		}
		if events[i].Action == "run.queued" {
			d.To = Queued
		} else if err := json.Unmarshal(events[i].Data, &d); err != nil {
			continue
		}
		for _, s := range states {
			if d.To == s {
				return &events[i]
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

// Timeline derives the gate timeline from the run and its audit events: what is
// shown is what was recorded, never inferred from the clock.
func Timeline(r Run, events []audit.Event) []Stage {
	queued := transitionAt(events, Queued)
	stages := []Stage{
		stageFrom("Request", queued, StageDone, fmt.Sprintf("%s of %s %s", r.Kind, r.TemplateName, r.TemplateVersion)),
		stageFrom("Template and inputs validated, configuration generated", queued, StageDone, "config bundle "+short(r.ConfigDigest)),
	}

	planStart := transitionAt(events, Planning)
	planEnd := transitionAt(events, Planned, NoChanges, PolicyBlocked, PendingApproval, Approved)
	plan := stageFrom("Plan (init, plan, show -json)", planStart, StageWaiting, "")
	switch {
	case planEnd != nil:
		plan = stageFrom(plan.Name, planEnd, StageDone, fmt.Sprintf("plan %s: %d to add, %d to change, %d to replace, %d to destroy",
			short(r.PlanDigest), r.PlanSummary.Create, r.PlanSummary.Update, r.PlanSummary.Replace, r.PlanSummary.Delete))
	case r.State == Planning:
		plan.Status = StageCurrent
	case r.State == Failed && r.PlanDigest == "":
		plan = stageFrom(plan.Name, transitionAt(events, Failed), StageFailed, r.StateReason)
	case r.State == Cancelled && r.PlanDigest == "":
		plan.Status = StageSkipped
	}
	stages = append(stages, plan)

	// Policy and estimate are gates of the sequence that no configuration enforces
	// yet: the page says so instead of pretending they passed.
	stages = append(stages,
		Stage{Name: "Policy decision", Status: StageSkipped, Detail: "unenforced: no policy engine is configured yet"},
		Stage{Name: "Cost and impact estimate", Status: StageSkipped, Detail: "not estimated yet"})

	stages = append(stages, approvalStage(r, events))
	stages = append(stages, applyStages(r, events)...)
	return stages
}

func approvalStage(r Run, events []audit.Event) Stage {
	const name = "Approval"
	switch {
	case r.Kind == KindPlanOnly:
		return Stage{Name: name, Status: StageSkipped, Detail: "dry runs are never gated"}
	case r.State == NoChanges:
		return Stage{Name: name, Status: StageSkipped, Detail: "nothing to approve"}
	}
	if ev := transitionAt(events, Rejected); ev != nil {
		return stageFrom(name, ev, StageFailed, "rejected: "+r.StateReason)
	}
	if ev := transitionAt(events, Approved); ev != nil {
		detail := "approved plan " + short(r.ApprovedPlanDigest)
		if r.ApprovalKind == "self-service" {
			detail = "self-service approval of plan " + short(r.ApprovedPlanDigest) + " (" + r.StateReasonAt(events, Approved) + ")"
		}
		return stageFrom(name, ev, StageDone, detail)
	}
	if ev := transitionAt(events, PendingApproval); ev != nil {
		if r.State == PendingApproval {
			detail := "waiting: " + r.StateReason
			if r.DecisionDeadline != nil {
				detail += "; decide by " + r.DecisionDeadline.UTC().Format("2006-01-02 15:04 UTC")
			}
			return stageFrom(name, ev, StageCurrent, detail)
		}
		if ex := transitionAt(events, Expired, Cancelled, Stale); ex != nil {
			return stageFrom(name, ex, StageFailed, r.StateReason)
		}
	}
	return Stage{Name: name, Status: StageWaiting}
}

// StateReasonAt is the reason recorded when the run entered state s.
func (r Run) StateReasonAt(events []audit.Event, s State) string {
	if ev := transitionAt(events, s); ev != nil {
		var d struct {
			Reason string `json:"reason"`
		}
		if json.Unmarshal(ev.Data, &d) == nil {
			return d.Reason
		}
	}
	return ""
}

func applyStages(r Run, events []audit.Event) []Stage {
	if r.Kind == KindPlanOnly {
		return []Stage{
			{Name: "Apply in an isolated worker", Status: StageSkipped, Detail: "dry run"},
			{Name: "State persisted (encrypted)", Status: StageSkipped},
			{Name: "Verification", Status: StageSkipped},
		}
	}
	running := transitionAt(events, Running)
	verifying := transitionAt(events, Verifying)
	apply := stageFrom("Apply in an isolated worker", running, StageWaiting, "")
	switch {
	case verifying != nil:
		apply = stageFrom(apply.Name, running, StageDone, "applied the approved plan file "+short(r.ApprovedPlanDigest))
	case r.State == Running:
		apply.Status = StageCurrent
	case r.State == ApplyInterrupted || (r.State == Failed && running != nil):
		apply = stageFrom(apply.Name, transitionAt(events, ApplyInterrupted, Failed), StageFailed, r.StateReason)
	case r.State == Failed || r.State == Stale || r.State == Expired:
		if r.ApprovedPlanDigest != "" {
			apply = stageFrom(apply.Name, transitionAt(events, Failed, Stale, Expired), StageFailed, "refused before any change: "+r.StateReason)
		}
	}
	persisted := Stage{Name: "State persisted (encrypted)", Status: StageWaiting}
	if verifying != nil {
		persisted = stageFrom(persisted.Name, verifying, StageDone, "new state version")
	}
	verify := stageFrom("Verification", verifying, StageWaiting, "")
	if end := transitionAt(events, Succeeded); end != nil {
		verify = stageFrom(verify.Name, end, StageDone, "live resources match the applied state")
	} else if r.State == Verifying {
		verify.Status = StageCurrent
	} else if r.State == Failed && verifying != nil {
		verify = stageFrom(verify.Name, transitionAt(events, Failed), StageFailed, r.StateReason)
	}
	return []Stage{apply, persisted, verify}
}

// short abbreviates a digest for display; the full one is on the page too.
func short(digest string) string {
	if len(digest) > 19 {
		return digest[:19] + "…"
	}
	if digest == "" {
		return "—"
	}
	return digest
}
