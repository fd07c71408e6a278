package run

// A run's state and kind in the words a person reads them, beside their tables: the
// codes (PENDING_APPROVAL, plan_only) stay what the database, the audit log's data, the
// API, webhooks and data attributes carry; pages, the audit history's sentences and the
// gate timeline say these words instead (issue 37). One map per kind of code, each held
// complete by a test (TestEveryStateAndKindHasWords), so a state or kind added without
// words fails there instead of showing its code to people.

// stateWords say each state as a badge does, in sentence case.
var stateWords = map[State]string{
	Queued:           "Queued",
	Planning:         "Planning",
	Planned:          "Planned",
	NoChanges:        "No changes",
	PolicyBlocked:    "Blocked by policy",
	PendingApproval:  "Waiting for approval",
	Approved:         "Approved",
	Running:          "Applying",
	Verifying:        "Verifying",
	Succeeded:        "Succeeded",
	Failed:           "Failed",
	Rejected:         "Rejected",
	Cancelled:        "Cancelled",
	Expired:          "Expired",
	Stale:            "Stale",
	ApplyInterrupted: "Apply interrupted",
}

// Words is s as people read it ("Waiting for approval"); a state without words reads
// as its code.
func (s State) Words() string {
	if w, ok := stateWords[s]; ok {
		return w
	}
	return string(s)
}

// Kinds lists every kind, in the order lists offer them.
var Kinds = []Kind{KindApply, KindPlanOnly, KindDestroy, KindDrift, KindCodify}

// kindWords say each kind in a few words, and what it does in a few more.
var kindWords = map[Kind]struct{ words, means string }{
	KindApply:    {"Plan and apply", "applied after any approval"},
	KindPlanOnly: {"Dry run", "plan only, never applied"},
	KindDestroy:  {"Destroy", "removes every resource of the workspace"},
	KindDrift:    {"Drift check", "a refresh-only plan, never applied"},
	KindCodify:   {"Codification", "a refresh-only plan, applied to the state only"},
}

// Words is k as people read it ("Dry run"); a kind without words reads as its code.
func (k Kind) Words() string {
	if w, ok := kindWords[k]; ok {
		return w.words
	}
	return string(k)
}

// Means says what a run of kind k does ("plan only, never applied"); "" for a kind
// without words.
func (k Kind) Means() string { return kindWords[k].means }
