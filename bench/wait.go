package bench

import (
	"context"
	"errors"
	"fmt"
	"os"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"
)

// How tests wait. A test waits for an event wherever one exists (a notification, a stream, a
// process exit, a hook in the code under test) and gives up only after a deadline that is a
// budget of idle-machine time: base × how many times slower than the reference machine this
// one runs, re-measured while the test waits and capped at MaxSlowdown. A test's verdict
// then depends on what the code does, not on how busy the machine is; a budget that runs out
// says what it waited for, the last value it saw and the pace it allowed for.
//
// A figure the product promises (a lease taken over within 30 s of a portal's death, say) is
// never waited for this way: it is measured at its number by a benchmark or the chaos suite.

// MaxSlowdown caps the slowdown a budget allows for: a machine more than ten times slower
// than the reference is broken, not busy, and a test should say so rather than wait on.
const MaxSlowdown = 10

// remeasureAfter is how old a slowdown measurement may be before the next budget that asks
// measures again: often enough to follow a machine that gets busy mid-wait, rarely enough
// that measuring costs nothing that matters (12 ms of one core at the reference pace).
const remeasureAfter = 3 * time.Second

// slowdownProbe is calibrate's work scaled down for re-measuring often: hashing 16 MiB takes
// a quarter of referenceCalibration on the reference machine.
const slowdownProbe = 16

var pace struct {
	sync.Mutex
	at      time.Time
	samples []float64 // the last three measurements
	now     float64   // their median, within [1, MaxSlowdown]
}

// Slowdown is how many times slower than the reference machine this one runs now, within
// [1, MaxSlowdown]: the median of the last three measurements, measured again when the last
// is older than a few seconds. GANTRY_BENCH_SCALE fixes it (a developer's override).
func Slowdown() float64 {
	if v, err := strconv.ParseFloat(os.Getenv("GANTRY_BENCH_SCALE"), 64); err == nil && v >= 1 {
		return min(v, MaxSlowdown)
	}
	pace.Lock()
	defer pace.Unlock()
	if !pace.at.IsZero() && time.Since(pace.at) < remeasureAfter {
		return pace.now
	}
	took := probe()
	pace.at = time.Now()
	pace.samples = append(pace.samples, float64(took)/float64(referenceCalibration*slowdownProbe/64))
	if len(pace.samples) > 3 {
		pace.samples = pace.samples[1:]
	}
	sorted := slices.Clone(pace.samples)
	slices.Sort(sorted)
	pace.now = min(max(sorted[len(sorted)/2], 1), MaxSlowdown)
	return pace.now
}

// probe times hashing slowdownProbe MiB.
func probe() time.Duration {
	return calibrateMiB(slowdownProbe)
}

// Budget is base of idle-machine time, spent at the machine's current pace: a second of
// waiting on a machine three times slower than the reference spends a third of a second.
type Budget struct {
	now     func() time.Time // time.Now; a test's clock in bench's own tests
	base    time.Duration
	began   time.Time
	last    time.Time
	spent   time.Duration // idle-machine time spent so far
	highest float64       // the largest slowdown allowed for so far
}

// NewBudget starts spending base.
func NewBudget(base time.Duration) *Budget { return newBudget(base, time.Now) }

func newBudget(base time.Duration, clock func() time.Time) *Budget {
	now := clock()
	return &Budget{now: clock, base: base, began: now, last: now, highest: 1}
}

// Spent advances the budget to now and reports whether it is used up.
func (b *Budget) Spent() bool {
	now := b.now()
	s := Slowdown()
	b.highest = max(b.highest, s)
	b.spent += time.Duration(float64(now.Sub(b.last)) / s)
	b.last = now
	return b.spent >= b.base
}

// Left is how much real time the budget has left at the current pace (for a timer).
func (b *Budget) Left() time.Duration {
	return time.Duration(float64(max(b.base-b.spent, 0)) * Slowdown())
}

// String says what the budget allowed for: "30s of idle-machine time (slowdown up to 3.2×,
// now 2.1×; waited 1m12s)".
func (b *Budget) String() string {
	return fmt.Sprintf("%s of idle-machine time (slowdown up to %.1f×, now %.1f×, capped at %d×; waited %s)",
		b.base, b.highest, Slowdown(), MaxSlowdown, b.now().Sub(b.began).Round(time.Millisecond))
}

// ErrBudgetSpent is the cause of a Context whose budget ran out.
var ErrBudgetSpent = errors.New("budget spent")

// Context returns a context that ends when base of idle-machine time is spent (its cause says
// so, with the pace allowed for), or when parent ends. It bounds an operation a test starts
// (a tofu run, a browser step) the way a Budget bounds a wait.
func Context(parent context.Context, base time.Duration) (context.Context, context.CancelFunc) {
	ctx, cancel := context.WithCancelCause(parent)
	b := NewBudget(base)
	go func() {
		for {
			select {
			case <-ctx.Done():
				return
			case <-time.After(min(b.Left(), remeasureAfter)):
				if b.Spent() {
					cancel(fmt.Errorf("%w: %s", ErrBudgetSpent, b))
					return
				}
			}
		}
	}()
	return ctx, func() { cancel(context.Canceled) }
}

// WaitOption changes how Eventually waits.
type WaitOption func(*waitOptions)

type waitOptions struct {
	wake     <-chan struct{}
	poll     time.Duration
	progress func() any
}

// Wake makes Eventually check again whenever wake delivers: the event the wait is for. Polling
// goes on beside it as a safety net, slower.
func Wake(wake <-chan struct{}) WaitOption {
	return func(o *waitOptions) { o.wake = wake; o.poll = max(o.poll, time.Second) }
}

// Poll sets how often Eventually checks without an event (default 20 ms).
func Poll(d time.Duration) WaitOption { return func(o *waitOptions) { o.poll = d } }

// Progress makes the budget a budget of no progress: it starts again whenever progress,
// read at every check, reports a value other than the last (compared with ==: a string or
// a comparable struct). A wait for work of unknown length that says how far it has come
// (a build counting its packages) then fails when the work stops progressing, not at a
// fixed minute.
func Progress(progress func() any) WaitOption { return func(o *waitOptions) { o.progress = progress } }

// Eventually waits until check reports done, checking at once, then at every wake-up (Wake) or
// poll, on the test's goroutine (so check may itself fail the test). When base of
// idle-machine time is spent first, it fails the test saying what it waited for, the last
// value check saw and the pace allowed for.
func Eventually(t testing.TB, what string, base time.Duration, check func() (done bool, seen any), opts ...WaitOption) {
	t.Helper()
	o := waitOptions{poll: 20 * time.Millisecond}
	for _, opt := range opts {
		opt(&o)
	}
	b := NewBudget(base)
	var seen, progress any
	if o.progress != nil {
		progress = o.progress()
	}
	for {
		var done bool
		if done, seen = check(); done {
			return
		}
		if o.progress != nil {
			if now := o.progress(); now != progress {
				progress, b = now, NewBudget(base)
			}
		}
		if b.Spent() {
			if o.progress != nil {
				t.Fatalf("waited for %s: no progress within %s (still at %v); last seen: %v", what, b, progress, seen)
			}
			t.Fatalf("waited for %s: not within %s; last seen: %v", what, b, seen)
		}
		timer := time.NewTimer(min(o.poll, b.Left()+time.Millisecond))
		select {
		case <-o.wake:
		case <-timer.C:
		}
		timer.Stop()
	}
}

// Later is a value a wait reports only when it fails: what it describes is read then (a
// query of the jobs of a run, say), not at every check.
type Later func() string

func (l Later) String() string { return l() }

// Receive waits for a value on ch within base of idle-machine time, failing the test saying
// what it waited for otherwise.
func Receive[T any](t testing.TB, what string, base time.Duration, ch <-chan T) T {
	t.Helper()
	b := NewBudget(base)
	for {
		timer := time.NewTimer(min(b.Left(), remeasureAfter) + time.Millisecond)
		select {
		case v := <-ch:
			timer.Stop()
			return v
		case <-timer.C:
			if b.Spent() {
				t.Fatalf("waited for %s: nothing within %s", what, b)
			}
		}
	}
}
