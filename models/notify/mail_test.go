package notify

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"gantry/models/risk"
)

// TestRunMailWords: a mail says the risk in words, as the badge does; one that waits for
// a decision links the review and says following it decides nothing, while an outcome
// ("applied its changes") only points at the run and asks nothing.
func TestRunMailWords(t *testing.T) {
	t.Parallel()
	deadline := time.Date(2026, 5, 4, 10, 30, 0, 0, time.UTC)
	f := Facts{Label: "orders-db #3", Environment: "staging", Tier: "staging", Template: "postgres", Requester: "Olivia",
		RiskLevel: "1-protected", Create: 1, Deadline: &deadline}
	c := Contact{UserID: "usr-1", Name: "Adam", Email: "admin@acme.test"}
	link := "https://gantry.example/runs/run-1/review"

	waiting := mailFor(Notice{ID: "ntf-1", Event: DecisionWaiting, RunID: "run-1"}, f, c, link, "").Text
	require.Contains(t, waiting, "Risk:          1 · low, in a protected environment\n")
	require.NotContains(t, waiting, "1-protected")
	require.Contains(t, waiting, "Decide by:     2026-05-04 10:30 UTC\n")
	require.Contains(t, waiting, "Review it: "+link+"\n")
	require.Contains(t, waiting, "Nothing is decided by following this link")

	applied := mailFor(Notice{ID: "ntf-2", Event: RunApplied, RunID: "run-1"}, f, c, link, "").Text
	require.Contains(t, applied, "See the run: "+link+"\n")
	for _, asks := range []string{"Review it", "Nothing is decided", "Decide by"} {
		require.NotContains(t, applied, asks, "an outcome asks nothing of its reader")
	}
	for _, level := range risk.Levels {
		require.NotEmpty(t, riskWords[string(level)], "risk level %s has words for mail", level)
	}
}
