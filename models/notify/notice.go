// Package notify tells people what happened to runs: the members who may decide a
// waiting run, and the requester and approvers of a run that was decided, expired,
// failed or went stale. Notices are written by the run service inside the transaction
// that made them true (so a rolled-back decision tells nobody) and fanned out by a job
// to the organization's webhooks (signed JSON or a Slack-compatible body, retried with
// backoff, logged per hook) and to each recipient's e-mail, as their preferences say.
//
// A notice links to the run's review page; nothing is decided by following a link
// (decisions are POSTs with a CSRF token on that page).
package notify

import (
	"fmt"
	"slices"
	"strings"
	"time"
)

// Event names what a notice is about. The names are stable: webhook receivers and
// stored preferences use them.
type Event string

const (
	// DecisionWaiting: a run waits for an approval or a policy override; sent to every
	// member who may take that decision now.
	DecisionWaiting Event = "decision.waiting"
	// DecisionEscalated: a run waited its escalation time; sent again to everyone who
	// may decide it now (the escalation's deciders included).
	DecisionEscalated Event = "decision.escalated"
	// RunDecided: a person approved, rejected or overrode the run.
	RunDecided Event = "run.decided"
	// RunExpired: nobody decided in time, or an approval ran out before the apply.
	RunExpired Event = "run.expired"
	// RunFailed: a plan, apply or verification failed, an apply was interrupted, or a
	// policy blocked the run for good.
	RunFailed Event = "run.failed"
	// RunStale: the workspace's state moved after the plan; the run cannot apply.
	RunStale Event = "run.stale"
	// DriftUnowned: a drift check found live resources changed by nobody on record (no
	// run, no break-glass window); sent to the organization's admins and owners.
	DriftUnowned Event = "drift.unowned"
	// RunApplied: a run's apply finished and its changes are live (its verification
	// follows); sent to the requester and the run's approvers.
	RunApplied Event = "run.applied"
	// BreakglassRequested: a person asked for a break-glass window (an emergency); sent
	// to every member who may decide it.
	BreakglassRequested Event = "breakglass.requested"
	// BreakglassOpened: a window was approved (its requester may open it) or opened (the
	// manual change path is open); sent to the requester and the approver.
	BreakglassOpened Event = "breakglass.opened"
	// BreakglassEnded: a window's manual change path ended (its time was up, or someone
	// ended it), or it never opened (rejected, cancelled, expired); sent to the requester
	// and the approver.
	BreakglassEnded Event = "breakglass.ended"
)

// Events lists every event, in the order pages show them.
var Events = []Event{DecisionWaiting, DecisionEscalated, RunDecided, RunExpired, RunFailed, RunStale, DriftUnowned,
	RunApplied, BreakglassRequested, BreakglassOpened, BreakglassEnded}

// Valid reports whether e is one of Events.
func (e Event) Valid() bool { return slices.Contains(Events, e) }

// Title is the event as a person reads it in a list of choices.
func (e Event) Title() string {
	switch e {
	case DecisionWaiting:
		return "A decision waits for you"
	case DecisionEscalated:
		return "A waiting decision escalated"
	case RunDecided:
		return "A run was approved, rejected or overridden"
	case RunExpired:
		return "A run expired"
	case RunFailed:
		return "A run failed or was blocked by policy"
	case RunStale:
		return "A run went stale"
	case DriftUnowned:
		return "A drift check found unowned drift"
	case RunApplied:
		return "A run applied its changes"
	case BreakglassRequested:
		return "A break-glass window (an emergency) waits for your decision"
	case BreakglassOpened:
		return "A break-glass window was approved or opened"
	case BreakglassEnded:
		return "A break-glass window ended, or was rejected, cancelled or expired"
	}
	return string(e)
}

// Notice is one thing that happened to one run or one break-glass window, addressed
// to members (user ids). The run service builds a run's; what the run is (its label,
// environment, risk) is read when the notice is fanned out. The window service builds
// a window's with what it says (Window) already in it.
type Notice struct {
	ID             string `json:"id"` // "ntf-..."
	Event          Event  `json:"event"`
	OrganizationID string `json:"organization_id"`
	RunID          string `json:"run_id,omitempty"`
	// Window is the break-glass window the notice is about (nil: a run's notice).
	Window    *WindowFacts `json:"window,omitempty"`
	State     string       `json:"state"`
	Reason    string       `json:"reason,omitempty"`
	ActorName string       `json:"actor_name,omitempty"`
	// CauseRunID is the run whose act ended this one, when another run's did: the run
	// that wrote the state a STALE run was planned against, the run an EXPIRED one
	// waited behind (the reason names it too).
	CauseRunID string    `json:"cause_run_id,omitempty"`
	At         time.Time `json:"at"`
	Recipients []string  `json:"recipients"`
}

// Facts are what a notice says about its run, read when it is fanned out.
type Facts struct {
	Label       string // "billing-prod #3"
	Workspace   string
	Environment string
	Tier        string
	Template    string
	Kind        string // "apply" | "destroy"
	Requester   string
	RiskLevel   string
	Create      int
	Update      int
	Replace     int
	Delete      int
	CostDelta   string // "+$64.50", "" when not estimated
	Deadline    *time.Time
	Simulated   bool
}

// Changes says the plan's changes in words ("2 to create, 1 to destroy").
func (f Facts) Changes() string {
	var parts []string
	for _, c := range []struct {
		n    int
		verb string
	}{{f.Create, "create"}, {f.Update, "update"}, {f.Replace, "replace"}, {f.Delete, "destroy"}} {
		if c.n > 0 {
			parts = append(parts, fmt.Sprintf("%d to %s", c.n, c.verb))
		}
	}
	if len(parts) == 0 {
		return "no changes"
	}
	return strings.Join(parts, ", ")
}

// Headline is the notice in one sentence, for a mail subject and a chat message.
func Headline(n Notice, f Facts) string {
	if n.Window != nil {
		return windowHeadline(n)
	}
	label := f.Label
	if f.Simulated {
		label += " (SIMULATED)"
	}
	switch n.Event {
	case DecisionWaiting:
		return fmt.Sprintf("%s in %s waits for your decision", label, f.Environment)
	case DecisionEscalated:
		return fmt.Sprintf("%s in %s still waits for a decision (escalated)", label, f.Environment)
	case RunDecided:
		verb := map[string]string{"APPROVED": "approved", "REJECTED": "rejected", "PENDING_APPROVAL": "released by a policy override"}[n.State]
		if verb == "" {
			verb = "decided"
		}
		if n.ActorName != "" {
			return fmt.Sprintf("%s in %s was %s by %s", label, f.Environment, verb, n.ActorName)
		}
		return fmt.Sprintf("%s in %s was %s", label, f.Environment, verb)
	case RunExpired:
		return fmt.Sprintf("%s in %s expired", label, f.Environment)
	case RunFailed:
		if n.State == "POLICY_BLOCKED" {
			return fmt.Sprintf("%s in %s was blocked by policy", label, f.Environment)
		}
		return fmt.Sprintf("%s in %s failed", label, f.Environment)
	case RunStale:
		return fmt.Sprintf("%s in %s went stale", label, f.Environment)
	case RunApplied:
		return fmt.Sprintf("%s in %s applied its changes", label, f.Environment)
	case DriftUnowned:
		return fmt.Sprintf("Unowned drift in %s (%s): live resources were changed outside Gantry (drift check %s)", f.Workspace, f.Environment, label)
	}
	return fmt.Sprintf("%s: %s", label, n.Event)
}
