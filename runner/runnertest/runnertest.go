// Package runnertest keeps a run still where a test needs it, with no clock: a runner
// whose plans and applies wait at gates the test holds, and apply job hooks that say
// when an apply found its workspace busy and hold a run's next attempt before it
// begins. The test releases what it held; its end releases everything.
package runnertest

import (
	"context"
	"errors"
	"sync"
	"testing"

	"gantry/models/run"
	"gantry/runner"
)

// Gate holds what waits at it until the test releases it. Entered is closed once
// something waits there.
type Gate struct {
	Entered chan struct{}
	open    chan struct{}
	entered sync.Once
	release sync.Once
}

// NewGate returns a closed gate, released when t ends at the latest.
func NewGate(t testing.TB) *Gate {
	g := &Gate{Entered: make(chan struct{}), open: make(chan struct{})}
	t.Cleanup(g.Release)
	return g
}

// Wait holds the caller until the gate is released or ctx ends (its error then).
func (g *Gate) Wait(ctx context.Context) error {
	g.entered.Do(func() { close(g.Entered) })
	select {
	case <-g.open:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Release lets whatever waits (or comes to wait) at the gate go on.
func (g *Gate) Release() { g.release.Do(func() { close(g.open) }) }

// Phases is a runner whose plans and applies the test may hold: each gate holds one
// phase, of one run or of whichever run comes next.
type Phases struct {
	runner.Runner
	mu    sync.Mutex
	gates map[string]*Gate // "<run id>/<phase>", or "/<phase>" for the next of any run
}

// NewPhases wraps r.
func NewPhases(r runner.Runner) *Phases { return &Phases{Runner: r, gates: map[string]*Gate{}} }

// Hold makes the next phase ("plan" or "apply") of run runID wait at the returned gate
// once it begins; runID "": the next such phase of any run.
func (p *Phases) Hold(t testing.TB, runID, phase string) *Gate {
	g := NewGate(t)
	p.mu.Lock()
	p.gates[runID+"/"+phase] = g
	p.mu.Unlock()
	return g
}

// wait takes the gate held for run runID's phase (or for the next of any run) and
// waits at it.
func (p *Phases) wait(ctx context.Context, runID, phase string) error {
	p.mu.Lock()
	key := runID + "/" + phase
	g := p.gates[key]
	if g == nil {
		key = "/" + phase
		g = p.gates[key]
	}
	delete(p.gates, key)
	p.mu.Unlock()
	if g == nil {
		return nil
	}
	return g.Wait(ctx)
}

func (p *Phases) Plan(ctx context.Context, req runner.PlanRequest) (runner.PlanResult, error) {
	if err := p.wait(ctx, req.RunID, "plan"); err != nil {
		return runner.PlanResult{}, err
	}
	return p.Runner.Plan(ctx, req)
}

func (p *Phases) Apply(ctx context.Context, req runner.ApplyRequest) (runner.ApplyResult, error) {
	if err := p.wait(ctx, req.RunID, "apply"); err != nil {
		return runner.ApplyResult{}, err
	}
	return p.Runner.Apply(ctx, req)
}

// Attempts hears an apply job's attempts through its hooks (runner.ApplyHooks).
type Attempts struct {
	mu    sync.Mutex
	busy  map[string]chan struct{}
	gates map[string]*Gate
}

// NewAttempts returns hooks that hold nothing until asked.
func NewAttempts() *Attempts {
	return &Attempts{busy: map[string]chan struct{}{}, gates: map[string]*Gate{}}
}

// Hooks are the apply job's hooks to install.
func (a *Attempts) Hooks() runner.ApplyHooks {
	return runner.ApplyHooks{
		Begin: func(ctx context.Context, runID string, _ int) {
			a.mu.Lock()
			g := a.gates[runID]
			delete(a.gates, runID)
			a.mu.Unlock()
			if g != nil {
				_ = g.Wait(ctx)
			}
		},
		Begun: func(runID string, _ int, _ run.State, err error) {
			if errors.Is(err, run.ErrWorkspaceBusy) {
				select {
				case a.busyOf(runID) <- struct{}{}:
				default: // a signal is already pending
				}
			}
		},
	}
}

// Busy signals when an attempt of run runID's apply found its workspace busy (signals
// coalesce).
func (a *Attempts) Busy(runID string) <-chan struct{} { return a.busyOf(runID) }

func (a *Attempts) busyOf(runID string) chan struct{} {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.busy[runID] == nil {
		a.busy[runID] = make(chan struct{}, 1)
	}
	return a.busy[runID]
}

// HoldNext makes run runID's next apply attempt wait at the returned gate before it
// asks to begin: nothing looks at the run meanwhile.
func (a *Attempts) HoldNext(t testing.TB, runID string) *Gate {
	g := NewGate(t)
	a.mu.Lock()
	a.gates[runID] = g
	a.mu.Unlock()
	return g
}
