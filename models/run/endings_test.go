package run

import (
	"errors"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestEveryEndHasACode: each state a run can end in (the terminal ones, a hard policy
// block, an interrupted apply) has at least one code, and each code belongs to such
// states only.
func TestEveryEndHasACode(t *testing.T) {
	t.Parallel()
	hard := Run{PolicyOutcome: "hard_failed"}
	for _, s := range States {
		ends := endsAfter(hard, s)
		var codes []Ending
		for _, e := range Endings() {
			if e.EndsIn(s) {
				codes = append(codes, e)
			}
		}
		require.Equal(t, ends, len(codes) > 0, "%s: ends a run %v, codes %v", s, ends, codes)
	}
	require.False(t, endsAfter(Run{}, PolicyBlocked), "a soft block waits for a person: no ending")
}

// wantEndings is every path into an ending in this package's code, by the call that
// makes it (file: state and code). TestEveryEndingPathHasItsCode reads the code and
// fails on a path that is not listed here, or listed and gone.
var wantEndings = map[string][]string{
	"apply.go":        {"ApplyInterrupted EndApplyInterrupted", "Expired EndWindowOpened", "Stale EndStateMoved", "Failed EndApplyFailed"},
	"deadlines.go":    {"Expired EndApprovalExpired"},
	"decisions.go":    {"Expired EndApprovalExpired", "Expired EndApprovalVoided"},
	"drift_checks.go": {"Expired EndWindowOpened", "Stale EndWindowOpened"},
	"lease.go":        {"ApplyInterrupted EndApplyInterrupted"},
	"queue.go":        {"Expired EndApprovalValidityEnded"}, // both ways an approval runs out before its apply
	"run.go":          {"Rejected EndRejected", "ApplyInterrupted EndApplyCancelled", "Cancelled EndCancelled", "Failed EndApplyRefused", "Failed EndRecovered"},
	"stale.go":        {"Stale EndStateMoved"},
	"verify.go":       {"Failed EndDriftAfterApply", "Succeeded EndVerified"},
	"work.go": {"Stale EndStateMoved", "Stale EndStateMoved", "Stale EndWindowOpened", "Planned EndPlanOnly", "NoChanges EndNoChanges",
		"PolicyBlocked EndPolicyHardBlocked", "PolicyBlocked \"\"", "to code", "PendingApproval \"\"", "Failed failedIn(phase)"},
}

// stateNames are the states by their Go names, as the calls spell them.
var stateNames = map[string]State{"Queued": Queued, "Planning": Planning, "Planned": Planned, "NoChanges": NoChanges,
	"PolicyBlocked": PolicyBlocked, "PendingApproval": PendingApproval, "Approved": Approved, "Running": Running,
	"Verifying": Verifying, "Succeeded": Succeeded, "Failed": Failed, "Rejected": Rejected, "Cancelled": Cancelled,
	"Expired": Expired, "Stale": Stale, "ApplyInterrupted": ApplyInterrupted}

// TestEveryEndingPathHasItsCode reads the package's calls to end and FinishPlanAs (the
// only ways into an ending) and to transition (which must never target one): every path
// into a terminal state is in wantEndings with its code.
func TestEveryEndingPathHasItsCode(t *testing.T) {
	t.Parallel()
	got := map[string][]string{}
	files, err := filepath.Glob("*.go")
	require.NoError(t, err)
	fset := token.NewFileSet()
	for _, name := range files {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		src, err := os.ReadFile(name)
		require.NoError(t, err)
		f, err := parser.ParseFile(fset, name, src, 0)
		require.NoError(t, err)
		text := func(e ast.Expr) string {
			return string(src[fset.Position(e.Pos()).Offset:fset.Position(e.End()).Offset])
		}
		ast.Inspect(f, func(n ast.Node) bool {
			call, ok := n.(*ast.CallExpr)
			if !ok {
				return true
			}
			sel, ok := call.Fun.(*ast.SelectorExpr)
			if !ok {
				return true
			}
			switch sel.Sel.Name {
			case "end", "FinishPlanAs":
				if len(call.Args) == 3 {
					got[name] = append(got[name], text(call.Args[0])+" "+text(call.Args[1]))
				}
			case "transition":
				if s, ok := stateNames[text(call.Args[0])]; ok && len(call.Args) == 2 {
					require.False(t, s != PolicyBlocked && endsAfter(Run{}, s),
						"%s: transition(%s) ends the run without a code: use end", name, text(call.Args[0]))
				}
			}
			return true
		})
	}
	for name := range got {
		slices.Sort(got[name])
	}
	want := map[string][]string{}
	for name, paths := range wantEndings {
		want[name] = slices.Sorted(slices.Values(paths))
	}
	require.Equal(t, want, got, "a path into an ending is new or gone: list it in wantEndings with its code")
}

// TestAMoveThatEndsNeedsItsCode: an ending without its code, with a code of another
// state, or a code on a move that does not end the run are refused; the code is kept
// on the run and in the move's audit data.
func TestAMoveThatEndsNeedsItsCode(t *testing.T) {
	t.Parallel()
	r := Run{State: Verifying}
	require.ErrorIs(t, r.transition(Succeeded, "verified"), ErrInvalidTransition, "no code")
	require.ErrorIs(t, r.end(Succeeded, EndRejected, "verified"), ErrInvalidTransition, "another state's code")
	require.ErrorIs(t, (&Run{State: Approved}).end(Running, EndVerified, ""), ErrInvalidTransition, "a code on a move that does not end")
	hard := Run{State: Planning, PolicyOutcome: "hard_failed"}
	require.ErrorIs(t, hard.FinishPlanAs(PolicyBlocked, "", "blocked"), ErrInvalidTransition, "a hard block without its code")
	soft := Run{State: Planning, PolicyOutcome: "soft_failed"}
	require.ErrorIs(t, soft.FinishPlanAs(PolicyBlocked, EndPolicyHardBlocked, "blocked"), ErrInvalidTransition, "a soft block does not end")
	require.NoError(t, soft.FinishPlanAs(PolicyBlocked, "", "blocked"))
	require.Empty(t, soft.Ending)

	require.NoError(t, r.end(Succeeded, EndVerified, "applied and verified"))
	require.Equal(t, EndVerified, r.Ending)
	require.Equal(t, "VERIFIED", r.moves.Last().Data["ending"])

	now := time.Now()
	d := Decider{UserID: "u-1", Name: "Ada"}
	for name, c := range map[string]struct {
		run  Run
		do   func(*Run) error
		want Ending
	}{
		"cancel":  {Run{State: Queued}, func(r *Run) error { return r.Cancel(d, "", now) }, EndCancelled},
		"refuse":  {Run{State: Approved}, func(r *Run) error { return r.RefuseApply("policy changed") }, EndApplyRefused},
		"recover": {Run{State: ApplyInterrupted, Ending: EndApplyInterrupted}, func(r *Run) error { return r.Recover(d, "checked") }, EndRecovered},
	} {
		run := c.run
		require.NoError(t, c.do(&run), name)
		require.Equal(t, c.want, run.Ending, name)
		require.Equal(t, string(c.want), run.moves.Last().Data["ending"], name)
	}
	var te *TransitionError
	require.True(t, errors.As((&Run{State: Succeeded}).Cancel(d, "", now), &te), "nothing moves an ended run")
}
