package audit_test

import (
	"encoding/json"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"gantry/models/audit"
)

var (
	actionLiteral = regexp.MustCompile(`(?:Action: +|action :?= )"([a-z_]+\.[a-z_]+)"`)
	runState      = regexp.MustCompile(`(?m)^\s+[A-Za-z]+ +State = "([A-Z_]+)"`)
)

// TestEveryRecordedActionHasWords: every action the code records (a literal given to
// audit.Entry, or a run state, recorded as run.<state>) is in the vocabulary the
// history's filter and sentences use. A planted unknown action is caught.
func TestEveryRecordedActionHasWords(t *testing.T) {
	root := filepath.Join("..", "..")
	found := map[string]string{}
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (d.Name() == ".data" || d.Name() == "tools" || strings.HasPrefix(d.Name(), ".")) && path != root {
			return filepath.SkipDir
		}
		if d.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		src, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		for _, m := range actionLiteral.FindAllStringSubmatch(string(src), -1) {
			found[m[1]] = path
		}
		if strings.HasSuffix(path, filepath.Join("models", "run", "state.go")) {
			for _, m := range runState.FindAllStringSubmatch(string(src), -1) {
				found["run."+strings.ToLower(m[1])] = path
			}
		}
		return nil
	})
	require.NoError(t, err)
	require.Greater(t, len(found), 40, "the walk found the recorded actions")
	require.Contains(t, found, "run.apply_interrupted")
	require.Contains(t, found, "policy.overridden")
	for action, path := range found {
		require.True(t, audit.KnownAction(action), "%s (recorded in %s) has no words in audit.Actions", action, path)
	}
	require.False(t, audit.KnownAction("planted.action"))

	// And each reads as a sentence that is not the fallback.
	for _, a := range audit.Actions {
		s := audit.Describe(audit.Event{Action: a.Code, ActorID: "usr-1", ActorName: "Ann", TargetType: "thing", TargetID: "x",
			Data: json.RawMessage(`{}`), OccurredAt: time.Now()}, audit.Names{})
		require.NotContains(t, s.Verb, "recorded", a.Code)
		require.NotEmpty(t, s.String())
		// People read these: permission names in words, never their codes.
		require.NotRegexp(t, `cloud\.live|provisioning\.`, a.Label+" / "+s.String(), a.Code)
	}
}

// TestDescribeMarksSelfApproval: the history's sentence of an approval its audit event
// records as the requester's own says so; any other approval does not.
func TestDescribeMarksSelfApproval(t *testing.T) {
	approved := func(data string) audit.Event {
		return audit.Event{Action: "run.approved", ActorID: "usr-olivia", ActorName: "Olivia", TargetType: "run", TargetID: "run-1",
			RunID: "run-1", Data: json.RawMessage(data)}
	}
	self := audit.Describe(approved(`{"number":3,"reason":"approved by Olivia","self_approved":true}`), audit.Names{}).String()
	require.Equal(t, "Olivia approved run #3 (approved by Olivia) [self-approved: the requester approved their own run]", self)
	other := audit.Describe(approved(`{"number":3,"reason":"approved by Olivia"}`), audit.Names{}).String()
	require.Equal(t, "Olivia approved run #3 (approved by Olivia)", other)
}

// TestDescribeAStoppedApply: the record of a cancelled apply's stop says whether the
// apply wrote state, never "moved to APPLY_STOPPED" (no such state exists).
func TestDescribeAStoppedApply(t *testing.T) {
	stopped := func(data string) string {
		return audit.Describe(audit.Event{Action: "run.apply_stopped", ActorID: "system", TargetType: "run", TargetID: "run-1", RunID: "run-1",
			Data: json.RawMessage(data)}, audit.Names{}).String()
	}
	require.Equal(t, "Gantry stopped the cancelled apply of run #4 (the state it wrote is stored)", stopped(`{"number":4,"state_written":true}`))
	require.Equal(t, "Gantry stopped the cancelled apply of run #4 (it wrote no state)", stopped(`{"number":4,"state_written":false}`))
}

// TestDescribeSaysRunStatesInWords: a run's move reads in the words its badge shows
// (audit.Names.RunStates), the stored action staying coded; without words the code.
func TestDescribeSaysRunStatesInWords(t *testing.T) {
	moved := audit.Event{Action: "run.pending_approval", ActorID: "system", TargetType: "run", TargetID: "run-1", RunID: "run-1",
		Data: json.RawMessage(`{"number":3}`)}
	words := map[string]string{"PENDING_APPROVAL": "Waiting for approval"}
	said := audit.Describe(moved, audit.Names{RunStates: func(code string) string { return words[code] }}).String()
	require.Equal(t, "Gantry moved run #3 to “Waiting for approval”", said)
	require.Equal(t, "run.pending_approval", moved.Action)
	require.Equal(t, "Gantry moved run #3 to “PENDING_APPROVAL”", audit.Describe(moved, audit.Names{}).String())
}
