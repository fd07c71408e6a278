package tofutest

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"gantry/runner/tofu"
)

// fatalT records a test's failure instead of failing it.
type fatalT struct {
	testing.TB
	fatal string
}

func (f *fatalT) Helper() {}
func (f *fatalT) Fatalf(format string, args ...any) {
	f.fatal = fmt.Sprintf(format, args...)
	panic(f)
}
func (f *fatalT) Errorf(format string, args ...any) { f.fatal = fmt.Sprintf(format, args...) }
func (f *fatalT) FailNow()                          { panic(f) }

// TestAWaitFollowsTheBuildsProgress: a build that keeps counting is waited for far beyond
// the stall budget; one that stops counting is stopped (its context ends) and fails the
// test saying where it stood; one that fails fails the test with its error.
func TestAWaitFollowsTheBuildsProgress(t *testing.T) {
	t.Setenv("GANTRY_BENCH_SCALE", "1")
	stall := time.Second
	// Counting a package every 20 ms for 3 s: three stall budgets, never one without
	// progress. The fixed waits are the build's pace, what the budget is held against;
	// the budget is fifty paces, so that a busy machine (the race detector, other test
	// runs) which stretches a 20 ms sleep cannot make a steady build look stalled, as a
	// budget of three paces did (a 408 ms gap in CI at load 7).
	var p tofu.BuildProgress
	start := time.Now()
	await(t, "a slow build", stall, &p, func(ctx context.Context) error {
		for i := range 150 {
			p.SetStep(fmt.Sprintf("compiling (%d of 150 packages)", i))
			// A fixed wait on purpose: it is the build's pace, what the stall budget is
			// measured against (no event stands in for "time passes while it counts").
			time.Sleep(20 * time.Millisecond)
		}
		return nil
	})
	require.GreaterOrEqual(t, time.Since(start), 3*time.Second)

	// Counting to 3, then hanging until stopped.
	rec := &fatalT{TB: t}
	stopped := make(chan error, 1)
	p = tofu.BuildProgress{}
	func() {
		defer func() { require.Equal(t, rec, recover()) }()
		await(rec, "a hanging build", stall, &p, func(ctx context.Context) error {
			for i := range 3 {
				p.SetStep(fmt.Sprintf("compiling (%d of 20 packages)", i))
			}
			<-ctx.Done()
			stopped <- ctx.Err()
			return ctx.Err()
		})
	}()
	require.Contains(t, rec.fatal, "waited for a hanging build: no progress within 1s of idle-machine time")
	require.Contains(t, rec.fatal, "compiling (2 of 20 packages)")
	select {
	case err := <-stopped:
		require.ErrorIs(t, err, context.Canceled, "the hanging build was stopped")
	default:
		t.Fatal("the wait returned before the hanging build had stopped")
	}

	rec = &fatalT{TB: t}
	func() {
		defer func() { require.Equal(t, rec, recover()) }()
		await(rec, "a broken build", stall, &p, func(context.Context) error { return errors.New("undefined: tofu.Main") })
	}()
	require.Contains(t, rec.fatal, "undefined: tofu.Main")
}
