package main

import (
	"bytes"
	"slices"
	"testing"

	"github.com/stretchr/testify/require"

	"gantry/models/breakglass"
)

// TestBreakglassDecisionWindowFlag: an emergency waits minutes, not days, for its
// decision: --breakglass-decision-window defaults to breakglass.DefaultDecisionWindow
// (said in --help), takes $GANTRY_BREAKGLASS_DECISION_WINDOW, and a value out of its
// bounds is refused at start, before the database is reached, by serve and dev alike.
func TestBreakglassDecisionWindowFlag(t *testing.T) {
	var out, errOut bytes.Buffer
	require.Equal(t, 0, run([]string{"help", "serve"}, &out, &errOut))
	require.Contains(t, out.String(), "-breakglass-decision-window duration")
	require.Contains(t, out.String(), "$GANTRY_BREAKGLASS_DECISION_WINDOW) (default "+breakglass.DefaultDecisionWindow.String()+")")
	require.Equal(t, "30m0s", breakglass.DefaultDecisionWindow.String(), "the default is minutes")

	base := []string{"serve", "--database-url", "postgres://nobody@127.0.0.1:1/none", "--base-url", "http://x", "--oidc-issuer", "http://idp", "--oidc-client-id", "c"}
	for _, bad := range []string{"168h", "90s", "2m", "30m30s"} {
		out.Reset()
		errOut.Reset()
		require.Equal(t, 1, run(append(slices.Clone(base), "--breakglass-decision-window", bad), &out, &errOut), bad)
		require.Contains(t, errOut.String(), "--breakglass-decision-window: a break-glass decision window of", bad)
		require.NotContains(t, errOut.String(), "connect", "refused before reaching the database")
	}
	out.Reset()
	errOut.Reset()
	t.Setenv("GANTRY_BREAKGLASS_DECISION_WINDOW", "72h")
	require.Equal(t, 1, run(slices.Clone(base), &out, &errOut))
	require.Contains(t, errOut.String(), "decision window of 72h0m0s")
	out.Reset()
	errOut.Reset()
	require.Equal(t, 1, run([]string{"dev", "--addr", "127.0.0.1:0"}, &out, &errOut))
	require.Contains(t, errOut.String(), "--breakglass-decision-window")
}
