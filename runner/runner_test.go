package runner

import (
	"bytes"
	"encoding/json"
	"fmt"
	"log/slog"
	"testing"

	"github.com/stretchr/testify/require"

	"gantry/models/run"
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

// TestVariablesNeverPrint: a request's sensitive variables formatted, logged or encoded
// show no value, on their own or inside a request.
func TestVariablesNeverPrint(t *testing.T) {
	t.Parallel()
	v := Variables{"note": "note-CANARY", "count": "4242CANARY"}
	plan, verify := PlanRequest{Variables: v}, VerifyRequest{Variables: v}
	var buf bytes.Buffer
	slog.New(slog.NewJSONHandler(&buf, nil)).Info("job", "vars", v, "plan", plan, "verify", verify)
	slog.New(slog.NewTextHandler(&buf, nil)).Info("job", "vars", v, "plan", plan, "verify", verify)
	encoded, err := json.Marshal(map[string]any{"vars": v, "plan": plan, "verify": verify})
	require.NoError(t, err)
	for _, s := range []string{fmt.Sprintf("%v %+v %#v %s", v, v, v, v), fmt.Sprintf("%v %+v %#v", plan, plan, verify), buf.String(), string(encoded)} {
		require.NotContains(t, s, "CANARY")
	}
	// The run package's form of them, which the worker hands on, is as quiet.
	w := run.Variables{"note": "note-CANARY"}
	buf.Reset()
	slog.New(slog.NewJSONHandler(&buf, nil)).Info("work", "vars", w, "work", run.PlanWork{Variables: w})
	encoded, err = json.Marshal(run.VerifyWork{Variables: w})
	require.NoError(t, err)
	for _, s := range []string{fmt.Sprintf("%v %+v %#v", w, w, run.PlanWork{Variables: w}), buf.String(), string(encoded)} {
		require.NotContains(t, s, "CANARY")
	}
}
