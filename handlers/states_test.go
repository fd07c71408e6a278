package handlers

import (
	"os"
	"regexp"
	"testing"

	"github.com/stretchr/testify/require"

	"gantry/models/breakglass"
	"gantry/models/run"
	"gantry/policies"
	"gantry/views"
)

// TestEveryRunStateHasATone: every state of the run table reads as something on a page
// (a state added to run.States without a tone here would show a plain badge), in its
// words with its code beside them for data attributes, and the answers a page asks of a
// state are the rules' own: waiting for approval is PENDING_APPROVAL, waiting for an
// override a soft policy block only.
func TestEveryRunStateHasATone(t *testing.T) {
	for _, s := range run.States {
		tone, ok := runTones[s]
		require.True(t, ok, "run state %s has no tone", s)
		require.NotEqual(t, views.TonePlain, tone, s)
		v := stateOf(s)
		require.Equal(t, string(s), v.Code)
		require.Equal(t, s.Words(), v.Words)
		require.NotEqual(t, v.Code, v.Words, "run state %s shows its code to people", s)
		require.Equal(t, s == run.PendingApproval, v.AwaitsApproval, s)
	}
	require.Len(t, runTones, len(run.States), "a tone for a state the table does not know")
	require.Equal(t, "Waiting for approval", stateOf(run.PendingApproval).Words)
	require.Equal(t, "Blocked by policy", stateOf(run.PolicyBlocked).Words)

	soft := run.Run{State: run.PolicyBlocked, PolicyOutcome: "soft_failed"}
	hard := run.Run{State: run.PolicyBlocked, PolicyOutcome: "hard_failed"}
	require.True(t, runState(soft).AwaitsOverride)
	require.False(t, runState(hard).AwaitsOverride, "a hard block is final: nothing to override")
	require.False(t, runState(run.Run{State: run.PendingApproval}).AwaitsOverride)

	for _, k := range run.Kinds {
		v := kindOf(k)
		require.Equal(t, string(k), v.Code)
		require.NotEqual(t, v.Code, v.Words, "kind %s shows its code to people", k)
	}
	require.Equal(t, "Dry run", kindOf(run.KindPlanOnly).Words)
}

// TestEveryPolicyOutcomeHasWords: every outcome policies/evaluate.go declares reads as
// words of its own with a tone, its code kept for data attributes; found by reading
// the declarations, so an outcome added there without words fails here.
func TestEveryPolicyOutcomeHasWords(t *testing.T) {
	src, err := os.ReadFile("../policies/evaluate.go")
	require.NoError(t, err)
	declared := regexp.MustCompile(`(?m)^\s+Outcome[A-Za-z]+ +Outcome = "([a-z_]+)"`).FindAllStringSubmatch(string(src), -1)
	require.Len(t, declared, 4, "the scan finds the outcomes of policies/evaluate.go")
	words := map[string]string{}
	for _, m := range declared {
		v := outcomeOf(m[1])
		_, ok := policyOutcomes[policies.Outcome(m[1])]
		require.True(t, ok, "policy outcome %s has no words", m[1])
		require.Equal(t, m[1], v.Code)
		require.NotEqual(t, views.TonePlain, v.Tone, m[1])
		require.NotContains(t, v.Words, "_", m[1])
		require.NotContains(t, words, v.Words, "outcomes %s and %s read the same", words[v.Words], m[1])
		words[v.Words] = m[1]
	}
	require.Len(t, policyOutcomes, len(declared))
	require.Equal(t, "Failed, may be overridden", outcomeOf(string(policies.OutcomeSoft)).Words)
	require.Equal(t, "Not evaluated", outcomeOf("").Words)

	open := windowState(breakglass.AwaitingCodification)
	require.Equal(t, views.Coded{Words: "Awaiting codification", Code: "AWAITING_CODIFICATION", Tone: views.ToneWait}, open)
}
