package handlers

import (
	"unicode"
	"unicode/utf8"

	"gantry/models/breakglass"
	"gantry/models/run"
	"gantry/policies"
	"gantry/views"
)

// How codes read on a page. The words of run states and kinds live beside their tables
// in models/run (State.Words, Kind.Words), where the audit history and the timeline
// read them too; this file adds how each reads (its tone) and hands views the words
// with the code, which views put in a data attribute only (issue 37).

// runTones say how each run state reads on a page; a state missing here reads plain
// (TestEveryRunStateHasATone).
var runTones = map[run.State]views.Tone{
	run.Queued: views.ToneBusy, run.Planning: views.ToneBusy, run.Approved: views.ToneBusy, run.Running: views.ToneBusy,
	run.Verifying: views.ToneBusy,
	run.Succeeded: views.ToneOK, run.Planned: views.ToneOK, run.NoChanges: views.ToneOK,
	run.Failed: views.ToneBad, run.Rejected: views.ToneBad, run.Expired: views.ToneBad, run.Stale: views.ToneBad,
	run.ApplyInterrupted: views.ToneBad, run.Cancelled: views.ToneBad, run.PolicyBlocked: views.ToneBad,
	run.PendingApproval: views.ToneWait,
}

// stateOf is state s as pages show it, from the state alone: whether a policy block
// waits for an override needs the run (runState).
func stateOf(s run.State) views.RunState {
	return views.RunState{Words: s.Words(), Code: string(s), Tone: runTones[s], AwaitsApproval: s == run.PendingApproval}
}

// runState is run r's state as pages show it, with what the rules answer about it.
func runState(r run.Run) views.RunState {
	v := stateOf(r.State)
	v.AwaitsOverride = r.SoftBlocked()
	return v
}

// kindOf is kind k as pages show it.
func kindOf(k run.Kind) views.RunKind {
	return views.RunKind{Words: k.Words(), Means: k.Means(), Code: string(k)}
}

// policyOutcomes say each outcome of a policy evaluation in words, and how it reads
// (TestEveryPolicyOutcomeHasWords).
var policyOutcomes = map[policies.Outcome]views.Coded{
	policies.OutcomePass:     {Words: "Passed", Tone: views.ToneOK},
	policies.OutcomeAdvisory: {Words: "Passed, with advisory findings", Tone: views.ToneWait},
	policies.OutcomeSoft:     {Words: "Failed, may be overridden", Tone: views.ToneBad},
	policies.OutcomeHard:     {Words: "Failed, cannot be overridden", Tone: views.ToneBad},
}

// outcomeOf is a policy evaluation's outcome (its code, as runs store it) as pages show
// it: none yet reads "Not evaluated", an outcome without words as its code.
func outcomeOf(code string) views.Coded {
	v, ok := policyOutcomes[policies.Outcome(code)]
	switch {
	case code == "":
		v = views.Coded{Words: "Not evaluated"}
	case !ok:
		v = views.Coded{Words: code, Tone: views.ToneBad}
	}
	v.Code = code
	return v
}

// windowState is a break-glass window's state as its badge shows it: the window's own
// words (breakglass.State.Label) in sentence case, and how it reads.
func windowState(s breakglass.State) views.Coded {
	return views.Coded{Words: sentence(s.Label()), Code: string(s), Tone: windowTone(s)}
}

// windowTone says how a break-glass window's state reads on a page.
func windowTone(s breakglass.State) views.Tone {
	switch s {
	case breakglass.Open, breakglass.AwaitingCodification:
		return views.ToneWait
	case breakglass.Codified:
		return views.ToneOK
	case breakglass.Rejected, breakglass.Expired, breakglass.Cancelled:
		return views.ToneBad
	}
	return views.TonePlain
}

// sentence is words w with a capital first letter, as a badge starts.
func sentence(w string) string {
	r, n := utf8.DecodeRuneInString(w)
	return string(unicode.ToUpper(r)) + w[n:]
}
