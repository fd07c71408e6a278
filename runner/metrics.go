package runner

import (
	"context"
	"encoding/json"
	"time"

	"github.com/riverqueue/river"
	"github.com/riverqueue/river/rivertype"

	"gantry/telemetry"
)

// timedRunner reports how long its executor takes for each phase (telemetry).
type timedRunner struct {
	Runner
	metrics *telemetry.Metrics
}

// timed wraps every runner of rs so its phases are measured; rs itself is not changed.
func timed(rs RunnerSet, m *telemetry.Metrics) RunnerSet {
	if m == nil {
		return rs
	}
	out := make(RunnerSet, len(rs))
	for name, r := range rs {
		out[name] = timedRunner{Runner: r, metrics: m}
	}
	return out
}

func (t timedRunner) Plan(ctx context.Context, req PlanRequest) (PlanResult, error) {
	start := time.Now()
	res, err := t.Runner.Plan(ctx, req)
	t.metrics.ObservePhase("plan", t.Name(), err != nil, time.Since(start))
	return res, err
}

func (t timedRunner) Apply(ctx context.Context, req ApplyRequest) (ApplyResult, error) {
	start := time.Now()
	res, err := t.Runner.Apply(ctx, req)
	t.metrics.ObservePhase("apply", t.Name(), err != nil, time.Since(start))
	return res, err
}

func (t timedRunner) Verify(ctx context.Context, req VerifyRequest) (VerifyResult, error) {
	start := time.Now()
	res, err := t.Runner.Verify(ctx, req)
	t.metrics.ObservePhase("verify", t.Name(), err != nil, time.Since(start))
	return res, err
}

// Preparing passes on the wrapped runner's preparation (an executor still being built).
func (t timedRunner) Preparing() (Preparation, bool) {
	if p, ok := t.Runner.(Preparing); ok {
		return p.Preparing()
	}
	return Preparation{}, false
}

// queueLatency is River worker middleware that reports how long each job waited
// between being due and being started, by kind.
type queueLatency struct {
	river.WorkerMiddlewareDefaults
	metrics *telemetry.Metrics
}

func (q *queueLatency) Work(ctx context.Context, job *rivertype.JobRow, doInner func(context.Context) error) error {
	started := time.Now()
	if job.AttemptedAt != nil {
		started = *job.AttemptedAt
	}
	q.metrics.ObserveQueueLatency(job.Kind, started.Sub(job.ScheduledAt))
	return doInner(ctx)
}

// logContext is River worker middleware that makes every line a job's work logs (with
// its context) carry the job's kind and id and, for a run's job, the run's id.
type logContext struct {
	river.WorkerMiddlewareDefaults
}

func (*logContext) Work(ctx context.Context, job *rivertype.JobRow, doInner func(context.Context) error) error {
	args := []any{"job_kind", job.Kind, "job_id", job.ID}
	var ids struct {
		RunID       string `json:"run_id"`
		WorkspaceID string `json:"workspace_id"`
	}
	if json.Unmarshal(job.EncodedArgs, &ids) == nil {
		if ids.RunID != "" {
			args = append(args, "run_id", ids.RunID)
		}
		if ids.WorkspaceID != "" {
			args = append(args, "workspace_id", ids.WorkspaceID)
		}
	}
	return doInner(telemetry.WithLog(ctx, args...))
}
