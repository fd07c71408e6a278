package pages

import (
	"context"
	"encoding/json"
	"time"

	"gantry/models/authz"
	"gantry/models/run"
)

// ReviewRuns reads the run a review is of, and the workspace's last run applied before
// it, which its inputs are compared with (run.Reads).
type ReviewRuns interface {
	RunGetter
	AppliedBefore(ctx context.Context, r run.Run) (prev *run.Run, known bool, err error)
}

// Comparison says what a run's inputs are compared with.
type Comparison string

// The comparisons of a run's inputs.
const (
	// CompareApplied: with the inputs of the workspace's last applied run (Against).
	CompareApplied Comparison = "applied"
	// CompareFirst: nothing was applied to the workspace before: every input is new.
	CompareFirst Comparison = "first"
	// CompareDestroyed: the last applied run (Against) destroyed everything: every
	// input is new again.
	CompareDestroyed Comparison = "destroyed"
	// CompareDestroy: the run destroys what the workspace holds; its inputs change
	// nothing.
	CompareDestroy Comparison = "destroy"
	// CompareRefresh: a drift check or a codification plans the applied configuration
	// again; its inputs change nothing.
	CompareRefresh Comparison = "refresh"
	// CompareUnknown: the run applied before lies beyond what was read; nothing can
	// be claimed (the plan tells what changes).
	CompareUnknown Comparison = "unknown"
)

// WhoWhy is who asked for a run, when and why, and its inputs "was → now" against
// what the workspace last applied before it. Free text, shown escaped, never decided on.
type WhoWhy struct {
	Requester string
	// You: the reader asked for the run.
	You  bool
	At   time.Time
	Note run.Note
	// Compared says what Inputs compare with; Against is the run applied before (nil
	// for CompareFirst, CompareUnknown, and the kinds whose inputs change nothing).
	Compared Comparison
	Against  *run.Run
	Inputs   []run.InputDiff
}

// whoWhy reads run r's requester, note and inputs against the run applied before it.
func whoWhy(ctx context.Context, runs ReviewRuns, r run.Run) (WhoWhy, error) {
	w := WhoWhy{Requester: r.RequestedByName, At: r.CreatedAt, Note: run.Note{Reason: r.RequestReason, Ticket: r.RequestTicket}}
	if s, ok := authz.SubjectFrom(ctx); ok && s.UserID != "" && s.UserID == r.RequestedBy {
		w.You = true
	}
	switch r.Kind {
	case run.KindDestroy:
		w.Compared = CompareDestroy
		return w, nil
	case run.KindDrift, run.KindCodify:
		w.Compared = CompareRefresh
		return w, nil
	}
	prev, known, err := runs.AppliedBefore(ctx, r)
	if err != nil {
		return WhoWhy{}, err
	}
	var was json.RawMessage
	switch {
	case !known:
		w.Compared = CompareUnknown
		return w, nil
	case prev == nil:
		w.Compared = CompareFirst
	case prev.Kind == run.KindDestroy:
		w.Compared, w.Against = CompareDestroyed, prev
	default:
		w.Compared, w.Against, was = CompareApplied, prev, prev.Inputs
		if was == nil {
			was = json.RawMessage("{}")
		}
	}
	if w.Inputs, err = run.DiffInputs(was, r.Inputs); err != nil {
		return WhoWhy{}, err
	}
	return w, nil
}
