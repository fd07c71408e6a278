package runnertest_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"gantry/bench"
	"gantry/runner/runnertest"
)

// TestAGateHoldsUntilReleased: a gate holds its waiter until the test releases it, says
// when something waits, and lets a waiter whose context ends go with its error.
func TestAGateHoldsUntilReleased(t *testing.T) {
	t.Parallel()
	g := runnertest.NewGate(t)
	done := make(chan error, 1)
	go func() { done <- g.Wait(context.Background()) }()
	bench.Receive(t, "the waiter to reach the gate", time.Second, g.Entered)
	select {
	case err := <-done:
		t.Fatalf("the gate let its waiter go before it was released: %v", err)
	default:
	}
	g.Release()
	require.NoError(t, bench.Receive(t, "the waiter to go on", time.Second, done))
	require.NoError(t, g.Wait(context.Background()), "a released gate holds nobody")

	held := runnertest.NewGate(t)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	require.ErrorIs(t, held.Wait(ctx), context.Canceled)
}
