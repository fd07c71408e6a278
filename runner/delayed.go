package runner

import (
	"context"
	"fmt"
	"io"
	"time"
)

// Delayed wraps a runner so each phase starts after d: for demos that should be
// watchable and for tests that need a run to stay in a phase for a moment.
func Delayed(r Runner, d time.Duration) Runner { return delayed{Runner: r, d: d} }

type delayed struct {
	Runner
	d time.Duration
}

// Health, Isolated and Preparing are the wrapped runner's: the executors page, the
// workers and the run pages ask for them.
func (x delayed) Health(ctx context.Context) error {
	if h, ok := x.Runner.(interface{ Health(context.Context) error }); ok {
		return h.Health(ctx)
	}
	return nil
}

func (x delayed) Isolated() bool {
	i, ok := x.Runner.(interface{ Isolated() bool })
	return ok && i.Isolated()
}

func (x delayed) Preparing() (Preparation, bool) {
	if p, ok := x.Runner.(Preparing); ok {
		return p.Preparing()
	}
	return Preparation{}, false
}

// wait waits d, first saying so in the phase's live log: a person watching the run sees
// why nothing happens, and a test sees the phase running in its worker (the line is
// stored once the worker has begun the phase, holding its lease).
func (x delayed) wait(ctx context.Context, log io.Writer, phase string) error {
	if log != nil {
		fmt.Fprintf(log, "# waiting %s before the %s (--runner-delay, for demos and tests)\n", x.d, phase)
	}
	select {
	case <-time.After(x.d):
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (x delayed) Plan(ctx context.Context, req PlanRequest) (PlanResult, error) {
	if err := x.wait(ctx, req.Log, "plan"); err != nil {
		return PlanResult{}, err
	}
	return x.Runner.Plan(ctx, req)
}

func (x delayed) Apply(ctx context.Context, req ApplyRequest) (ApplyResult, error) {
	if err := x.wait(ctx, req.Log, "apply"); err != nil {
		return ApplyResult{}, err
	}
	return x.Runner.Apply(ctx, req)
}

func (x delayed) Verify(ctx context.Context, req VerifyRequest) (VerifyResult, error) {
	if err := x.wait(ctx, req.Log, "verification"); err != nil {
		return VerifyResult{}, err
	}
	return x.Runner.Verify(ctx, req)
}
