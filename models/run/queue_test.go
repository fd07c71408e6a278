package run

import (
	"testing"

	"github.com/stretchr/testify/require"
)

// TestQueueFollowsTakeSlotsOrder pins where an approved run stands, by takeSlot's rule:
// the slot's holder holds the queue whatever its number; without one, the earliest run
// ahead does; the rest ahead give the position, and runs behind count in the total.
func TestQueueFollowsTakeSlotsOrder(t *testing.T) {
	t.Parallel()
	me := Run{ID: "run-me", Number: 5, State: Approved, Kind: KindApply}
	mine := queuedRun{ID: me.ID, Number: 5, State: Approved, Kind: KindApply}
	q := func(id string, n int, st State, k Kind) queuedRun {
		return queuedRun{ID: id, Number: n, State: st, Kind: k}
	}
	cases := []struct {
		name string
		slot string
		runs []queuedRun
		want Queue
	}{
		{"alone: next, nothing holds", "", []queuedRun{mine}, Queue{Position: 1, Waiting: 1}},
		{"behind an earlier plan", "", []queuedRun{q("run-a", 3, Planning, KindApply), mine},
			Queue{Position: 1, Waiting: 1, Holder: QueueHolder{RunID: "run-a", Number: 3, Phase: HolderPlanning}}},
		{"behind a queued run and an approved one", "", []queuedRun{q("run-a", 2, Queued, KindApply), q("run-b", 3, Approved, KindDestroy), mine, q("run-c", 7, Planning, KindApply)},
			Queue{Position: 2, Waiting: 3, Holder: QueueHolder{RunID: "run-a", Number: 2, Phase: HolderQueued}}},
		{"behind an apply, with an earlier run waiting too", "run-x", []queuedRun{q("run-a", 2, Approved, KindApply), mine, q("run-x", 8, Running, KindApply)},
			Queue{Position: 2, Waiting: 2, Holder: QueueHolder{RunID: "run-x", Number: 8, Phase: HolderApplying}}},
		{"behind a verification", "run-x", []queuedRun{q("run-x", 4, Verifying, KindCodify), mine},
			Queue{Position: 1, Waiting: 1, Holder: QueueHolder{RunID: "run-x", Number: 4, Phase: HolderVerifying}}},
		{"behind a drift check, though it is newer", "run-d", []queuedRun{mine, q("run-d", 9, Planning, KindDrift)},
			Queue{Position: 1, Waiting: 1, Holder: QueueHolder{RunID: "run-d", Number: 9, Phase: HolderCheckingDrift}}},
		{"behind an interrupted apply", "run-i", []queuedRun{q("run-i", 1, ApplyInterrupted, KindApply), mine},
			Queue{Position: 1, Waiting: 1, Holder: QueueHolder{RunID: "run-i", Number: 1, Phase: HolderInterrupted}}},
		{"later runs are behind, not ahead", "", []queuedRun{mine, q("run-l", 6, Approved, KindApply)}, Queue{Position: 1, Waiting: 2}},
	}
	for _, c := range cases {
		require.Equal(t, c.want, queueFrom(me, c.slot, c.runs), c.name)
	}
}

// TestHolderPhasesSayThemselves: every phase has words, and the list is the set.
func TestHolderPhasesSayThemselves(t *testing.T) {
	t.Parallel()
	require.Len(t, HolderPhases(), len(holderPhases))
	for _, p := range HolderPhases() {
		require.NotEmpty(t, p.Words(), p)
	}
	require.Equal(t, "#14", QueueHolder{Number: 14}.Label())
}
