package handlers

import (
	"gantry/models/breakglass"
	"gantry/models/run"
	"gantry/views"
)

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
	return views.RunState{Name: string(s), Tone: runTones[s], AwaitsApproval: s == run.PendingApproval}
}

// runState is run r's state as pages show it, with what the rules answer about it.
func runState(r run.Run) views.RunState {
	v := stateOf(r.State)
	v.AwaitsOverride = r.SoftBlocked()
	return v
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
