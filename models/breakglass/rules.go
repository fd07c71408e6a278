package breakglass

import (
	"fmt"
	"strings"
	"time"

	"gantry/models/authz"
	"gantry/models/environment"
	"gantry/models/errs"
	"gantry/models/run"
	"gantry/models/runport"
)

// The one home of who may do what to a break-glass window. The service enforces it and
// pages show their controls from Permissions only. The clocks are the run rules' own:
// an approval is good for run.ApprovalValidity, like a run's.

// Permissions answers what one person may do to one window now.
type Permissions struct {
	// Visible: the person may see the window (its environment); when false every
	// verdict is NOT_FOUND.
	Visible     bool
	Approve     runport.Verdict
	Reject      runport.Verdict
	Cancel      runport.Verdict
	Open        runport.Verdict
	Credentials runport.Verdict
	End         runport.Verdict
	Codify      runport.Verdict
	Close       runport.Verdict
}

func forbid(msg string) runport.Verdict {
	return runport.VerdictOf(errs.Explain(errs.ErrForbidden, msg))
}
func conflict(msg string) runport.Verdict {
	return runport.VerdictOf(errs.Explain(errs.ErrConflict, msg))
}

var allowed = runport.VerdictOf(nil)

// PermissionsOf answers what a may do to window w of environment env at now (the
// database clock): visibility first (404 beats 403), then who the person is, then the
// window's state and clocks.
func PermissionsOf(w Window, a run.Actor, env environment.Environment, now time.Time) Permissions {
	var p Permissions
	if a.OrganizationID != w.OrganizationID || !environment.Visible(env, a.Role, a.Granted) {
		hidden := runport.VerdictOf(fmt.Errorf("break-glass window %s: %w", w.ID, errs.ErrNotFound))
		p.Approve, p.Reject, p.Cancel, p.Open, p.Credentials, p.End, p.Codify, p.Close = hidden, hidden, hidden, hidden, hidden, hidden, hidden, hidden
		return p
	}
	p.Visible = true
	requester := a.UserID == w.RequestedBy
	p.Approve = decide(w, a, now, true)
	p.Reject = decide(w, a, now, false)
	switch {
	case !a.Can(authz.PermProvisioningPlan) || (!requester && !a.Role.AtLeast(authz.RoleAdmin)):
		p.Cancel = forbid("Only who asked for the window, or an admin, may cancel it.")
	case w.State != Requested && w.State != Approved:
		p.Cancel = conflict(fmt.Sprintf("A window that is %s cannot be cancelled.", w.State.Label()))
	default:
		p.Cancel = allowed
	}
	p.Open = personal(w, a, Approved, "open")
	if p.Open.Allowed() && w.ApprovalExpiresAt != nil && !now.Before(*w.ApprovalExpiresAt) {
		p.Open = runport.VerdictOf(errs.Explain(errs.ErrApprovalExpired, fmt.Sprintf("The approval expired at %s: the window was not opened within %d minutes. Ask again.",
			w.ApprovalExpiresAt.UTC().Format("15:04:05 UTC"), int(run.ApprovalValidity.Minutes()))))
	}
	p.Credentials = personal(w, a, Open, "get credentials for")
	if p.Credentials.Allowed() && w.EndsAt != nil && !now.Before(*w.EndsAt) {
		p.Credentials = conflict("The window's time is up: it is closing.")
	}
	switch {
	case !a.Can(authz.PermProvisioningPlan) || (!requester && !a.Role.AtLeast(authz.RoleAdmin)):
		p.End = forbid("Only who opened the window, or an admin, may end it early.")
	case w.State != Open:
		p.End = conflict(fmt.Sprintf("A window that is %s cannot be ended.", w.State.Label()))
	default:
		p.End = allowed
	}
	switch {
	case !a.Can(authz.PermRunsApply):
		p.Codify = forbid(fmt.Sprintf("Your role (%s) does not request runs that change a workspace.", a.Role))
	case !a.CloudLive:
		p.Codify = forbid("A codification runs on a live executor: it needs the live-cloud entitlement.")
	case w.State != AwaitingCodification:
		p.Codify = conflict(fmt.Sprintf("A window that is %s has nothing to codify.", w.State.Label()))
	default:
		p.Codify = allowed
	}
	switch {
	case !a.Role.AtLeast(authz.RoleOwner) || !a.Can(authz.PermProvisioningApply):
		p.Close = forbid("Closing a window without codifying its change is an owner's decision.")
	case w.State != AwaitingCodification:
		p.Close = conflict(fmt.Sprintf("A window that is %s cannot be closed.", w.State.Label()))
	default:
		p.Close = allowed
	}
	return p
}

// An emergency is decided in minutes, not in the days a run may wait: a request nobody
// decides within the decision window expires (its deadline job, Service.Due) and a
// decision after it is refused. The operator sets the window (gantry serve
// --breakglass-decision-window); these are its default and bounds.
const (
	DefaultDecisionWindow = 30 * time.Minute
	MinDecisionWindow     = 5 * time.Minute
	MaxDecisionWindow     = 24 * time.Hour
)

// CheckDecisionWindow says what is wrong with d as the decision window of break-glass
// requests (nil: nothing): whole minutes from MinDecisionWindow to MaxDecisionWindow.
func CheckDecisionWindow(d time.Duration) error {
	if d < MinDecisionWindow || d > MaxDecisionWindow || d%time.Minute != 0 {
		return fmt.Errorf("a break-glass decision window of %s: want whole minutes from %s to %s", d, MinDecisionWindow, MaxDecisionWindow)
	}
	return nil
}

// MayDecideSome reports whether s is the kind of person who decides on windows at all
// (an admin or owner with provisioning.apply, not Gantry itself): who may decide one
// window is then decide's answer. Lists and counts ask it before reading any window.
func MayDecideSome(s authz.Subject) bool {
	return !s.System && s.Role.AtLeast(authz.RoleAdmin) && s.Can(authz.PermProvisioningApply)
}

// MayDecide reports whether a may approve or reject window w now: the inbox lists it
// for them, counts it and tells them of it.
func (p Permissions) MayDecide() bool { return p.Approve.Allowed() || p.Reject.Allowed() }

// decide is the verdict on approving (or rejecting) a request: an admin or owner with
// provisioning.apply, never the requester, cloud.live to approve (the window changes a
// live cloud), within the decision deadline.
func decide(w Window, a run.Actor, now time.Time, approve bool) runport.Verdict {
	switch {
	case a.System:
		return forbid("Gantry itself never decides for a person.")
	case !MayDecideSome(a.Subject):
		return forbid("A break-glass window is approved or rejected by an admin or owner.")
	case a.UserID == w.RequestedBy:
		return forbid("You asked for this window: four eyes means an admin other than you decides on it.")
	case approve && !a.CloudLive:
		return forbid("The window lets someone change a live cloud by hand: approving it needs the live-cloud entitlement.")
	case w.State == Expired:
		return runport.VerdictOf(errs.Explain(errs.ErrApprovalExpired, "This request has expired: "+w.StateReason+". Ask again."))
	case w.State != Requested:
		return conflict(fmt.Sprintf("This window is %s: there is nothing to decide.", w.State.Label()))
	case !now.Before(w.DecisionDeadline):
		return runport.VerdictOf(errs.Explain(errs.ErrApprovalExpired, "The request's decision window closed at "+w.DecisionDeadline.UTC().Format("2006-01-02 15:04:05 UTC")+": it expires instead. Ask again."))
	}
	return allowed
}

// personal is the verdict on what only the requester does (open the window, get its
// credentials): the person who will change the world by hand, still holding cloud.live.
func personal(w Window, a run.Actor, in State, what string) runport.Verdict {
	switch {
	case a.UserID != w.RequestedBy:
		return forbid(fmt.Sprintf("Only %s, who asked for the window, may %s it.", w.RequestedByName, what))
	case !a.Can(authz.PermRunsApply):
		return forbid(fmt.Sprintf("Your role (%s) no longer changes workspaces.", a.Role))
	case !a.CloudLive:
		return forbid("The window's credentials change a live cloud: that needs the live-cloud entitlement.")
	case w.State != in:
		return conflict(fmt.Sprintf("A window that is %s cannot be %s.", w.State.Label(), map[string]string{"open": "opened", "get credentials for": "given credentials"}[what]))
	}
	return allowed
}

// Request is what a person submits to ask for a window.
type Request struct {
	WorkspaceID string
	Reason      string
	// Duration is the window's length (DefaultDuration when zero).
	Duration time.Duration
}

// check validates a request on its own: field messages, nothing written.
func (r Request) check() *errs.Validation {
	v := &errs.Validation{}
	reason := strings.TrimSpace(r.Reason)
	switch n := len([]rune(reason)); {
	case n < MinReasonLength:
		v.Add("reason", fmt.Sprintf("Say why a manual change is needed, in at least %d characters (an incident, what is broken).", MinReasonLength))
	case n > MaxReasonLength:
		v.Add("reason", fmt.Sprintf("Say it in at most %d characters.", MaxReasonLength))
	case strings.ContainsRune(reason, 0):
		v.Add("reason", "The reason holds a character that cannot be stored.")
	}
	if r.Duration < MinDuration || r.Duration > MaxDuration || r.Duration%time.Minute != 0 {
		v.Add("duration", fmt.Sprintf("Choose a window of %d minutes to %d hours.", int(MinDuration.Minutes()), int(MaxDuration.Hours())))
	}
	return v
}

// permAsk is what asking for a window needs of a person's rights: requesting runs that
// change a workspace. Pages offer the request form from MayAsk.
const permAsk = authz.PermRunsApply

// MayAsk reports whether s holds the rights asking for a window needs (mayRequest then
// asks for a grant and cloud.live too, with a message on the form).
func MayAsk(s authz.Subject) bool { return s.Can(permAsk) }

// mayRequest says whether a may ask for a window in env (field messages): who may
// request runs there, with cloud.live (the window changes a live cloud).
func mayRequest(a run.Actor, env environment.Environment, v *errs.Validation) {
	switch {
	case !a.Can(permAsk):
		v.Add("workspace", fmt.Sprintf("Your role (%s) does not change workspaces.", a.Role))
	case env.Restricted && environment.NeedsGrant(a.Role) && !a.Granted:
		v.Add("workspace", fmt.Sprintf("Environment %s is restricted and you have no grant for it. Ask an admin.", env.Name))
	case !a.CloudLive:
		v.Add("workspace", "A break-glass window changes a live cloud by hand: that needs the live-cloud entitlement, which owners grant on the members page.")
	}
}

// checkCloseReason requires an owner's reason for closing a window uncodified.
func checkCloseReason(reason string) error {
	if n := len([]rune(strings.TrimSpace(reason))); n < MinReasonLength || n > MaxReasonLength {
		v := &errs.Validation{}
		v.Add("reason", fmt.Sprintf("Say why the change is not codified, in %d to %d characters.", MinReasonLength, MaxReasonLength))
		return v
	}
	return nil
}

// checkRejectReason requires a reason for a rejection.
func checkRejectReason(reason string) error {
	if n := len([]rune(strings.TrimSpace(reason))); n < 1 || n > MaxReasonLength {
		v := &errs.Validation{}
		v.Add("reason", "Say why you reject this window.")
		return v
	}
	return nil
}
