package run

import (
	"fmt"
	"strings"
	"time"

	"gantry/models/authz"
	"gantry/models/environment"
	"gantry/models/errs"
	"gantry/models/risk"
	"gantry/models/runport"
)

// The one home of the decision rules (DESIGN §3, §4). Services enforce them, handlers
// and views show controls from Permissions only, and every duration a page mentions
// comes from the constants here.

// Clocks of the gates (DESIGN §3 "Clocks").
const (
	// DefaultDecisionWindow is the decision window of an environment that sets none
	// (the environments.decision_window_hours default); each environment sets its own,
	// 1 to 720 hours.
	DefaultDecisionWindow = environment.DefaultDecisionWindowHours * time.Hour
	// ApprovalValidity is how long an approval stays good: the apply must start within it.
	ApprovalValidity = 15 * time.Minute
	// ElevationWindow is how recent a sign-in at the provider must be for an elevated
	// (risk 3) decision.
	ElevationWindow = 15 * time.Minute
	// DefaultEscalateAfter is the waiting time of a matrix row that names an escalation
	// but was saved before rows carried their own.
	DefaultEscalateAfter = 4 * time.Hour
)

// What an elevated decision asks of the person, and what a reason must be.
const (
	// ConfirmWord must be typed to approve a decision that destroys or loses data.
	ConfirmWord = "DESTROY"
	// MinReasonLength is the least length of an elevated approval's and an override's reason.
	MinReasonLength = 10
)

// Floors are what no approval matrix can lower (DESIGN §3): destroys and the replace
// or destroy of an irreversible resource are risk 3, decided by an owner, freshly
// signed in, typing DESTROY with a reason, never the requester; any change in
// production is risk 2 or more. The matrix store refuses edits below them and every
// plan is assessed with the matrix raised to them.
var Floors = risk.Floors{
	Classes: map[risk.Condition]risk.Class{risk.CondDestroy: 3, risk.CondIrreversible: 3, risk.CondProduction: 2},
	Decisions: map[risk.Level]risk.Decision{
		risk.Level3: {Level: risk.Level3, Approver: risk.ApproverOwner, FourEyes: true, Elevated: true},
	},
}

// codifyFloor: accepting changes made by hand into state (a codification) is always a
// person's decision, never a self-service one, and four eyes always: whoever made the
// changes (among the run's PriorRequesters) does not decide it.
func codifyFloor(r *Run) {
	if r.Kind != KindCodify {
		return
	}
	if !risk.Approver(r.RequiredApprover).Person() {
		r.RequiredApprover = string(risk.ApproverOperator)
	}
	r.FourEyes = true
}

// assessRisk classifies a plan's facts with the organization's matrix, raised to the
// floors.
func assessRisk(m risk.Matrix, f risk.Facts) risk.Assessment { return Floors.Raise(m).Assess(f) }

// Actor is the person asking, as the rules see them: their role and the facts other
// aggregates hold about them for the run's organization and environment.
type Actor struct {
	authz.Subject
	// Granted: an explicit grant on the run's environment.
	Granted bool
	// CloudLive: the cloud.live entitlement (owners grant it per member).
	CloudLive bool
	// Groups: the ID token's groups at the person's last sign-in.
	Groups []string
	// Overrode: the person overrode a policy failure of the run being judged (the
	// policy aggregate's overrides): where four eyes applies they do not also approve it.
	Overrode bool
}

// allowed and refused are the rules' verdicts (runport.Verdict).
func allowed() Verdict          { return runport.VerdictOf(nil) }
func refused(err error) Verdict { return runport.VerdictOf(err) }

// Permissions answers what one person may do to one run now: every control a page
// shows and every check a service makes comes from here.
type Permissions struct {
	// Visible: the person may see the run at all (restricted environments, DESIGN §4);
	// when false every verdict is NOT_FOUND.
	Visible   bool
	Approve   Verdict
	Reject    Verdict
	Override  Verdict
	Cancel    Verdict
	Recover   Verdict
	PlanAgain Verdict
	// Resubmit: "Edit and resubmit", the request form filled in with the run's request
	// to change before asking again (a run that will not apply as asked).
	Resubmit Verdict
	// FreshSignIn: approving (or overriding) is refused only because the person's last
	// sign-in is older than ElevationWindow; a new sign-in would allow it.
	FreshSignIn bool
	// Deciders says who may decide the run now and whether its escalation took effect.
	Deciders Deciders
}

// Deciders is who may decide a run, for the review page and the inbox.
type Deciders struct {
	Decision Requirement
	// Escalated: the run has waited its escalation time (by the database clock), so
	// the escalation's deciders may decide too; EscalatesAt is when that happens.
	Escalated   bool
	EscalatesAt *time.Time
}

// DecidersOf is who decides run r: its approver, and its escalation with when it takes
// effect (without a clock: Escalated is left false).
func DecidersOf(r Run) Deciders {
	return Deciders{Decision: RequirementOf(r), EscalatesAt: escalatesAt(r)}
}

// DecidersAt is who may decide run r at now (the database clock): its approver, and its
// escalation once the run has waited long enough.
func DecidersAt(r Run, now time.Time) Deciders {
	d := DecidersOf(r)
	d.Escalated = d.EscalatesAt != nil && !now.Before(*d.EscalatesAt)
	return d
}

// DestroyDeciders is who decides a destroy run whatever the approval matrix says (the
// floors): the page that asks before a destroy says it before anything is planned.
func DestroyDeciders() Deciders { return DecidersOf(Run{Kind: KindDestroy}) }

// DestroyClass is the least risk class of a destroy run (the floors).
func DestroyClass() risk.Class { return Floors.Classes[risk.CondDestroy] }

// Requirement is what deciding a run requires: the decision row it was routed by, with
// the floors applied again from the run's own facts (so a row recorded before the
// floors, or one a migration backfilled, cannot loosen them).
type Requirement struct {
	Approver      risk.Approver
	FourEyes      bool
	Elevated      bool
	Escalation    risk.Approver
	EscalateAfter time.Duration
}

// RequirementOf is what deciding run r needs from a person.
func RequirementOf(r Run) Requirement {
	d := Requirement{Approver: risk.Approver(r.RequiredApprover), FourEyes: r.FourEyes, Elevated: r.Elevated,
		Escalation: risk.Approver(r.Escalation), EscalateAfter: time.Duration(r.EscalateAfterMinutes) * time.Minute}
	if !d.Approver.Person() {
		// "system" and "none" never wait for a person; a run released by an override
		// always does, and needs at least an operator, never the requester.
		d.Approver, d.FourEyes = risk.ApproverOperator, true
	}
	if r.Kind == KindDestroy || r.PlanSummary.Delete > 0 || (r.RiskClass != nil && *r.RiskClass >= int(risk.MaxClass)) {
		floor := Floors.Decisions[risk.Level3]
		if !d.Approver.AtLeast(floor.Approver) {
			d.Approver = floor.Approver
		}
		d.FourEyes, d.Elevated = true, true
		if d.Escalation != "" && !d.Escalation.AtLeast(floor.Approver) {
			d.Escalation = ""
		}
	}
	if d.Escalation != "" && d.EscalateAfter <= 0 {
		d.EscalateAfter = DefaultEscalateAfter
	}
	return d
}

// RequiredApproverOf names who must decide run r, e.g. "owner" or "environment_owners".
func RequiredApproverOf(r Run) risk.Approver { return RequirementOf(r).Approver }

// escalatesAt is when run r's escalation takes effect (nil: it has none, or is not waiting).
func escalatesAt(r Run) *time.Time {
	d := RequirementOf(r)
	if d.Escalation == "" || r.WaitingSince == nil {
		return nil
	}
	at := r.WaitingSince.Add(d.EscalateAfter)
	return &at
}

// eligible reports whether a may decide r as its approver, or as its escalation once
// the run has waited long enough by now.
func eligible(r Run, a Actor, env environment.Environment, now time.Time) bool {
	d := RequirementOf(r)
	if matches(d.Approver, a, env) {
		return true
	}
	at := escalatesAt(r)
	return at != nil && !now.Before(*at) && matches(d.Escalation, a, env)
}

func matches(who risk.Approver, a Actor, env environment.Environment) bool {
	switch {
	case who.Role():
		return a.Role.AtLeast(authz.Role(who))
	case who == risk.ApproverEnvOwners:
		return env.OwnedBy(a.UserID, a.Groups)
	}
	return false
}

// freshSignIn reports whether a signed in at the provider within ElevationWindow of now.
func freshSignIn(a Actor, now time.Time) bool {
	return !a.AuthenticatedAt.IsZero() && now.Sub(a.AuthenticatedAt) <= ElevationWindow
}

// PermissionsOf answers what a may do to run r in environment env at now (the database
// clock). Visibility comes first (404 beats 403), then who the person is (role, grant,
// named owner or escalation, four eyes, cloud.live), then the state and the clock.
func PermissionsOf(r Run, a Actor, env environment.Environment, now time.Time) Permissions {
	p := Permissions{Deciders: DecidersAt(r, now)}
	if a.OrganizationID != r.OrganizationID || !environment.Visible(env, a.Role, a.Granted) {
		hidden := refused(fmt.Errorf("run %s: %w", r.ID, errs.ErrNotFound))
		p.Approve, p.Reject, p.Override, p.Cancel, p.Recover, p.PlanAgain, p.Resubmit = hidden, hidden, hidden, hidden, hidden, hidden, hidden
		return p
	}
	p.Visible = true
	possible := map[Action]bool{}
	for _, act := range r.Actions() {
		possible[act] = true
	}
	p.Approve = decide(r, a, env, now, ActionApprove, possible[ActionApprove])
	p.Reject = decide(r, a, env, now, ActionReject, possible[ActionReject])
	p.Override = decide(r, a, env, now, ActionOverride, possible[ActionOverride])
	if d := RequirementOf(r); d.Elevated && !freshSignIn(a, now) {
		// Everything else allows it: say what would.
		for _, v := range []*Verdict{&p.Approve, &p.Override} {
			if v.Allowed() {
				*v = refused(errs.Explain(errs.ErrForbidden, fmt.Sprintf("This decision destroys or loses data: it needs a sign-in within the last %d minutes. Use “Sign in again to decide” on the review page.", int(ElevationWindow.Minutes()))))
				p.FreshSignIn = true
			}
		}
	}
	p.Cancel = cancelVerdict(r, a, env, now, possible[ActionCancel])
	p.Recover = recoverVerdict(r, a, possible[ActionRecover])
	p.PlanAgain = planAgainVerdict(r, a, possible[ActionPlanAgain])
	p.Resubmit = resubmitVerdict(r, a)
	return p
}

// decide is the verdict on approving, rejecting or overriding: rejection and override
// need what approving needs (DESIGN §3).
func decide(r Run, a Actor, env environment.Environment, now time.Time, act Action, possible bool) Verdict {
	forbid := func(msg string) Verdict { return refused(errs.Explain(errs.ErrForbidden, msg)) }
	d := RequirementOf(r)
	switch {
	case a.System:
		return forbid("Gantry itself never decides for a person.")
	case !a.Can(authz.PermProvisioningApply):
		return forbid(fmt.Sprintf("Your role (%s) does not decide on runs: operators, admins and owners do.", a.Role))
	case act == ActionOverride && !a.Can(authz.PermPoliciesManage):
		return forbid("Overriding a policy failure needs an admin or owner.")
	case a.TokenID != "" && d.Elevated:
		return forbid("An API token never decides a change that destroys or loses data (risk 3): that needs a person's fresh sign-in.")
	case !eligible(r, a, env, now):
		return forbid(fmt.Sprintf("This run is decided by %s.", Deciders{Decision: d, EscalatesAt: escalatesAt(r)}.Summary()))
	case act == ActionReject && r.RequestedByUser(a.UserID):
		return forbid("You requested this run: you may cancel it, but a rejection is someone else's decision.")
	case d.FourEyes && r.RequestedByUser(a.UserID):
		return forbid("You requested this run: four eyes means someone else decides on it.")
	case act == ActionApprove && d.FourEyes && a.Overrode:
		return forbid("You overrode a policy failure of this run: four eyes means someone else approves it.")
	case act == ActionApprove && r.Live() && !a.CloudLive:
		return forbid("This run acts on a live cloud: approving it needs the live-cloud entitlement, which owners grant on the members page.")
	}
	if v := stateVerdict(r, act, possible); !v.Allowed() {
		return v
	}
	if r.DecisionDeadline != nil && !now.Before(*r.DecisionDeadline) {
		return refused(errs.Explain(errs.ErrApprovalExpired, "The decision window of this run closed at "+r.DecisionDeadline.UTC().Format("2006-01-02 15:04:05 UTC")+": it expires instead. Plan again to decide on a fresh plan."))
	}
	return allowed()
}

// stateVerdict refuses an action the run's state does not allow, with the code that
// says why: a STALE run is stale evidence, an EXPIRED one an expired approval.
func stateVerdict(r Run, act Action, possible bool) Verdict {
	switch {
	case possible:
		return allowed()
	case r.State == Stale:
		return refused(errs.Explain(errs.ErrStaleEvidence, "This run is stale: "+r.StateReason+". Plan again to decide on a fresh plan."))
	case r.State == Expired:
		return refused(errs.Explain(errs.ErrApprovalExpired, "This run has expired: "+r.StateReason+". Plan again to decide on a fresh plan."))
	case r.HardBlocked() && act == ActionOverride:
		return refused(errs.Explain(errs.ErrForbidden, "This run is blocked by a hard-mandatory policy, which is never overridden. Change the request instead."))
	case r.HardBlocked():
		return refused(errs.Explain(errs.ErrConflict, "This run is blocked by a hard-mandatory policy: that is final, nothing but a rejection with a reason moves it. Change the request instead."))
	}
	return refused(errs.Explain(&TransitionError{From: r.State, To: actionTargets[act]}, fmt.Sprintf("A run in the state “%s” cannot be %s.", r.State.Words(), actionPast[act])))
}

var actionTargets = map[Action]State{ActionApprove: Approved, ActionReject: Rejected, ActionOverride: PendingApproval,
	ActionCancel: Cancelled, ActionRecover: Failed, ActionPlanAgain: Queued}

var actionPast = map[Action]string{ActionApprove: "approved", ActionReject: "rejected", ActionOverride: "overridden",
	ActionCancel: "cancelled", ActionRecover: "recovered", ActionPlanAgain: "planned again"}

// cancelVerdict: the requester may cancel her own run (and never reject it); admins
// and owners any run. A run that is applying is stopped halfway, which is a decision
// about real resources: it needs at least what approving the run needed (four eyes
// aside: stopping is never approving), or an admin or owner.
func cancelVerdict(r Run, a Actor, env environment.Environment, now time.Time, possible bool) Verdict {
	if r.State == Running {
		return cancelApplyVerdict(r, a, env, now, possible)
	}
	switch {
	case !a.Can(authz.PermProvisioningPlan):
		return refused(errs.Explain(errs.ErrForbidden, fmt.Sprintf("Your role (%s) does not cancel runs.", a.Role)))
	case r.RequestedBy != a.UserID && !a.Role.AtLeast(authz.RoleAdmin):
		return refused(errs.Explain(errs.ErrForbidden, "Only the requester or an admin may cancel this run."))
	}
	return stateVerdict(r, ActionCancel, possible)
}

// cancelApplyVerdict is cancelVerdict for a run that is applying.
func cancelApplyVerdict(r Run, a Actor, env environment.Environment, now time.Time, possible bool) Verdict {
	forbid := func(msg string) Verdict { return refused(errs.Explain(errs.ErrForbidden, msg)) }
	switch {
	case a.System:
		return forbid("Gantry itself never cancels an apply for a person.")
	case a.Role.AtLeast(authz.RoleAdmin):
	case !a.Can(authz.PermProvisioningApply):
		return forbid(fmt.Sprintf("Your role (%s) does not stop applies: that needs what approving this run needed, or an admin.", a.Role))
	case !eligible(r, a, env, now):
		return forbid(fmt.Sprintf("Stopping this apply needs what approving it needed (%s), or an admin.", Deciders{Decision: RequirementOf(r), EscalatesAt: escalatesAt(r)}.Summary()))
	case r.Live() && !a.CloudLive:
		return forbid("This apply acts on a live cloud: stopping it needs the live-cloud entitlement, as approving it did.")
	}
	return stateVerdict(r, ActionCancel, possible)
}

// recoverVerdict: closing an interrupted apply is an admin's, after checking the workspace.
func recoverVerdict(r Run, a Actor, possible bool) Verdict {
	if !a.Can(authz.PermEnvironmentsManage) {
		return refused(errs.Explain(errs.ErrForbidden, "Recovering an interrupted apply needs an admin or owner."))
	}
	return stateVerdict(r, ActionRecover, possible)
}

// mayRequest says whether a may request a run in env on runner (DESIGN §4): a
// restricted environment needs a grant (admins and owners manage grants), a live
// executor cloud.live. Problems are field messages of the request form.
func mayRequest(a Actor, env environment.Environment, runner RunnerInfo, v *errs.Validation) {
	if env.Restricted && environment.NeedsGrant(a.Role) && !a.Granted {
		v.Add("environment", fmt.Sprintf("Environment %s is restricted and you have no grant for it. Ask an admin.", env.Name))
	}
	if runner.Name != "" && !runner.Simulated && !a.CloudLive {
		v.Add("environment", fmt.Sprintf("Environment %s runs jobs on a live executor (%s): that needs the live-cloud entitlement, which owners grant on the members page.", env.Name, runner.Name))
	}
}

// checkElevation checks what an elevated approval asks beyond the person's rights: the
// word DESTROY typed and a reason of MinReasonLength characters.
func checkElevation(confirm, reason string) error {
	v := &errs.Validation{}
	if strings.TrimSpace(confirm) != ConfirmWord {
		v.Add("confirm", fmt.Sprintf("Type %s to approve a change that destroys or loses data.", ConfirmWord))
	}
	if len([]rune(strings.TrimSpace(reason))) < MinReasonLength {
		v.Add("reason", fmt.Sprintf("Say why, in at least %d characters.", MinReasonLength))
	}
	return v.Err()
}

// checkReason requires a reason of at least min characters on field.
func checkReason(reason string, min int, msg string) error {
	if len([]rune(strings.TrimSpace(reason))) < max(min, 1) {
		v := &errs.Validation{}
		v.Add("reason", msg)
		return v
	}
	return nil
}
