package bench

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// fakeClock is a clock a test moves by hand.
type fakeClock struct{ t time.Time }

func (c *fakeClock) now() time.Time      { return c.t }
func (c *fakeClock) add(d time.Duration) { c.t = c.t.Add(d) }
func newFakeClock() *fakeClock           { return &fakeClock{t: time.Unix(1_000_000, 0)} }
func at(scale string, t *testing.T) struct{} {
	t.Setenv("GANTRY_BENCH_SCALE", scale)
	return struct{}{}
}

// TestABudgetIsSpentAtTheMachinesPace: on a machine four times slower than the reference, a
// second of idle-machine time lasts four seconds; when the machine gets faster mid-wait, the
// rest is spent faster; the pace allowed for is capped at ten.
func TestABudgetIsSpentAtTheMachinesPace(t *testing.T) {
	clock := newFakeClock()
	at("4", t)
	b := newBudget(time.Second, clock.now)
	clock.add(3900 * time.Millisecond)
	require.False(t, b.Spent(), "3.9 s at 4× is 0.975 s of idle-machine time")
	at("1", t)
	clock.add(30 * time.Millisecond)
	require.True(t, b.Spent(), "the last 25 ms go at the idle pace")
	require.Contains(t, b.String(), "slowdown up to 4.0×, now 1.0×")

	at("50", t)
	require.Equal(t, float64(MaxSlowdown), Slowdown())
	b = newBudget(time.Second, clock.now)
	clock.add(10 * time.Second)
	require.True(t, b.Spent(), "never more than ten times the base")
}

// recordingT records what a wait reports when it fails, instead of failing the test.
type recordingT struct {
	testing.TB
	fatal string
}

func (r *recordingT) Helper() {}
func (r *recordingT) Fatalf(format string, args ...any) {
	r.fatal = fmt.Sprintf(format, args...)
	panic(r)
}

// TestEventuallySaysWhatItSaw: a wait whose budget runs out names the condition, the last
// value it saw and the pace it allowed for; one whose event comes returns at once.
func TestEventuallySaysWhatItSaw(t *testing.T) {
	at("1", t)
	rec := &recordingT{TB: t}
	n := 0
	func() {
		defer func() { require.Equal(t, rec, recover()) }()
		Eventually(rec, "the run to succeed", 30*time.Millisecond, func() (bool, any) {
			n++
			return false, fmt.Sprintf("PLANNING (check %d)", n)
		})
	}()
	require.Contains(t, rec.fatal, "waited for the run to succeed: not within 30ms of idle-machine time")
	require.Contains(t, rec.fatal, "slowdown up to 1.0×")
	require.True(t, strings.HasSuffix(rec.fatal, fmt.Sprintf("last seen: PLANNING (check %d)", n)), rec.fatal)

	wake := make(chan struct{}, 1)
	var ready atomic.Bool
	go func() { ready.Store(true); wake <- struct{}{} }()
	Eventually(t, "the event", time.Hour, func() (bool, any) { return ready.Load(), ready.Load() }, Wake(wake), Poll(time.Hour))
}

// TestProgressRestartsTheBudget: a wait whose work progresses outlasts its budget many
// times over; once the work stops progressing, the budget runs out and says where it
// stopped.
func TestProgressRestartsTheBudget(t *testing.T) {
	at("1", t)
	rec := &recordingT{TB: t}
	start := time.Now()
	var compiled int
	func() {
		defer func() { require.Equal(t, rec, recover()) }()
		Eventually(rec, "the build", 30*time.Millisecond, func() (bool, any) {
			return false, "QUEUED"
		}, Progress(func() any {
			// 10 ms a package for 200 ms, then the build hangs at 20 packages.
			compiled = min(int(time.Since(start)/(10*time.Millisecond)), 20)
			return fmt.Sprintf("%d of 100 packages", compiled)
		}), Poll(time.Millisecond))
	}()
	require.GreaterOrEqual(t, time.Since(start), 200*time.Millisecond, "the budget restarted while the build progressed")
	require.Contains(t, rec.fatal, "waited for the build: no progress within 30ms of idle-machine time")
	require.Contains(t, rec.fatal, "(still at 20 of 100 packages); last seen: QUEUED")

	// Done while progressing: returns.
	n := 0
	Eventually(t, "the build", 30*time.Millisecond, func() (bool, any) { n++; return n == 50, n },
		Progress(func() any { return n }), Poll(time.Millisecond))
}

// TestContextEndsWhenItsBudgetIsSpent: the cause says it was the budget, and at what pace.
func TestContextEndsWhenItsBudgetIsSpent(t *testing.T) {
	at("1", t)
	ctx, cancel := Context(context.Background(), 20*time.Millisecond)
	defer cancel()
	<-ctx.Done()
	require.ErrorIs(t, context.Cause(ctx), ErrBudgetSpent)
	require.Contains(t, context.Cause(ctx).Error(), "20ms of idle-machine time")

	ctx, cancel = Context(context.Background(), time.Hour)
	cancel()
	require.True(t, errors.Is(context.Cause(ctx), context.Canceled))
}
