package runner

import (
	"bytes"
	"encoding/json"
	"fmt"
	"log/slog"
	"testing"

	"github.com/stretchr/testify/require"

	"gantry/models/run"
	"gantry/models/secret"
)

// TestCredentialsNeverPrint: credentials formatted or logged show no secret.
func TestCredentialsNeverPrint(t *testing.T) {
	t.Parallel()
	c := Credentials{StateUsername: "cred-1", StatePassword: "pw-CANARY", CloudToken: "tok-CANARY"}
	var buf bytes.Buffer
	slog.New(slog.NewJSONHandler(&buf, nil)).Info("job", "creds", c, "req", PlanRequest{Credentials: c})
	for _, s := range []string{fmt.Sprintf("%v %+v %#v %s", c, c, c, c), buf.String()} {
		require.NotContains(t, s, "CANARY")
	}
}

// TestVariablesInRequestsNeverPrint: a request's sensitive variables (secret.Variables,
// whose own test shows them quiet alone) formatted, logged or encoded inside a request
// show no value.
func TestVariablesInRequestsNeverPrint(t *testing.T) {
	t.Parallel()
	v := secret.Variables{"note": "note-CANARY", "count": "4242CANARY"}
	plan, verify := PlanRequest{Variables: v}, VerifyRequest{Variables: v}
	var buf bytes.Buffer
	slog.New(slog.NewJSONHandler(&buf, nil)).Info("job", "vars", v, "plan", plan, "verify", verify)
	slog.New(slog.NewTextHandler(&buf, nil)).Info("job", "vars", v, "plan", plan, "verify", verify)
	encoded, err := json.Marshal(map[string]any{"vars": v, "plan": plan, "verify": verify})
	require.NoError(t, err)
	for _, s := range []string{fmt.Sprintf("%v %+v %#v %s", v, v, v, v), fmt.Sprintf("%v %+v %#v", plan, plan, verify), buf.String(), string(encoded)} {
		require.NotContains(t, s, "CANARY")
	}
	// The run package's work, which the worker hands on, is as quiet.
	buf.Reset()
	slog.New(slog.NewJSONHandler(&buf, nil)).Info("work", "vars", v, "work", run.PlanWork{Variables: v})
	encoded, err = json.Marshal(run.VerifyWork{Variables: v})
	require.NoError(t, err)
	for _, s := range []string{fmt.Sprintf("%v %+v %#v", v, v, run.PlanWork{Variables: v}), buf.String(), string(encoded)} {
		require.NotContains(t, s, "CANARY")
	}
}
