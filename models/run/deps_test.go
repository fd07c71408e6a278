package run_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"gantry/models/run"
)

// TestNewServiceNamesWhatIsMissing: a run service is never built half-wired; the error
// names every missing dependency, in the Config's order, and only those.
func TestNewServiceNamesWhatIsMissing(t *testing.T) {
	_, err := run.NewService(run.Config{})
	require.EqualError(t, err, "run service: missing [DB Audit Artifacts Enqueuer Catalog StateAddress Environments Members "+
		"Workspaces States Fencer Matrix Policies Attestor Notifier Keys Windows]")

	_, err = run.NewService(run.Config{StateAddress: func(string, string) string { return "" }})
	require.EqualError(t, err, "run service: missing [DB Audit Artifacts Enqueuer Catalog Environments Members "+
		"Workspaces States Fencer Matrix Policies Attestor Notifier Keys Windows]")
}
