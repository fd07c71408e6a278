package runner

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"gantry/models/runport"
)

// Preparation is how far an executor's preparation has come (runport holds the word: the
// run page shows it).
type Preparation = runport.Preparation

// Preparing is implemented by runners that may not be able to run jobs yet. A worker
// snoozes the job of a run whose runner is preparing; pages show the progress.
type Preparing interface {
	// Preparing returns the progress and true while the runner is being prepared; false
	// once it is ready or its preparation failed (its phases then say why).
	Preparing() (Preparation, bool)
}

// ErrNotPrepared is a phase asked of a deferred runner whose preparation failed or has
// not finished.
var ErrNotPrepared = errors.New("the executor is not prepared")

// Deferred is a live runner offered from the start whose executor is prepared in the
// background: it has its name, isolation and place in the environments' choices at once,
// so people can request runs on it while the OpenTofu toolchain still builds; its jobs
// wait (see Preparing) and run once Resolve hands it the real runner.
type Deferred struct {
	name     string
	isolated bool
	progress func() Preparation

	mu     sync.RWMutex
	ready  Runner
	failed error
	done   chan struct{}
}

// NewDeferred returns a runner named name (isolated or not) whose preparation reports
// progress through progress.
func NewDeferred(name string, isolated bool, progress func() Preparation) *Deferred {
	return &Deferred{name: name, isolated: isolated, progress: progress, done: make(chan struct{})}
}

// Resolve makes r the runner's executor: jobs waiting for it run from now on. r must
// have the deferred runner's name.
func (d *Deferred) Resolve(r Runner) error {
	if r.Name() != d.name {
		return fmt.Errorf("deferred runner %s resolved with %s", d.name, r.Name())
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.ready != nil || d.failed != nil {
		return fmt.Errorf("deferred runner %s resolved twice", d.name)
	}
	d.ready = r
	close(d.done)
	return nil
}

// Fail records that the preparation failed: jobs stop waiting and fail with err.
func (d *Deferred) Fail(err error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.ready != nil || d.failed != nil {
		return
	}
	d.failed = err
	close(d.done)
}

// Done is closed once the runner is resolved or failed.
func (d *Deferred) Done() <-chan struct{} { return d.done }

func (d *Deferred) Name() string    { return d.name }
func (d *Deferred) Simulated() bool { return false }
func (d *Deferred) Isolated() bool  { return d.isolated }

// Preparing reports the progress while neither Resolve nor Fail has been called.
func (d *Deferred) Preparing() (Preparation, bool) {
	d.mu.RLock()
	waiting := d.ready == nil && d.failed == nil
	d.mu.RUnlock()
	if !waiting {
		return Preparation{}, false
	}
	return d.progress(), true
}

// get returns the real runner, or why there is none.
func (d *Deferred) get() (Runner, error) {
	d.mu.RLock()
	defer d.mu.RUnlock()
	switch {
	case d.ready != nil:
		return d.ready, nil
	case d.failed != nil:
		return nil, fmt.Errorf("%w: %s could not be prepared: %v", ErrNotPrepared, d.name, d.failed)
	}
	return nil, fmt.Errorf("%w: %s is still being prepared (%s)", ErrNotPrepared, d.name, d.progress().Waiting())
}

// Health is the real runner's health; while preparing, the progress; after a failed
// preparation, the failure.
func (d *Deferred) Health(ctx context.Context) error {
	r, err := d.get()
	if err != nil {
		return err
	}
	if h, ok := r.(interface{ Health(context.Context) error }); ok {
		return h.Health(ctx)
	}
	return nil
}

func (d *Deferred) Plan(ctx context.Context, req PlanRequest) (PlanResult, error) {
	r, err := d.get()
	if err != nil {
		return PlanResult{}, err
	}
	return r.Plan(ctx, req)
}

func (d *Deferred) Apply(ctx context.Context, req ApplyRequest) (ApplyResult, error) {
	r, err := d.get()
	if err != nil {
		return ApplyResult{}, err
	}
	return r.Apply(ctx, req)
}

func (d *Deferred) Verify(ctx context.Context, req VerifyRequest) (VerifyResult, error) {
	r, err := d.get()
	if err != nil {
		return VerifyResult{}, err
	}
	return r.Verify(ctx, req)
}
