package run

import (
	"context"
	"fmt"
	"maps"
	"slices"
)

// The apply queue, as a person waiting in it sees it. Runs of one workspace apply one at
// a time, in the order they were requested (takeSlot): an approved run waits while
// another run holds the workspace's apply slot, or while an earlier run is still on its
// way to apply. This file reads that wait with the same rule, so what a run page shows
// is what takeSlot will do, and words the endings of a run that waited in it.

// Queue is where an approved run stands among the runs of its workspace waiting to
// apply. It is comparable: a page shows it again only when it changed.
type Queue struct {
	// Position is the run's place among the runs waiting to apply, the holder left out:
	// 1 is next (it applies once the holder lets the workspace go).
	Position int
	// Waiting counts the runs waiting to apply, this one included, the holder left out.
	Waiting int
	// Holder is what the run waits behind (none: nothing holds the workspace, and the
	// apply begins when its job next asks).
	Holder QueueHolder
}

// Held reports whether something holds the workspace.
func (q Queue) Held() bool { return q.Holder.RunID != "" }

// QueueHolder is the run that holds a workspace's apply queue, and what it is doing.
type QueueHolder struct {
	RunID  string
	Number int
	Phase  HolderPhase
}

// Label is the holder's name within its workspace, e.g. "#3" (as Run.Label).
func (h QueueHolder) Label() string { return fmt.Sprintf("#%d", h.Number) }

// HolderPhase is what the run holding a workspace's apply queue is doing.
type HolderPhase string

const (
	// HolderQueued: an earlier run waiting to plan (it may yet need to apply).
	HolderQueued HolderPhase = "queued"
	// HolderPlanning: an earlier run planning; once its plan waits for a person (or
	// changes nothing), the runs behind it go on.
	HolderPlanning HolderPhase = "planning"
	// HolderApproved: an earlier run approved too, about to apply.
	HolderApproved HolderPhase = "approved"
	// HolderApplying: a run applying; the state it writes makes the plans of the runs
	// behind it stale.
	HolderApplying HolderPhase = "applying"
	// HolderVerifying: a run verifying its apply.
	HolderVerifying HolderPhase = "verifying"
	// HolderCheckingDrift: a drift check planning (it holds the slot so that it never
	// overlaps an apply; it writes no state).
	HolderCheckingDrift HolderPhase = "checking_drift"
	// HolderInterrupted: a run whose apply was interrupted; the workspace stays held
	// until an admin recovers it.
	HolderInterrupted HolderPhase = "interrupted"
)

// A break-glass window is no holder: opening one ends the workspace's approved runs
// EXPIRED (WindowOpened) and no run is approved while it is open, so no approved run
// ever waits behind one.

// holderPhases are the phases with what each says to a person.
var holderPhases = map[HolderPhase]string{
	HolderQueued:        "waiting to plan",
	HolderPlanning:      "planning",
	HolderApproved:      "approved, about to apply",
	HolderApplying:      "applying",
	HolderVerifying:     "verifying",
	HolderCheckingDrift: "checking drift",
	HolderInterrupted:   "apply interrupted, until an admin recovers it",
}

// HolderPhases lists every phase, for the API's description and the tests.
func HolderPhases() []HolderPhase { return slices.Sorted(maps.Keys(holderPhases)) }

// Words says phase p as a person does ("checking drift").
func (p HolderPhase) Words() string { return holderPhases[p] }

// Outlook says what the holder's phase means for the run waiting behind it ("": nothing
// more than the wait).
func (p HolderPhase) Outlook() string {
	switch p {
	case HolderQueued, HolderPlanning:
		return "Once that run's plan waits for a decision or changes nothing, this run goes next; if that run is approved at once, it applies first and this run's plan goes stale."
	case HolderApproved, HolderApplying:
		return "When that run writes the workspace's state, this run's plan no longer matches it: this run goes stale and must be planned again."
	case HolderCheckingDrift:
		return "A drift check writes no state: this run goes on once it ends."
	case HolderInterrupted:
		return "Nothing applies on this workspace until an admin recovers that run."
	}
	return ""
}

// queuedRun is what the queue reads of a run.
type queuedRun struct {
	ID     string
	Number int
	State  State
	Kind   Kind
}

// Queue reads where approved run r stands in its workspace's apply queue; nil when r
// is not waiting to apply (any state but APPROVED). r is a run the reader may see (Get):
// the runs it waits behind are of the same workspace, which the reader sees too.
func (s *Reads) Queue(ctx context.Context, r Run) (*Queue, error) {
	return s.k.queueOf(ctx, r)
}

// queueOf reads the queue of run r in two queries: the workspace's slot, then the runs
// in the queue with the slot's holder. They are not one snapshot: a move between them
// shows at the next read, which the move itself triggers (it notifies).
func (s *core) queueOf(ctx context.Context, r Run) (*Queue, error) {
	if r.State != Approved {
		return nil, nil
	}
	ws, err := s.workspaces.Get(ctx, r.OrganizationID, r.WorkspaceID)
	if err != nil {
		return nil, err
	}
	slot := deref(ws.ActiveRunID)
	runs, err := s.store.applyQueue(ctx, r.WorkspaceID, slot)
	if err != nil {
		return nil, err
	}
	q := queueFrom(r, slot, runs)
	return &q, nil
}

// queueFrom is where r stands, given the run holding the workspace's slot (slot, ""
// for none) and the runs of the queue (runs, by number, the slot's holder among them):
// takeSlot's rule. The slot's holder holds the queue whatever its number; without one,
// the earliest run ahead of r does, since r cannot apply before it.
func queueFrom(r Run, slot string, runs []queuedRun) Queue {
	var holder *queuedRun
	var ahead []queuedRun
	waiting := 1 // r
	for _, o := range runs {
		switch {
		case o.ID == r.ID:
		case o.ID == slot:
			holder = &o
		case o.Number < r.Number:
			ahead = append(ahead, o)
			waiting++
		default:
			waiting++
		}
	}
	held := holder != nil
	if !held && len(ahead) > 0 {
		holder, ahead = &ahead[0], ahead[1:]
		waiting--
	}
	q := Queue{Position: len(ahead) + 1, Waiting: waiting}
	if holder != nil {
		q.Holder = QueueHolder{RunID: holder.ID, Number: holder.Number, Phase: holderPhase(*holder, held)}
	}
	return q
}

// holderPhase is what run o holding the queue is doing; slot: it holds the apply slot,
// which a drift check takes as it plans and any other run as it starts applying.
func holderPhase(o queuedRun, slot bool) HolderPhase {
	switch {
	case slot && o.Kind == KindDrift:
		return HolderCheckingDrift
	case o.State == Queued:
		return HolderQueued
	case o.State == Planning:
		return HolderPlanning
	case o.State == Approved:
		return HolderApproved
	case o.State == Verifying:
		return HolderVerifying
	case o.State == ApplyInterrupted:
		return HolderInterrupted
	}
	// The slot is taken in the transaction that moves a run to RUNNING and let go in the
	// one that ends it: a holder in any other state is ending its apply.
	return HolderApplying
}

// causeRunKey names, in the audit event of a move (and the notice of it), the run whose
// act ended this one: the run that wrote the state a STALE run was planned against, the
// run an EXPIRED one waited behind.
const causeRunKey = "cause_run_id"

// endValidity ends approved run r EXPIRED, its approval's validity run out before its
// apply began: the reason names what it waited behind at this moment (the holder, with
// its phase), and the move's audit event and notice carry the holder's id.
func (s *core) endValidity(ctx context.Context, r *Run) error {
	q, err := s.queueOf(ctx, *r)
	if err != nil {
		return err
	}
	reason, held := "the approval expired before the apply started", q != nil && q.Held()
	if held {
		reason = fmt.Sprintf("waited behind run %s (%s) until the approval expired, %d minutes after it was given; nothing was applied: plan again",
			q.Holder.Label(), q.Holder.Phase.Words(), int(ApprovalValidity.Minutes()))
	}
	if err := r.end(Expired, EndApprovalValidityEnded, reason); err != nil {
		return err
	}
	if held {
		r.moves.Annotate(map[string]any{causeRunKey: q.Holder.RunID, "cause_phase": string(q.Holder.Phase)})
	}
	return nil
}
