package run

import "slices"

// The rule of endings: every way a run ends says why in a code from one closed set,
// recorded on the run (runs.ending), in the audit event of the move and in the API, so
// that evidence never reads a free-text reason to learn whether an approval expired or
// a plan failed. A run "ends" when it reaches a terminal state, a hard policy block
// (final, though POLICY_BLOCKED is not terminal) or APPLY_INTERRUPTED (nothing moves
// it but an admin's recovery, which ends it again, FAILED). Run.end is the only way
// into those states, and it refuses a code that does not belong to the state.

// Ending is why a run ended.
type Ending string

const (
	// EndVerified: SUCCEEDED, the apply's result verified against the live resources.
	EndVerified Ending = "VERIFIED"
	// EndNoChanges: NO_CHANGES, the plan (or a drift check) found nothing to change.
	EndNoChanges Ending = "NO_CHANGES"
	// EndPlanOnly: PLANNED, a dry run, which never applies.
	EndPlanOnly Ending = "PLAN_ONLY"
	// EndDriftFound: PLANNED, a drift check that found drift (it never applies).
	EndDriftFound Ending = "DRIFT_FOUND"
	// EndPolicyHardBlocked: POLICY_BLOCKED by a hard-mandatory policy, which nothing lifts.
	EndPolicyHardBlocked Ending = "POLICY_HARD_BLOCKED"
	// EndRejected: REJECTED by a person, with a reason.
	EndRejected Ending = "REJECTED"
	// EndCancelled: CANCELLED before it applied.
	EndCancelled Ending = "CANCELLED"
	// EndStateMoved: STALE, the workspace's state moved after (or while) it planned.
	EndStateMoved Ending = "STATE_MOVED"
	// EndWindowOpened: STALE or EXPIRED, a break-glass window opened on the workspace.
	EndWindowOpened Ending = "BREAKGLASS_WINDOW_OPENED"
	// EndApprovalExpired: EXPIRED, no decision within the decision window.
	EndApprovalExpired Ending = "APPROVAL_EXPIRED"
	// EndApprovalValidityEnded: EXPIRED, the approval ran out before the apply started.
	EndApprovalValidityEnded Ending = "APPROVAL_VALIDITY_ENDED"
	// EndApprovalVoided: EXPIRED, the approval was voided after the decision window closed.
	EndApprovalVoided Ending = "APPROVAL_VOIDED"
	// EndPlanFailed, EndApplyFailed, EndVerifyFailed: FAILED in that phase.
	EndPlanFailed   Ending = "PLAN_FAILED"
	EndApplyFailed  Ending = "APPLY_FAILED"
	EndVerifyFailed Ending = "VERIFY_FAILED"
	// EndApplyRefused: FAILED, the checks before the apply refused it; nothing was applied.
	EndApplyRefused Ending = "APPLY_REFUSED"
	// EndDriftAfterApply: FAILED, the verification found the live resources differ.
	EndDriftAfterApply Ending = "VERIFY_DRIFT"
	// EndApplyInterrupted: APPLY_INTERRUPTED, the worker applying it stopped mid-apply.
	EndApplyInterrupted Ending = "APPLY_INTERRUPTED"
	// EndApplyCancelled: APPLY_INTERRUPTED, a person cancelled it while it applied.
	EndApplyCancelled Ending = "APPLY_CANCELLED"
	// EndRecovered: FAILED, an admin recovered the interrupted apply.
	EndRecovered Ending = "RECOVERED"
)

// endings is the closed set: each code, the states it may end a run in, and what it
// means in words (the run page and docs/api.md say these).
var endings = map[Ending]struct {
	states []State
	words  string
}{
	EndVerified:              {[]State{Succeeded}, "applied, and the verification found the live resources as applied"},
	EndNoChanges:             {[]State{NoChanges}, "the plan changed nothing"},
	EndPlanOnly:              {[]State{Planned}, "a dry run: planned, never applied"},
	EndDriftFound:            {[]State{Planned}, "a drift check that found drift; drift checks never apply"},
	EndPolicyHardBlocked:     {[]State{PolicyBlocked}, "blocked for good by a hard-mandatory policy"},
	EndRejected:              {[]State{Rejected}, "rejected by a person, with a reason"},
	EndCancelled:             {[]State{Cancelled}, "cancelled before it applied"},
	EndStateMoved:            {[]State{Stale}, "the workspace's state moved after (or while) it was planned"},
	EndWindowOpened:          {[]State{Stale, Expired}, "a break-glass window opened on the workspace"},
	EndApprovalExpired:       {[]State{Expired}, "no decision within the decision window"},
	EndApprovalValidityEnded: {[]State{Expired}, "the approval ran out before the apply started"},
	EndApprovalVoided:        {[]State{Expired}, "the approval was voided after the decision window had closed"},
	EndPlanFailed:            {[]State{Failed}, "the plan failed"},
	EndApplyFailed:           {[]State{Failed}, "the apply failed"},
	EndVerifyFailed:          {[]State{Failed}, "the verification could not run to its end"},
	EndApplyRefused:          {[]State{Failed}, "the checks before the apply refused it; nothing was applied"},
	EndDriftAfterApply:       {[]State{Failed}, "the verification found the live resources differ from the applied state"},
	EndApplyInterrupted:      {[]State{ApplyInterrupted}, "the worker applying it stopped mid-apply; an admin recovers it"},
	EndApplyCancelled:        {[]State{ApplyInterrupted}, "a person cancelled it while it applied: OpenTofu was stopped and the state it wrote kept; an admin recovers it"},
	EndRecovered:             {[]State{Failed}, "an admin recovered the interrupted apply"},
}

// Endings lists every code, for the API's description and the tests.
func Endings() []Ending {
	out := make([]Ending, 0, len(endings))
	for e := range endings {
		out = append(out, e)
	}
	slices.Sort(out)
	return out
}

// EndsIn reports whether e may end a run in state s.
func (e Ending) EndsIn(s State) bool { return slices.Contains(endings[e].states, s) }

// Words says what e means ("" for no ending).
func (e Ending) Words() string { return endings[e].words }

// Valid reports whether e is one of the codes.
func (e Ending) Valid() bool { _, ok := endings[e]; return ok }

// failedIn is the code of a failure in phase.
func failedIn(phase JobKind) Ending {
	switch phase {
	case JobApply:
		return EndApplyFailed
	case JobVerify:
		return EndVerifyFailed
	}
	return EndPlanFailed
}

// endsAfter reports whether a run in state to, with r's policy outcome, has ended: a
// terminal state, a hard policy block or an interrupted apply.
func endsAfter(r Run, to State) bool {
	r.State = to
	return r.Finished() || to == ApplyInterrupted
}
