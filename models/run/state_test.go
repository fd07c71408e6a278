package run

import (
	"errors"
	"os"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// legal is the DESIGN §2 table written out independently of the code's table.
var legal = map[[2]State]bool{
	{Queued, Planning}: true, {Queued, Cancelled}: true,
	{Planning, Planned}: true, {Planning, NoChanges}: true, {Planning, PolicyBlocked}: true,
	{Planning, PendingApproval}: true, {Planning, Approved}: true, {Planning, Failed}: true, {Planning, Cancelled}: true,
	{Planning, Stale}: true, // the state moved while planning (issue 9)
	// soft blocks only (a hard block is final: Run.Finished)
	{PolicyBlocked, PendingApproval}: true, {PolicyBlocked, Rejected}: true, {PolicyBlocked, Cancelled}: true,
	{PolicyBlocked, Stale}: true, {PolicyBlocked, Expired}: true,
	{PendingApproval, Approved}: true, {PendingApproval, Rejected}: true, {PendingApproval, Cancelled}: true,
	{PendingApproval, Expired}: true, {PendingApproval, Stale}: true,
	{Approved, Running}: true, {Approved, Expired}: true, {Approved, Cancelled}: true, {Approved, Stale}: true,
	{Approved, PendingApproval}: true, // the approver lost the rights before the apply started
	{Running, Verifying}:        true, {Running, Failed}: true, {Running, ApplyInterrupted}: true,
	{Verifying, Succeeded}: true, {Verifying, Failed}: true,
	{ApplyInterrupted, Failed}: true,
}

func TestTransitionTableEveryPair(t *testing.T) {
	t.Parallel()
	allowed := 0
	for _, from := range States {
		for _, to := range States {
			want := legal[[2]State{from, to}]
			require.Equal(t, want, CanTransition(from, to), "%s -> %s", from, to)
			r := &Run{State: from}
			err := r.transition(to, "test")
			if endsAfter(*r, to) {
				err = r.end(to, codeFor(to), "test") // a move that ends the run says why
			}
			if want {
				allowed++
				require.NoError(t, err, "%s -> %s", from, to)
				require.Equal(t, to, r.State)
			} else {
				require.ErrorIs(t, err, ErrInvalidTransition, "%s -> %s", from, to)
				require.Equal(t, from, r.State, "a refused transition changes nothing")
			}
		}
	}
	require.Equal(t, len(legal), allowed)
}

// codeFor is some ending code of state s.
func codeFor(s State) Ending {
	for _, e := range Endings() {
		if e.EndsIn(s) {
			return e
		}
	}
	return ""
}

func TestTerminalStates(t *testing.T) {
	t.Parallel()
	for _, s := range []State{Planned, NoChanges, Succeeded, Failed, Rejected, Cancelled, Expired, Stale} {
		require.True(t, s.Terminal(), s)
	}
	for _, s := range []State{Queued, Planning, PolicyBlocked, PendingApproval, Approved, Running, Verifying, ApplyInterrupted} {
		require.False(t, s.Terminal(), s)
	}
}

func TestActionsFollowTheTable(t *testing.T) {
	t.Parallel()
	actions := func(st State, outcome string) []Action {
		return Run{State: st, Kind: KindApply, PolicyOutcome: outcome}.Actions()
	}
	require.Equal(t, []Action{ActionApprove, ActionReject, ActionCancel}, actions(PendingApproval, "pass"))
	require.Equal(t, []Action{ActionCancel}, actions(Planning, ""), "approving is for waiting runs only")
	require.Equal(t, []Action{ActionCancel}, actions(Approved, "pass"))
	require.Equal(t, []Action{ActionCancel}, actions(Queued, ""))
	require.Equal(t, []Action{ActionCancel}, actions(Running, "pass"), "an apply is stopped: it ends APPLY_INTERRUPTED")
	require.Equal(t, []Action{ActionRecover}, actions(ApplyInterrupted, "pass"))
	require.Empty(t, actions(Verifying, "pass"))
	require.Empty(t, actions(Succeeded, "pass"))
	// A soft block waits for an override, or a rejection; a hard block only for a
	// rejection with its reason (DESIGN §2), never an approval.
	require.Equal(t, []Action{ActionReject, ActionOverride, ActionCancel}, actions(PolicyBlocked, "soft_failed"))
	require.Equal(t, []Action{ActionReject}, actions(PolicyBlocked, "hard_failed"))
	// A run that ended without applying offers planning again, never a decision.
	for _, st := range []State{Stale, Expired, Rejected} {
		require.Equal(t, []Action{ActionPlanAgain}, actions(st, "pass"), st)
	}
	require.Empty(t, Run{State: Stale, Kind: KindPlanOnly}.Actions(), "a dry run is requested again, not planned again")
	for _, st := range []State{Cancelled, Failed, Planned, NoChanges} {
		require.Empty(t, actions(st, "pass"), st)
	}
}

func TestDecisionsBindEvidence(t *testing.T) {
	t.Parallel()
	eval, prior := "pev-1", "sv-1"
	now := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
	waiting := func() *Run {
		return &Run{ID: "run-1", State: PendingApproval, PlanRevision: 2, PlanDigest: "sha256:aa", ConfigDigest: "sha256:cc",
			PriorStateVersionID: &prior, PriorSerial: 4, PriorLineage: "lin", PriorStateDigest: "sha256:ss",
			PolicyEvaluationID: &eval, PolicyResultDigest: "r1", PolicyBundleDigest: "b1"}
	}
	r := waiting()
	good := Evidence{RunID: "run-1", PlanRevision: 2, PlanDigest: "sha256:aa", ConfigDigest: "sha256:cc",
		Predecessor:        Predecessor{VersionID: "sv-1", Serial: 4, Lineage: "lin", Digest: "sha256:ss"},
		PolicyEvaluationID: "pev-1", PolicyResultDigest: "r1", PolicyBundleDigest: "b1"}
	require.Equal(t, good, EvidenceOf(*r))
	// Every field of the binding counts (DESIGN §3).
	for name, edit := range map[string]func(*Evidence){
		"run":                 func(e *Evidence) { e.RunID = "run-2" },
		"plan revision":       func(e *Evidence) { e.PlanRevision = 1 },
		"plan digest":         func(e *Evidence) { e.PlanDigest = "sha256:bb" },
		"config digest":       func(e *Evidence) { e.ConfigDigest = "sha256:dd" },
		"predecessor id":      func(e *Evidence) { e.Predecessor.VersionID = "sv-0" },
		"predecessor serial":  func(e *Evidence) { e.Predecessor.Serial = 3 },
		"predecessor lineage": func(e *Evidence) { e.Predecessor.Lineage = "other" },
		"predecessor digest":  func(e *Evidence) { e.Predecessor.Digest = "sha256:tt" },
		"no predecessor":      func(e *Evidence) { e.Predecessor = Predecessor{VersionID: NoPredecessor} },
		"evaluation":          func(e *Evidence) { e.PolicyEvaluationID = "pev-0" },
		"result digest":       func(e *Evidence) { e.PolicyResultDigest = "r0" },
		"bundle digest":       func(e *Evidence) { e.PolicyBundleDigest = "b0" },
	} {
		ev := good
		edit(&ev)
		require.ErrorIs(t, r.Approve(Decider{UserID: "usr-1", Name: "Ann"}, ev, now), ErrStaleEvidence, name)
		require.Equal(t, PendingApproval, r.State, name)
	}

	require.NoError(t, r.Approve(Decider{UserID: "usr-1", Name: "Ann"}, good, now))
	require.Equal(t, Approved, r.State)
	require.Equal(t, "sha256:aa", r.ApprovedPlanDigest)
	require.Equal(t, "usr-1", *r.ApprovedBy)
	require.Equal(t, now, *r.ApprovedAt, "the approval sets its own time")
	require.Equal(t, now.Add(ApprovalValidity), *r.ApprovalExpiresAt, "and its own validity")

	// Rejection needs a reason, binds the same evidence and stamps no approval fields.
	r2 := waiting()
	require.ErrorIs(t, r2.Reject(Decider{UserID: "usr-2"}, good, "  ", now), ErrReasonRequired)
	stale := good
	stale.ConfigDigest = "sha256:other"
	require.ErrorIs(t, r2.Reject(Decider{UserID: "usr-2"}, stale, "why not", now), ErrStaleEvidence)
	require.NoError(t, r2.Reject(Decider{UserID: "usr-2", Name: "Bob"}, good, "wrong region", now))
	require.Equal(t, Rejected, r2.State)
	require.Nil(t, r2.ApprovedBy)
	require.Empty(t, r2.ApprovedPlanDigest)
	require.Equal(t, "rejected by Bob: wrong region", r2.StateReason)

	// Deciding twice is refused by the table.
	require.True(t, errors.Is(r2.Approve(Decider{UserID: "usr-1"}, good, now), ErrInvalidTransition))

	// A cancellation is not a rejection: it says who, and its reason is optional.
	r3 := waiting()
	require.NoError(t, r3.Cancel(Decider{UserID: "usr-3", Name: "Cat"}, "", now))
	require.Equal(t, Cancelled, r3.State)
	require.Equal(t, "cancelled by Cat", r3.StateReason)
	require.Nil(t, r3.RejectedBy)
	require.Equal(t, "usr-3", *r3.CancelledBy)
}

func TestHardPolicyBlockIsFinal(t *testing.T) {
	t.Parallel()
	hard := Run{State: PolicyBlocked, PolicyOutcome: "hard_failed"}
	require.True(t, hard.Finished())
	require.Equal(t, []Action{ActionReject}, hard.Actions(), "only a rejection, with a reason")
	// Nothing else moves it: not a cancel, not a release, not an approval.
	require.ErrorIs(t, hard.Cancel(Decider{Name: "Ann"}, "tidy up", time.Now()), ErrInvalidTransition)
	require.ErrorIs(t, hard.ReleasePolicyBlock("x"), ErrInvalidTransition)
	require.ErrorIs(t, hard.Approve(Decider{Name: "Ann"}, EvidenceOf(hard), time.Now()), ErrInvalidTransition)
	require.ErrorIs(t, hard.Reject(Decider{Name: "Ann"}, EvidenceOf(hard), " ", time.Now()), ErrReasonRequired)
	require.Equal(t, PolicyBlocked, hard.State)
	// A rejection records why (DESIGN §2) and ends it REJECTED, never approvable.
	require.NoError(t, hard.Reject(Decider{UserID: "usr-1", Name: "Ann"}, EvidenceOf(hard), "region not allowed for us", time.Now()))
	require.Equal(t, Rejected, hard.State)
	require.Equal(t, EndRejected, hard.Ending)
	require.Equal(t, "usr-1", *hard.RejectedBy)
	require.NotContains(t, hard.Actions(), ActionApprove)
	soft := Run{State: PolicyBlocked, PolicyOutcome: "soft_failed"}
	require.False(t, soft.Finished())
	require.Equal(t, []Action{ActionReject, ActionOverride, ActionCancel}, soft.Actions())
	require.NoError(t, soft.ReleasePolicyBlock("overridden"))
	require.Equal(t, PendingApproval, soft.State)
	// Nothing but POLICY_BLOCKED is released by an override.
	require.ErrorIs(t, (&Run{State: Planning}).ReleasePolicyBlock("x"), ErrInvalidTransition)
}

// TestDocumentedLifecycleMatchesTheTable: the lifecycle block in the README and in
// docs/decisions.md (lines "STATE -> NEXT | NEXT") says exactly what the code's table
// allows: every move it lists is in the table, and every move of the table is listed.
func TestDocumentedLifecycleMatchesTheTable(t *testing.T) {
	t.Parallel()
	line := regexp.MustCompile(`^([A-Z_]+)\s+->\s+([A-Z_ |]+?)\s*$`)
	for _, doc := range []string{"../../README.md", "../../docs/decisions.md"} {
		raw, err := os.ReadFile(doc)
		require.NoError(t, err)
		documented := map[State][]State{}
		for _, l := range strings.Split(string(raw), "\n") {
			m := line.FindStringSubmatch(l)
			if m == nil {
				continue
			}
			from := State(m[1])
			require.True(t, from.Valid(), "%s: unknown state %s", doc, from)
			require.NotContains(t, documented, from, "%s: %s listed twice", doc, from)
			for _, to := range strings.Split(m[2], "|") {
				s := State(strings.TrimSpace(to))
				require.True(t, s.Valid(), "%s: unknown state %q", doc, s)
				documented[from] = append(documented[from], s)
			}
		}
		require.Equal(t, transitions, documented, "%s's lifecycle differs from models/run/state.go", doc)
	}
}
