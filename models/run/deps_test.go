package run_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"gantry/models/run"
)

// TestNewNamesWhatIsMissing: a run service is never built half-wired; the error
// names every missing dependency, in the Config's order, and only those.
func TestNewNamesWhatIsMissing(t *testing.T) {
	_, err := run.New(run.Config{})
	require.EqualError(t, err, "run: missing [DB Audit Artifacts Enqueuer Catalog StateAddress Environments Members "+
		"Workspaces States Fencer Matrix Policies Attestor Notifier Keys Windows]")

	_, err = run.New(run.Config{StateAddress: func(string, string) string { return "" }})
	require.EqualError(t, err, "run: missing [DB Audit Artifacts Enqueuer Catalog Environments Members "+
		"Workspaces States Fencer Matrix Policies Attestor Notifier Keys Windows]")
}
