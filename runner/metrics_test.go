package runner

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"testing"

	"github.com/riverqueue/river/rivertype"
	"github.com/stretchr/testify/require"

	"gantry/telemetry"
)

// TestJobLogLinesCarryTheRunID: what a run's job logs with its context names the job
// and the run, whatever the worker passes itself.
func TestJobLogLinesCarryTheRunID(t *testing.T) {
	t.Parallel()
	var buf bytes.Buffer
	logger := slog.New(telemetry.LogHandler(slog.NewJSONHandler(&buf, nil)))
	job := &rivertype.JobRow{ID: 42, Kind: PlanArgs{}.Kind(), EncodedArgs: []byte(`{"run_id":"run-abc"}`)}
	err := (&logContext{}).Work(context.Background(), job, func(ctx context.Context) error {
		logger.InfoContext(ctx, "planning")
		return nil
	})
	require.NoError(t, err)
	var line map[string]any
	require.NoError(t, json.Unmarshal(buf.Bytes(), &line))
	require.Equal(t, "run-abc", line["run_id"])
	require.Equal(t, "run.plan", line["job_kind"])
	require.EqualValues(t, 42, line["job_id"])
}
