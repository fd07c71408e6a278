package secret_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"log/slog"
	"testing"

	"github.com/stretchr/testify/require"

	"gantry/models/secret"
)

// TestVariablesNeverPrint: variables formatted, logged or encoded show no value, on
// their own or inside a struct that holds them.
func TestVariablesNeverPrint(t *testing.T) {
	t.Parallel()
	v := secret.Variables{"note": "note-CANARY", "count": "4242CANARY"}
	holder := struct{ Variables secret.Variables }{v}
	var buf bytes.Buffer
	slog.New(slog.NewJSONHandler(&buf, nil)).Info("job", "vars", v, "holder", holder)
	slog.New(slog.NewTextHandler(&buf, nil)).Info("job", "vars", v, "holder", holder)
	encoded, err := json.Marshal(map[string]any{"vars": v, "holder": holder})
	require.NoError(t, err)
	for _, s := range []string{fmt.Sprintf("%v %+v %#v %s", v, v, v, v), fmt.Sprintf("%v %+v %#v", holder, holder, holder),
		buf.String(), string(encoded)} {
		require.NotContains(t, s, "CANARY")
	}
	require.Contains(t, string(encoded), "[variables redacted]", "the JSON says the values were there")
}
