package telemetry_test

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"gantry/telemetry"
)

// TestLogLinesCarryTheirContextsIDs: a line logged with a context carries what WithLog
// put into it (nested contexts add up), through WithAttrs too; a line logged without
// one carries nothing of it.
func TestLogLinesCarryTheirContextsIDs(t *testing.T) {
	t.Parallel()
	var buf bytes.Buffer
	logger := slog.New(telemetry.LogHandler(slog.NewJSONHandler(&buf, nil))).With("component", "test")
	ctx := telemetry.WithLog(context.Background(), "request_id", "req-1")
	ctx = telemetry.WithLog(ctx, slog.String("run_id", "run-1"))
	logger.InfoContext(ctx, "working", "step", 1)
	logger.Info("no context")
	lines := strings.Split(strings.TrimSpace(buf.String()), "\n")
	require.Len(t, lines, 2)
	var first, second map[string]any
	require.NoError(t, json.Unmarshal([]byte(lines[0]), &first))
	require.NoError(t, json.Unmarshal([]byte(lines[1]), &second))
	require.Equal(t, "req-1", first["request_id"])
	require.Equal(t, "run-1", first["run_id"])
	require.Equal(t, "test", first["component"])
	require.EqualValues(t, 1, first["step"])
	require.NotContains(t, second, "run_id")
	require.NotContains(t, second, "request_id")
}
